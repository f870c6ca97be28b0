/*
 * Separable resampling as PIL does it (libImaging/Resample.c's method, written anew): a
 * triangle (bilinear) filter whose support grows with the shrink factor, so shrinking
 * averages instead of aliasing; coefficients normalized, applied in 22-bit fixed point,
 * horizontal pass first with an 8-bit intermediate, then vertical.
 */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "shard/decode.h"

#define PRECISION_BITS (32 - 8 - 2)

typedef struct Coeffs {
    int *bounds; /* per output pixel: first input index, count */
    int32_t *k;  /* per output pixel: ksize fixed-point weights */
    int ksize;
} Coeffs;

static double triangle(double x)
{
    if (x < 0)
        x = -x;
    return x < 1 ? 1 - x : 0;
}

static int coeffs_make(Coeffs *c, int in_size, double in0, double in1, int out_size)
{
    double scale = (in1 - in0) / out_size;
    double filterscale = scale < 1 ? 1 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    c->ksize = ksize;
    c->bounds = malloc((size_t)out_size * 2 * sizeof *c->bounds);
    c->k = malloc((size_t)out_size * (size_t)ksize * sizeof *c->k);
    double *kd = malloc((size_t)ksize * sizeof *kd);
    if (!c->bounds || !c->k || !kd) {
        free(c->bounds);
        free(c->k);
        free(kd);
        return SHARD_ERR_NOMEM;
    }
    double ss = 1.0 / filterscale;
    for (int xx = 0; xx < out_size; xx++) {
        double center = in0 + (xx + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        double ww = 0;
        int x;
        for (x = 0; x < xmax && x < ksize; x++) {
            double w = triangle((x + xmin - center + 0.5) * ss);
            kd[x] = w;
            ww += w;
        }
        if (x < xmax)
            xmax = x;
        int32_t *k = c->k + (size_t)xx * (size_t)ksize;
        for (x = 0; x < ksize; x++) {
            double w = x < xmax && ww != 0 ? kd[x] / ww : 0;
            /* round half away from zero, as PIL */
            k[x] = (int32_t)(w < 0 ? w * (1 << PRECISION_BITS) - 0.5 : w * (1 << PRECISION_BITS) + 0.5);
        }
        c->bounds[xx * 2] = xmin;
        c->bounds[xx * 2 + 1] = xmax;
    }
    free(kd);
    return 0;
}

static void coeffs_free(Coeffs *c)
{
    free(c->bounds);
    free(c->k);
}

static inline unsigned char clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
}

/* One pass of the filter along columns: out row yy of width n is the weighted sum of the
 * input rows its coefficients name (row r of the input at src + (r - first) * stride).
 * Contiguous rows, so the compiler vectorizes the inner loop. */
__attribute__((target_clones("avx2", "default")))
static void column_pass(const unsigned char *src, size_t src_stride, int first, size_t n,
                        const Coeffs *c, int out_rows, unsigned char *dst, size_t dst_stride,
                        int32_t *acc)
{
    for (int yy = 0; yy < out_rows; yy++) {
        int ymin = c->bounds[yy * 2] - first, ymax = c->bounds[yy * 2 + 1];
        const int32_t *k = c->k + (size_t)yy * (size_t)c->ksize;
        for (size_t x = 0; x < n; x++)
            acc[x] = 1 << (PRECISION_BITS - 1);
        for (int y = 0; y < ymax; y++) {
            const unsigned char *row = src + (size_t)(ymin + y) * src_stride;
            int32_t ky = k[y];
            for (size_t x = 0; x < n; x++)
                acc[x] += row[x] * ky;
        }
        unsigned char *d = dst + (size_t)yy * dst_stride;
        for (size_t x = 0; x < n; x++)
            d[x] = clip8(acc[x]);
    }
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
        dst[xx * 3] = clip8(s0);
        dst[xx * 3 + 1] = clip8(s1);
        dst[xx * 3 + 2] = clip8(s2);
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* The horizontal pass with one SIMD lane per channel: a pixel's 3 bytes (and one more,
 * ignored) widen to 4 floats, times the tap's weight. Float weights: within 1 of the
 * fixed-point pass. Reads one byte past the last pixel: the caller leaves room. */
