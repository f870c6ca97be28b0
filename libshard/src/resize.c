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

/* The horizontal pass, two output pixels per 8-lane register: each pixel's 3 bytes (and one
 * more, ignored) widen to 4 floats and meet its tap's weight (kw: per pixel pair and tap,
 * the pair's two weights each repeated 4 times). Float weights: within 1 of the
 * fixed-point pass. Reads up to ksize pixels past a window: the caller leaves that room. */
__attribute__((target("avx2,fma")))
static void row_pass_simd(const unsigned char *src, const Coeffs *c, int xoff, const float *kw,
                          int out_w, const RowOut *o)
{
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
    const __m256 half = _mm256_set1_ps(0.5f);
    int K = c->ksize;
    int xx = 0;
    for (; xx < out_w; xx += 2) {
        int last = xx + 1 >= out_w; /* an odd width: the pair's second pixel repeats the first */
        int xb = last ? xx : xx + 1;
        const unsigned char *pa = src + (size_t)(c->bounds[xx * 2] - xoff) * 3;
        const unsigned char *pb = src + (size_t)(c->bounds[xb * 2] - xoff) * 3;
        const float *w = kw + (size_t)(xx / 2) * (size_t)K * 8;
        int na = c->bounds[xx * 2 + 1], nb = c->bounds[xb * 2 + 1];
        int n = na > nb ? na : nb; /* taps past a window have weight 0 */
        /* two accumulators (even and odd taps): the FMA latency, not the throughput, would
         * bound a single chain */
        __m256 acc = half, acc2 = zero;
        int t = 0;
        for (; t + 1 < n; t += 2, pa += 6, pb += 6, w += 16) {
            int32_t va, vb, va2, vb2;
            memcpy(&va, pa, 4);
            memcpy(&vb, pb, 4);
            memcpy(&va2, pa + 3, 4);
            memcpy(&vb2, pb + 3, 4);
            __m128i two = _mm_unpacklo_epi32(_mm_cvtsi32_si128(va), _mm_cvtsi32_si128(vb));
            __m128i two2 = _mm_unpacklo_epi32(_mm_cvtsi32_si128(va2), _mm_cvtsi32_si128(vb2));
            __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(two));
            __m256 f2 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(two2));
            acc = _mm256_fmadd_ps(f, _mm256_loadu_ps(w), acc);
            acc2 = _mm256_fmadd_ps(f2, _mm256_loadu_ps(w + 8), acc2);
        }
        if (t < n) {
            int32_t va, vb;
            memcpy(&va, pa, 4);
            memcpy(&vb, pb, 4);
            __m128i two = _mm_unpacklo_epi32(_mm_cvtsi32_si128(va), _mm_cvtsi32_si128(vb));
            __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(two));
            acc = _mm256_fmadd_ps(f, _mm256_loadu_ps(w), acc);
        }
        acc = _mm256_add_ps(acc, acc2);
        acc = _mm256_min_ps(_mm256_max_ps(acc, zero), top);
        __m256i i = _mm256_cvttps_epi32(acc);
        __m128i b16 = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
        __m128i b8 = _mm_packus_epi16(b16, b16);
        uint32_t a0 = (uint32_t)_mm_cvtsi128_si32(b8), b0 = (uint32_t)_mm_extract_epi32(b8, 1);
        if (o->rgb) {
            memcpy(o->rgb + xx * 3, &a0, 3);
            if (!last)
                memcpy(o->rgb + xx * 3 + 3, &b0, 3);
        } else {
            int xa = o->flip ? out_w - 1 - xx : xx, xc = o->flip ? out_w - 2 - xx : xx + 1;
            o->plane[0][xa] = (unsigned char)a0;
            o->plane[1][xa] = (unsigned char)(a0 >> 8);
            o->plane[2][xa] = (unsigned char)(a0 >> 16);
            if (!last) {
                o->plane[0][xc] = (unsigned char)b0;
                o->plane[1][xc] = (unsigned char)(b0 >> 8);
                o->plane[2][xc] = (unsigned char)(b0 >> 16);
            }
        }
    }
}
#endif

#if defined(__x86_64__) || defined(__i386__)
/* column_pass in floats with FMA (the fast path): vpmulld is slow on common cores. */
__attribute__((target("avx2,fma")))
static void column_pass_simd(const unsigned char *src, size_t src_stride, int first, size_t n,
                             const Coeffs *c, const float *kf, int out_rows, unsigned char *dst,
                             size_t dst_stride, float *acc)
{
    for (int yy = 0; yy < out_rows; yy++) {
        int ymin = c->bounds[yy * 2] - first, ymax = c->bounds[yy * 2 + 1];
        const float *k = kf + (size_t)yy * (size_t)c->ksize;
        size_t x = 0;
        unsigned char *drow = dst + (size_t)yy * dst_stride;
        /* 32 bytes at a time: four independent FMA chains */
        for (; x + 32 <= n; x += 32) {
            __m256 a0 = _mm256_set1_ps(0.5f), a1 = a0, a2 = a0, a3 = a0;
            for (int y = 0; y < ymax; y++) {
                const unsigned char *row = src + (size_t)(ymin + y) * src_stride + x;
                __m256i v = _mm256_loadu_si256((const __m256i *)row);
                __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
                __m256 ky = _mm256_set1_ps(k[y]);
                a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), ky, a0);
                a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), ky, a1);
                a2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), ky, a2);
                a3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), ky, a3);
            }
            const __m256 z = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
            __m256i i0 = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(a0, z), top));
            __m256i i1 = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(a1, z), top));
            __m256i i2 = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(a2, z), top));
            __m256i i3 = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(a3, z), top));
            /* packs work per 128-bit lane: put the lanes back in order afterwards */
            __m256i p01 = _mm256_packs_epi32(i0, i1), p23 = _mm256_packs_epi32(i2, i3);
            __m256i b = _mm256_packus_epi16(p01, p23);
            b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(drow + x), b);
        }
        for (; x + 8 <= n; x += 8) {
            __m256 a = _mm256_set1_ps(0.5f);
            for (int y = 0; y < ymax; y++) {
                const unsigned char *row = src + (size_t)(ymin + y) * src_stride + x;
                __m128i v;
                memcpy(&v, row, 8);
                __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
                a = _mm256_fmadd_ps(f, _mm256_set1_ps(k[y]), a);
            }
            a = _mm256_min_ps(_mm256_max_ps(a, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
            __m256i i = _mm256_cvttps_epi32(a);
            __m128i b16 = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
            __m128i b8 = _mm_packus_epi16(b16, b16);
            _mm_storel_epi64((__m128i *)(dst + (size_t)yy * dst_stride + x), b8);
        }
        for (; x < n; x++) {
            float a = 0.5f;
            for (int y = 0; y < ymax; y++)
                a += src[(size_t)(ymin + y) * src_stride + x] * k[y];
            dst[(size_t)yy * dst_stride + x] = (unsigned char)(a < 0 ? 0 : a > 255 ? 255 : a);
        }
    }
    (void)acc;
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
            column_pass_simd(box, in_stride, ybox0, box_stride, &cv, kv, out_h, tmp, box_stride, NULL);
            for (int y = 0; y < out_h; y++) {
                RowOut o = {planar ? NULL : out + (size_t)y * out_stride,
                            {out + (size_t)y * out_w, out + plane + (size_t)y * out_w,
                             out + 2 * plane + (size_t)y * out_w},
                            flip};
                row_pass_simd(tmp + (size_t)y * box_stride, &ch, xbox0, kw, out_w, &o);
            }
            done = 1;
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
