/*
 * Separable resampling as PIL does it (libImaging/Resample.c's method, written anew): a
 * triangle (bilinear) filter whose support grows with the shrink factor, so shrinking
 * averages instead of aliasing; coefficients normalized, applied in 22-bit fixed point,
 * horizontal pass first with an 8-bit intermediate, then vertical.
 *
 * The decode pool's variant (shard_resize_fast, within 1 of PIL) runs the vertical pass
 * first, with no 8-bit rounding in between, in SIMD code chosen at run time on x86-64
 * (x86/dispatch.c: integer AVX-512 VBMI + VNNI, or an integer vertical and a float
 * horizontal pass in AVX2, also built for AVX-512VL), or in the plain C here, which every
 * other machine runs. LIBSHARD_SIMD caps the choice.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode/resize.h"
#include "decode/resample.h"
#include "decode/scratch.h"
#include "shard/decode.h"

/* The filter's windows and weights for one axis, in the scratch buffers named. */
static int coeffs_make(Coeffs *c, ShardScratch *sc, int bounds_buf, int k_buf, int in_size,
                       double in0, double in1, int out_size)
{
    double scale = (in1 - in0) / out_size;
    int ksize = (int)ceil(shard_pil_filterscale(scale)) * 2 + 1;
    c->ksize = ksize;
    c->bounds = shard_scratch(sc, bounds_buf, (size_t)out_size * 2 * sizeof *c->bounds);
    c->k = shard_scratch(sc, k_buf, (size_t)out_size * (size_t)ksize * sizeof *c->k);
    double *kd = shard_scratch(sc, SHARD_SCR_KD, (size_t)ksize * sizeof *kd);
    if (!c->bounds || !c->k || !kd)
        return SHARD_ERR_NOMEM;
    for (int xx = 0; xx < out_size; xx++) {
        double center;
        int xmin, xmax = shard_pil_window(in_size, in0, scale, xx, &center, &xmin);
        double ww = 0;
        int x;
        for (x = 0; x < xmax && x < ksize; x++) {
            double w = shard_pil_weight(x, xmin, center, scale);
            kd[x] = w;
            ww += w;
        }
        if (x < xmax)
            xmax = x;
        int32_t *k = c->k + (size_t)xx * (size_t)ksize;
        for (x = 0; x < ksize; x++) {
            k[x] = shard_pil_fixed(x < xmax && ww != 0 ? kd[x] / ww : 0);
        }
        c->bounds[xx * 2] = xmin;
        c->bounds[xx * 2 + 1] = xmax;
    }
    return 0;
}

/* The column pass for this CPU: the same loop built for AVX2 where the CPU has it
 * (x86/dispatch.c), plain otherwise. Chosen by hand rather than by an ifunc (target_clones),
 * whose resolver runs before a sanitizer's runtime is ready. */
static void column_pass(const unsigned char *src, size_t src_stride, int first, size_t n,
                        const Coeffs *c, int out_rows, unsigned char *dst, size_t dst_stride,
                        int32_t *acc)
{
#ifdef SHARD_RESIZE_X86
    if (shard_resize_cpu_level() >= SHARD_SIMD_AVX2) {
        shard_column_pass_avx2(src, src_stride, first, n, c, out_rows, dst, dst_stride, acc);
        return;
    }
#endif
    shard_column_pass(src, src_stride, first, n, c, out_rows, dst, dst_stride, acc);
}

/* PIL's horizontal pass: per output pixel, a window of whole pixels times its weights. */
static void row_pass(const unsigned char *src, const Coeffs *c, int xoff, int out_w,
                     unsigned char *dst)
{
    for (int xx = 0; xx < out_w; xx++) {
        int xmin = c->bounds[xx * 2] - xoff, xmax = c->bounds[xx * 2 + 1];
        const int32_t *k = c->k + (size_t)xx * (size_t)c->ksize;
        int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
        const unsigned char *p = src + (size_t)xmin * 3;
        for (int x = 0; x < xmax; x++, p += 3) {
            s0 += p[0] * k[x];
            s1 += p[1] * k[x];
            s2 += p[2] * k[x];
        }
        dst[xx * 3] = shard_clip8(s0);
        dst[xx * 3 + 1] = shard_clip8(s1);
        dst[xx * 3 + 2] = shard_clip8(s2);
    }
}