__attribute__((target("avx2,fma")))
static void row_pass_simd(const unsigned char *src, const Coeffs *c, int xoff, const float *kf,
                          int out_w, unsigned char *dst)
{
    const __m128 zero = _mm_setzero_ps(), top = _mm_set1_ps(255.0f), half = _mm_set1_ps(0.5f);
    for (int xx = 0; xx < out_w; xx++) {
        int xmin = c->bounds[xx * 2] - xoff, xmax = c->bounds[xx * 2 + 1];
        const float *k = kf + (size_t)xx * (size_t)c->ksize;
        const unsigned char *p = src + (size_t)xmin * 3;
        __m128 acc = half;
        for (int x = 0; x < xmax; x++, p += 3) {
            int32_t v;
            memcpy(&v, p, 4);
            __m128 px = _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(v)));
            acc = _mm_fmadd_ps(px, _mm_set1_ps(k[x]), acc);
        }
        acc = _mm_min_ps(_mm_max_ps(acc, zero), top);
        __m128i i = _mm_cvttps_epi32(acc);
        i = _mm_packus_epi16(_mm_packs_epi32(i, i), i);
        int32_t out = _mm_cvtsi128_si32(i);
        memcpy(dst + xx * 3, &out, 3);
    }
}
#endif

/* The two passes in PIL's order (horizontal first, 8 bits in between): PIL's bytes. With
 * vertical_first, the vertical pass (vectorized over whole rows) runs first on the input's
 * rows, so the per-pixel horizontal pass sees out_h rows instead of the box's: faster when
 * shrinking, and within 1 of PIL, because only the intermediate rounding moves. */
static int resize(const unsigned char *in, int w, int h, double x0, double y0, double bw,
                  double bh, unsigned char *out, int out_w, int out_h, int vertical_first)
{
    if (w <= 0 || h <= 0 || out_w <= 0 || out_h <= 0 || bw <= 0 || bh <= 0 || x0 < 0 || y0 < 0 ||
        x0 + bw > w + 1e-6 || y0 + bh > h + 1e-6)
        return SHARD_ERR_INVALID;
    Coeffs ch, cv;
    if (coeffs_make(&ch, w, x0, x0 + bw, out_w))
        return SHARD_ERR_NOMEM;
    if (coeffs_make(&cv, h, y0, y0 + bh, out_h)) {
        coeffs_free(&ch);
        return SHARD_ERR_NOMEM;
    }
    int ybox0 = cv.bounds[0];
    int rows = cv.bounds[(out_h - 1) * 2] + cv.bounds[(out_h - 1) * 2 + 1] - ybox0;
    int xbox0 = ch.bounds[0];
    int cols = ch.bounds[(out_w - 1) * 2] + ch.bounds[(out_w - 1) * 2 + 1] - xbox0;
    size_t in_stride = (size_t)w * 3, out_stride = (size_t)out_w * 3, box_stride = (size_t)cols * 3;
    size_t tmp_size = (vertical_first ? (size_t)out_h * box_stride : (size_t)rows * out_stride) + 16;
    size_t acc_n = vertical_first ? box_stride : out_stride;
    unsigned char *tmp = malloc(tmp_size);
    int32_t *acc = malloc(acc_n * sizeof *acc);
    int rc = 0;
    if (!tmp || !acc) {
        rc = SHARD_ERR_NOMEM;
    } else if (vertical_first) {
        /* only the columns the horizontal pass reads */
        column_pass(in + (size_t)ybox0 * in_stride + (size_t)xbox0 * 3, in_stride, ybox0,
                    box_stride, &cv, out_h, tmp, box_stride, acc);
#if defined(__x86_64__) || defined(__i386__)
        float *kf = NULL;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            (kf = malloc((size_t)out_w * (size_t)ch.ksize * sizeof *kf))) {
            for (size_t i = 0; i < (size_t)out_w * (size_t)ch.ksize; i++)
                kf[i] = (float)ch.k[i] / (float)(1 << PRECISION_BITS);
            for (int y = 0; y < out_h; y++)
                row_pass_simd(tmp + (size_t)y * box_stride, &ch, xbox0, kf, out_w,
                              out + (size_t)y * out_stride);
            free(kf);
        } else
#endif
            for (int y = 0; y < out_h; y++)
                row_pass(tmp + (size_t)y * box_stride, &ch, xbox0, out_w, out + (size_t)y * out_stride);
    } else {
        for (int y = 0; y < rows; y++)
            row_pass(in + (size_t)(y + ybox0) * in_stride, &ch, 0, out_w, tmp + (size_t)y * out_stride);
        column_pass(tmp, out_stride, ybox0, out_stride, &cv, out_h, out, out_stride, acc);
    }
    free(tmp);
    free(acc);
    coeffs_free(&ch);
    coeffs_free(&cv);
    return rc;
}

int shard_resize_fast(const unsigned char *in, int w, int h, double x0, double y0, double bw,
                      double bh, unsigned char *out, int out_w, int out_h)
{
    return resize(in, w, h, x0, y0, bw, bh, out, out_w, out_h, 1);
}

int shard_resize_rgb(const unsigned char *in, int w, int h, double x0, double y0, double bw,
                     double bh, unsigned char *out, int out_w, int out_h)
{
    return resize(in, w, h, x0, y0, bw, bh, out, out_w, out_h, 0);
}
