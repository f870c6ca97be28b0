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
/* Where the horizontal pass puts a row: interleaved RGB, or three planes (flipped or not),
 * which spares the batch a separate pass to reorder channels. */
typedef struct RowOut {
    unsigned char *rgb;          /* interleaved, or NULL */
    unsigned char *plane[3];     /* with rgb NULL: this row of each plane */
    int flip;
} RowOut;

/* Both passes for one output row at a time, in floats, with no 8-bit rounding in between
 * (within 1 of PIL's two-pass bytes): the vertical sum of the box's rows lands in a row of
 * floats that stays in L1, and the horizontal pass reads each pixel there as one 4-float
 * load (its 3 channels and the next value, which meets no weight that matters: the 4th lane
 * is dropped). Two output pixels share an 8-lane register; kw holds, per pixel pair and
 * tap, the pair's two weights each repeated 4 times; taps past a window weigh 0. */
__attribute__((target("avx2,fma")))
static void fused_pass_simd(const unsigned char *box, size_t in_stride, int ybox0, size_t n,
                            const Coeffs *cv, const float *kv, const Coeffs *ch, int xoff,
                            const float *kw, int out_w, int out_h, float *rowf,
                            const RowOut *first_row, size_t plane_step, size_t rgb_step)
{
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
    for (int yy = 0; yy < out_h; yy++) {
        int ymin = cv->bounds[yy * 2] - ybox0, ymax = cv->bounds[yy * 2 + 1];
        const float *k = kv + (size_t)yy * (size_t)cv->ksize;
        size_t x = 0;
        for (; x + 32 <= n; x += 32) {
            __m256 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
            for (int y = 0; y < ymax; y++) {
                const unsigned char *row = box + (size_t)(ymin + y) * in_stride + x;
                __m256i v = _mm256_loadu_si256((const __m256i *)row);
                __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
                __m256 ky = _mm256_set1_ps(k[y]);
                a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), ky, a0);
                a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), ky, a1);
                a2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), ky, a2);
                a3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), ky, a3);
            }
            _mm256_storeu_ps(rowf + x, a0);
            _mm256_storeu_ps(rowf + x + 8, a1);
            _mm256_storeu_ps(rowf + x + 16, a2);
            _mm256_storeu_ps(rowf + x + 24, a3);
        }
        for (; x < n; x++) {
            float a = 0;
            for (int y = 0; y < ymax; y++)
                a += box[(size_t)(ymin + y) * in_stride + x] * k[y];
            rowf[x] = a;
        }
        RowOut o = *first_row;
        if (o.rgb)
            o.rgb += (size_t)yy * rgb_step;
        for (int c = 0; c < 3; c++)
            o.plane[c] += (size_t)yy * plane_step;
        int K = ch->ksize;
        for (int xx = 0; xx < out_w; xx += 2) {
            int last = xx + 1 >= out_w;
            int xb = last ? xx : xx + 1;
            const float *pa = rowf + (size_t)(ch->bounds[xx * 2] - xoff) * 3;
            const float *pb = rowf + (size_t)(ch->bounds[xb * 2] - xoff) * 3;
            const float *w = kw + (size_t)(xx / 2) * (size_t)K * 8;
            int na = ch->bounds[xx * 2 + 1], nb = ch->bounds[xb * 2 + 1];
            int m = na > nb ? na : nb;
            __m256 acc = _mm256_set1_ps(0.5f), acc2 = zero;
            int t = 0;
            for (; t + 1 < m; t += 2, pa += 6, pb += 6, w += 16) {
                __m256 f = _mm256_set_m128(_mm_loadu_ps(pb), _mm_loadu_ps(pa));
                __m256 f2 = _mm256_set_m128(_mm_loadu_ps(pb + 3), _mm_loadu_ps(pa + 3));
                acc = _mm256_fmadd_ps(f, _mm256_loadu_ps(w), acc);
                acc2 = _mm256_fmadd_ps(f2, _mm256_loadu_ps(w + 8), acc2);
            }
            if (t < m) {
                __m256 f = _mm256_set_m128(_mm_loadu_ps(pb), _mm_loadu_ps(pa));
                acc = _mm256_fmadd_ps(f, _mm256_loadu_ps(w), acc);
            }
            acc = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(acc, acc2), zero), top);
            __m256i i = _mm256_cvttps_epi32(acc);
            __m128i b16 = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
            __m128i b8 = _mm_packus_epi16(b16, b16);
            uint32_t a0 = (uint32_t)_mm_cvtsi128_si32(b8), b0 = (uint32_t)_mm_extract_epi32(b8, 1);
            if (o.rgb) {
                memcpy(o.rgb + xx * 3, &a0, 3);
                if (!last)
                    memcpy(o.rgb + xx * 3 + 3, &b0, 3);
            } else {
                int xa = o.flip ? out_w - 1 - xx : xx, xc = o.flip ? out_w - 2 - xx : xx + 1;
                o.plane[0][xa] = (unsigned char)a0;
                o.plane[1][xa] = (unsigned char)(a0 >> 8);
                o.plane[2][xa] = (unsigned char)(a0 >> 16);
                if (!last) {
                    o.plane[0][xc] = (unsigned char)b0;
                    o.plane[1][xc] = (unsigned char)(b0 >> 8);
                    o.plane[2][xc] = (unsigned char)(b0 >> 16);
                }
            }
        }
    }
}
#endif