/* Without AVX2, and for PIL's exact bytes: integer passes, 8 bits in between. */
static int resize_scalar(ShardScratch *sc, const unsigned char *in, size_t in_stride, int ybox0,
                         int rows, const unsigned char *box, size_t box_stride, const Coeffs *ch,
                         const Coeffs *cv, int xbox0, unsigned char *out, int out_w, int out_h,
                         int vertical_first, int planar, int flip)
{
    size_t out_stride = (size_t)out_w * 3, plane = (size_t)out_w * (size_t)out_h;
    size_t tmp_size = vertical_first ? (size_t)out_h * box_stride : (size_t)rows * out_stride;
    unsigned char *tmp = shard_scratch(sc, SHARD_SCR_TMP, tmp_size);
    int32_t *acc = shard_scratch(sc, SHARD_SCR_ACC, (vertical_first ? box_stride : out_stride) * sizeof *acc);
    unsigned char *rgb = vertical_first && planar ? shard_scratch(sc, SHARD_SCR_RGB, (size_t)out_h * out_stride)
                                                  : out;
    if (!tmp || !acc || !rgb)
        return SHARD_ERR_NOMEM;
    if (vertical_first) {
        column_pass(box, in_stride, ybox0, box_stride, cv, out_h, tmp, box_stride, acc);
        for (int y = 0; y < out_h; y++)
            row_pass(tmp + (size_t)y * box_stride, ch, xbox0, out_w, rgb + (size_t)y * out_stride);
        if (planar)
            for (int y = 0; y < out_h; y++)
                for (int x = 0; x < out_w; x++) {
                    const unsigned char *p = rgb + (size_t)y * out_stride + (size_t)x * 3;
                    size_t at = (size_t)y * out_w + (size_t)(flip ? out_w - 1 - x : x);
                    out[at] = p[0], out[plane + at] = p[1], out[2 * plane + at] = p[2];
                }
    } else {
        for (int y = 0; y < rows; y++)
            row_pass(in + (size_t)(y + ybox0) * in_stride, ch, 0, out_w, tmp + (size_t)y * out_stride);
        column_pass(tmp, out_stride, ybox0, out_stride, cv, out_h, out, out_stride, acc);
    }
    return 0;
}

/* LIBSHARD_SIMD (none, avx2, avx512, vnni) caps the choice, as libjpeg-turbo's
 * JSIMD_FORCE* variables do: to compare the paths' speed and bytes. */
static const char *const simd_names[] = {"none", "avx2", "avx512", "vnni"};

static int simd_level(ShardScratch *sc)
{
    if (sc->simd)
        return sc->simd - 1;
#ifdef SHARD_RESIZE_X86
    int level = shard_resize_cpu_level();
#else
    int level = SHARD_SIMD_NONE;
#endif
    const char *cap = getenv("LIBSHARD_SIMD");
    for (int i = 0; cap && i < level; i++)
        if (!strcmp(cap, simd_names[i]))
            level = i;
    sc->simd = level + 1;
    return level;
}

/* The two passes in PIL's order (horizontal first, 8 bits in between): PIL's bytes. With
 * vertical_first, the vertical pass (vectorized over whole rows) runs first on the input's
 * rows, so the per-pixel horizontal pass sees out_h rows instead of the box's: faster when
 * shrinking, and within 1 of PIL, because only the intermediate rounding moves. */
static int resize(ShardScratch *sc, const unsigned char *in, int w, int h, double x0, double y0,
                  double bw, double bh, unsigned char *out, int out_w, int out_h,
                  int vertical_first, int planar, int flip)
{
    if (w <= 0 || h <= 0 || out_w <= 0 || out_h <= 0 || bw <= 0 || bh <= 0 || x0 < 0 || y0 < 0 ||
        x0 + bw > w + 1e-6 || y0 + bh > h + 1e-6)
        return SHARD_ERR_INVALID;
    Coeffs ch, cv;
    if (coeffs_make(&ch, sc, SHARD_SCR_HB, SHARD_SCR_HK, w, x0, x0 + bw, out_w) ||
        coeffs_make(&cv, sc, SHARD_SCR_VB, SHARD_SCR_VK, h, y0, y0 + bh, out_h))
        return SHARD_ERR_NOMEM;
    int ybox0 = cv.bounds[0];
    int rows = cv.bounds[(out_h - 1) * 2] + cv.bounds[(out_h - 1) * 2 + 1] - ybox0;
    int xbox0 = ch.bounds[0];
    int cols = ch.bounds[(out_w - 1) * 2] + ch.bounds[(out_w - 1) * 2 + 1] - xbox0;
    size_t in_stride = (size_t)w * 3, box_stride = (size_t)cols * 3;
    /* only the columns the horizontal pass reads */
    const unsigned char *box = in + (size_t)ybox0 * in_stride + (size_t)xbox0 * 3;
#ifdef SHARD_RESIZE_X86
    int level = vertical_first ? simd_level(sc) : SHARD_SIMD_NONE;
    if (level != SHARD_SIMD_NONE) {
        ShardResizeBox b = {box, in_stride, box_stride, ybox0, xbox0, rows, cols, &ch, &cv};
        return shard_resize_simd(sc, level, &b, out, out_w, out_h, planar, flip);
    }
#endif
    return resize_scalar(sc, in, in_stride, ybox0, rows, box, box_stride, &ch, &cv, xbox0, out,
                         out_w, out_h, vertical_first, planar, flip);
}

const char *shard_resize_path(ShardScratch *sc)
{
    return simd_names[simd_level(sc)];
}

int shard_resize_fast(ShardScratch *sc, const unsigned char *in, int w, int h, double x0,
                      double y0, double bw, double bh, unsigned char *out, int out_w, int out_h,
                      int planar, int flip)
{
    return resize(sc, in, w, h, x0, y0, bw, bh, out, out_w, out_h, 1, planar, flip);
}

int shard_resize_rgb(const unsigned char *in, int w, int h, double x0, double y0, double bw,
                     double bh, unsigned char *out, int out_w, int out_h)
{
    ShardScratch sc = {0};
    int rc = resize(&sc, in, w, h, x0, y0, bw, bh, out, out_w, out_h, 0, 0, 0);
    shard_scratch_release(&sc);
    return rc;
}