/* The two passes in PIL's order (horizontal first, 8 bits in between): PIL's bytes. With
 * vertical_first, the vertical pass (vectorized over whole rows) runs first on the input's
 * rows, so the per-pixel horizontal pass sees out_h rows instead of the box's: faster when
 * shrinking, and within 1 of PIL, because only the intermediate rounding moves. */
static int resize(const unsigned char *in, int w, int h, double x0, double y0, double bw,
                  double bh, unsigned char *out, int out_w, int out_h, int vertical_first,
                  int planar, int flip)
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
    /* room for the SIMD pass reading a whole ksize window past the last pixel */
    size_t tmp_size = (vertical_first ? (size_t)out_h * box_stride : (size_t)rows * out_stride) +
                      (size_t)ch.ksize * 3 + 16;
    size_t acc_n = vertical_first ? box_stride : out_stride;
    unsigned char *tmp = malloc(tmp_size);
    int32_t *acc = malloc(acc_n * sizeof *acc);
    int rc = 0;
    if (!tmp || !acc) {
        rc = SHARD_ERR_NOMEM;
    } else if (vertical_first) {
        /* only the columns the horizontal pass reads */
        const unsigned char *box = in + (size_t)ybox0 * in_stride + (size_t)xbox0 * 3;
        size_t plane = (size_t)out_w * (size_t)out_h;
        int done = 0;
#if defined(__x86_64__) || defined(__i386__)
        float *kw = NULL, *kv = NULL;
        size_t pairs = ((size_t)out_w + 1) / 2, K = (size_t)ch.ksize;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            (kw = malloc(pairs * K * 8 * sizeof *kw)) &&
            (kv = malloc((size_t)out_h * (size_t)cv.ksize * sizeof *kv))) {
            for (size_t p = 0; p < pairs; p++) {
                size_t a = 2 * p, b = 2 * p + 1 < (size_t)out_w ? 2 * p + 1 : a;
                for (size_t t = 0; t < K; t++)
                    for (int l = 0; l < 8; l++)
                        kw[(p * K + t) * 8 + (size_t)l] =
                            (float)ch.k[(l < 4 ? a : b) * K + t] / (float)(1 << PRECISION_BITS);
            }
            for (size_t i = 0; i < (size_t)out_h * (size_t)cv.ksize; i++)
                kv[i] = (float)cv.k[i] / (float)(1 << PRECISION_BITS);
            /* one row of floats, with room for the last window's 4-float loads */
            float *rowf = malloc((box_stride + (size_t)ch.ksize * 3 + 8) * sizeof *rowf);
            if (rowf) {
                memset(rowf + box_stride, 0, ((size_t)ch.ksize * 3 + 8) * sizeof *rowf);
                RowOut o = {planar ? NULL : out, {out, out + plane, out + 2 * plane}, flip};
                fused_pass_simd(box, in_stride, ybox0, box_stride, &cv, kv, &ch, xbox0, kw, out_w,
                                out_h, rowf, &o, (size_t)out_w, out_stride);
                free(rowf);
                done = 1;
            }
        }
        free(kw);
        free(kv);
#endif
        if (!done) {
            unsigned char *rgb = planar ? malloc((size_t)out_h * out_stride) : out;
            if (!rgb) {
                rc = SHARD_ERR_NOMEM;
            } else {
                column_pass(box, in_stride, ybox0, box_stride, &cv, out_h, tmp, box_stride, acc);
                for (int y = 0; y < out_h; y++)
                    row_pass(tmp + (size_t)y * box_stride, &ch, xbox0, out_w, rgb + (size_t)y * out_stride);
                if (planar) {
                    for (int y = 0; y < out_h; y++)
                        for (int x = 0; x < out_w; x++) {
                            const unsigned char *p = rgb + (size_t)y * out_stride + (size_t)x * 3;
                            size_t at = (size_t)y * out_w + (size_t)(flip ? out_w - 1 - x : x);
                            out[at] = p[0], out[plane + at] = p[1], out[2 * plane + at] = p[2];
                        }
                    free(rgb);
                }
            }
        }
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
                      double bh, unsigned char *out, int out_w, int out_h, int planar, int flip)
{
    return resize(in, w, h, x0, y0, bw, bh, out, out_w, out_h, 1, planar, flip);
}

int shard_resize_rgb(const unsigned char *in, int w, int h, double x0, double y0, double bw,
                     double bh, unsigned char *out, int out_w, int out_h)
{
    return resize(in, w, h, x0, y0, bw, bh, out, out_w, out_h, 0, 0, 0);
}
