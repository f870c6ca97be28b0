/*
 * Separable resampling as PIL does it (libImaging/Resample.c's method, written anew): a
 * triangle (bilinear) filter whose support grows with the shrink factor, so shrinking
 * averages instead of aliasing; coefficients normalized, applied in 22-bit fixed point,
 * horizontal pass first with an 8-bit intermediate, then vertical.
 *
 * The decode pool's variant (shard_resize_fast, within 1 of PIL) runs the vertical pass
 * first, with no 8-bit rounding in between, in SIMD code chosen at run time: integer
 * AVX-512 VBMI + VNNI, or an integer vertical and a float horizontal pass in AVX2 (also
 * built for AVX-512VL), or plain C. LIBSHARD_SIMD caps the choice.
 */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "shard/decode.h"

#define PRECISION_BITS (32 - 8 - 2)
#define VBITS 14 /* the SIMD pass's vertical weights: 16-bit, 1.0 fits */

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

/* The filter's windows and weights for one axis, in the scratch buffers named. */
static int coeffs_make(Coeffs *c, ShardScratch *sc, int bounds_buf, int k_buf, int in_size,
                       double in0, double in1, int out_size)
{
    double scale = (in1 - in0) / out_size;
    double filterscale = scale < 1 ? 1 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    c->ksize = ksize;
    c->bounds = shard_scratch(sc, bounds_buf, (size_t)out_size * 2 * sizeof *c->bounds);
    c->k = shard_scratch(sc, k_buf, (size_t)out_size * (size_t)ksize * sizeof *c->k);
    double *kd = shard_scratch(sc, SHARD_SCR_KD, (size_t)ksize * sizeof *kd);
    if (!c->bounds || !c->k || !kd)
        return SHARD_ERR_NOMEM;
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
    return 0;
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
/* Weights in 16 bits (VBITS of fraction) for pmaddwd and vpdpwssd, each window's rounded
 * to sum to exactly 1 so that flat areas stay exact. */
static void weights16(const Coeffs *c, int n, int16_t *out)
{
    for (int i = 0; i < n; i++) {
        const int32_t *k = c->k + (size_t)i * (size_t)c->ksize;
        int16_t *o = out + (size_t)i * (size_t)c->ksize;
        int sum = 0, big = 0;
        for (int t = 0; t < c->ksize; t++) {
            int v = (k[t] + (1 << (PRECISION_BITS - VBITS - 1))) >> (PRECISION_BITS - VBITS);
            o[t] = (int16_t)v;
            sum += v;
            if (v > o[big])
                big = t;
        }
        o[big] = (int16_t)(o[big] + (1 << VBITS) - sum);
    }
}

/* Where the result goes: interleaved RGB rows, or three planes (mirrored or not), which
 * spares the batch a separate pass to reorder channels. */
typedef struct ResizeOut {
    unsigned char *rgb;      /* interleaved, or NULL */
    unsigned char *plane[3]; /* with rgb NULL: the three planes */
    int flip;
} ResizeOut;

/* One output row's vertical sums over n bytes of the box: 32 bytes per step, two input rows
 * per pmaddwd (16-bit weights, VBITS of fraction), written as floats. rows[] and w[] hold
 * an even number of taps (a last one of weight 0). */
__attribute__((target("avx2,fma")))
static void vertical_row(const unsigned char *const *rows, const int32_t *w, int taps, size_t n,
                         float *dst)
{
    const __m256i z = _mm256_setzero_si256();
    unsigned char tail[64][32]; /* the last partial step's bytes, for up to 64 taps */
    for (size_t p = 0; p < n; p += 32) {
        int part = p + 32 > n;
        if (part && taps > 64)
            part = 2; /* no room: the scalar loop below */
        if (part == 1)
            for (int y = 0; y < taps; y++) {
                memset(tail[y], 0, 32);
                memcpy(tail[y], rows[y] + p, n - p);
            }
        if (part == 2) {
            for (size_t i = p; i < n; i++) {
                int32_t acc = 0;
                for (int y = 0; y < taps; y += 2)
                    acc += rows[y][i] * (int16_t)(w[y / 2] & 0xffff) + rows[y + 1][i] * (int16_t)(w[y / 2] >> 16);
                dst[i] = (float)acc;
            }
            memset(dst + n, 0, (((n + 31) & ~(size_t)31) - n) * sizeof *dst);
            break;
        }
        __m256i a0 = z, a1 = z, a2 = z, a3 = z;
        for (int y = 0; y < taps; y += 2) {
            __m256i ra = _mm256_loadu_si256((const __m256i *)(part ? tail[y] : rows[y] + p));
            __m256i rb = _mm256_loadu_si256((const __m256i *)(part ? tail[y + 1] : rows[y + 1] + p));
            __m256i k = _mm256_set1_epi32(w[y / 2]);
            __m256i lo = _mm256_unpacklo_epi8(ra, rb), hi = _mm256_unpackhi_epi8(ra, rb);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, z), k));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, z), k));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, z), k));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, z), k));
        }
        /* the unpacks work within 128-bit lanes: a0 holds bytes 0-3 and 16-19, a1 4-7 and
         * 20-23, a2 8-11 and 24-27, a3 12-15 and 28-31 */
        _mm256_store_ps(dst + p, _mm256_cvtepi32_ps(_mm256_permute2x128_si256(a0, a1, 0x20)));
        _mm256_store_ps(dst + p + 8, _mm256_cvtepi32_ps(_mm256_permute2x128_si256(a2, a3, 0x20)));
        _mm256_store_ps(dst + p + 16, _mm256_cvtepi32_ps(_mm256_permute2x128_si256(a0, a1, 0x31)));
        _mm256_store_ps(dst + p + 24, _mm256_cvtepi32_ps(_mm256_permute2x128_si256(a2, a3, 0x31)));
    }
}

/* One output value: a sum already truncated to an integer, clamped to 0..255 as the SIMD
 * packing below does it. */
static inline unsigned char to_byte(int32_t v)
{
    return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
}

/* A row of integer sums to bytes, 32 at a time (mirrored when flip). */
__attribute__((target("avx2")))
static void row_to_bytes(const int32_t *src, int n, unsigned char *dst, int flip)
{
    const __m256i reverse = _mm256_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
                                             15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    int x = 0;
    for (; x + 32 <= n; x += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + x));
        __m256i b = _mm256_loadu_si256((const __m256i *)(src + x + 8));
        __m256i c = _mm256_loadu_si256((const __m256i *)(src + x + 16));
        __m256i d = _mm256_loadu_si256((const __m256i *)(src + x + 24));
        /* packs and packus work within 128-bit lanes: the bytes come out as 4-value groups
         * 0 2 4 6 | 1 3 5 7, which the dword permutation puts in order */
        __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
        v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        if (flip) {
            v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, reverse), 0x4e);
            _mm256_storeu_si256((__m256i *)(dst + n - 32 - x), v);
        } else {
            _mm256_storeu_si256((__m256i *)(dst + x), v);
        }
    }
    for (; x < n; x++)
        dst[flip ? n - 1 - x : x] = to_byte(src[x]);
}

/* Output row yy from its three rows of sums (planes wpad apart): interleaved, or into the
 * three planes. */
__attribute__((target("avx2")))
static void emit_row(const int32_t *rowout, size_t wpad, int out_w, int yy, const ResizeOut *o)
{
    if (o->rgb) {
        unsigned char *d = o->rgb + (size_t)yy * (size_t)out_w * 3;
        for (int x = 0; x < out_w; x++)
            for (int c = 0; c < 3; c++)
                d[x * 3 + c] = to_byte(rowout[(size_t)c * wpad + (size_t)x]);
    } else {
        for (int c = 0; c < 3; c++)
            row_to_bytes(rowout + (size_t)c * wpad, out_w, o->plane[c] + (size_t)yy * (size_t)out_w,
                         o->flip);
    }
}

/* Output row yy's window of input rows, and its weights two to a 32-bit word for pmaddwd;
 * an even count, the last of weight 0 when the window is odd. Returns the count. */
static inline int window(const unsigned char *box, size_t in_stride, int ybox0, const Coeffs *cv,
                         const int16_t *kv, int yy, const unsigned char **vrow, int32_t *vw)
{
    int cnt = cv->bounds[yy * 2 + 1], taps = (cnt + 1) & ~1;
    const unsigned char *first = box + (size_t)(cv->bounds[yy * 2] - ybox0) * in_stride;
    const int16_t *k = kv + (size_t)yy * (size_t)cv->ksize;
    for (int y = 0; y < taps; y++)
        vrow[y] = first + (size_t)(y < cnt ? y : cnt - 1) * in_stride;
    for (int y = 0; y < taps; y += 2) {
        uint16_t k0 = (uint16_t)k[y], k1 = y + 1 < cnt ? (uint16_t)k[y + 1] : 0;
        vw[y / 2] = (int32_t)((uint32_t)k0 | (uint32_t)k1 << 16);
    }
    return taps;
}

/* Both passes, one output row at a time, with no 8-bit rounding in between (within 1 of
 * PIL's two-pass bytes): the vertical sums of the box's rows (integer) land in a row of
 * floats that stays in L1; the horizontal pass then makes 8 output pixels per register,
 * as a banded matrix product: each input value of the block's span, broadcast, times the 8
 * pixels' weights for it (0 outside a pixel's window). No shuffles but the final packing. */
__attribute__((target("avx2,fma"), always_inline))
static inline void resize_body(const unsigned char *box, size_t in_stride, int ybox0, size_t n,
                               const Coeffs *cv, const int16_t *kv, const float *band,
                               const int *start, int span, int out_w, int out_h, float *rowf,
                               int32_t *rowout, const unsigned char **vrow, int32_t *vw,
                               const ResizeOut *o)
{
    const __m256 half = _mm256_set1_ps(0.5f);
    size_t wpad = ((size_t)out_w + 7) & ~(size_t)7;
    for (int yy = 0; yy < out_h; yy++) {
        int taps = window(box, in_stride, ybox0, cv, kv, yy, vrow, vw);
        vertical_row(vrow, vw, taps, n, rowf);
        for (int xb = 0; xb < out_w; xb += 8) {
            const float *src = rowf + (size_t)start[xb / 8] * 3;
            const float *w = band + (size_t)(xb / 8) * (size_t)span * 8;
            /* two sums per channel (even and odd inputs): half as long a chain of FMAs */
            __m256 r = half, g = half, b = half, r1 = _mm256_setzero_ps(), g1 = r1, b1 = r1;
            for (int t = 0; t < span; t += 2, src += 6, w += 16) {
                __m256 wt = _mm256_load_ps(w), wt1 = _mm256_load_ps(w + 8);
                r = _mm256_fmadd_ps(_mm256_broadcast_ss(src), wt, r);
                g = _mm256_fmadd_ps(_mm256_broadcast_ss(src + 1), wt, g);
                b = _mm256_fmadd_ps(_mm256_broadcast_ss(src + 2), wt, b);
                r1 = _mm256_fmadd_ps(_mm256_broadcast_ss(src + 3), wt1, r1);
                g1 = _mm256_fmadd_ps(_mm256_broadcast_ss(src + 4), wt1, g1);
                b1 = _mm256_fmadd_ps(_mm256_broadcast_ss(src + 5), wt1, b1);
            }
            /* truncated: the 0.5 above rounds */
            _mm256_store_si256((__m256i *)(rowout + xb), _mm256_cvttps_epi32(_mm256_add_ps(r, r1)));
            _mm256_store_si256((__m256i *)(rowout + wpad + xb), _mm256_cvttps_epi32(_mm256_add_ps(g, g1)));
            _mm256_store_si256((__m256i *)(rowout + 2 * wpad + xb), _mm256_cvttps_epi32(_mm256_add_ps(b, b1)));
        }
        emit_row(rowout, wpad, out_w, yy, o);
    }
}

/* The same code twice: where AVX-512VL is there, the compiler folds each broadcast into
 * its FMA (an embedded broadcast), a third fewer instructions in the horizontal pass, with
 * the same arithmetic and so the same bytes. */
__attribute__((target("avx2,fma")))
static void resize_avx2(const unsigned char *box, size_t in_stride, int ybox0, size_t n,
                        const Coeffs *cv, const int16_t *kv, const float *band, const int *start,
                        int span, int out_w, int out_h, float *rowf, int32_t *rowout,
                        const unsigned char **vrow, int32_t *vw, const ResizeOut *o)
{
    resize_body(box, in_stride, ybox0, n, cv, kv, band, start, span, out_w, out_h, rowf, rowout,
                vrow, vw, o);
}

__attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw")))
static void resize_avx512(const unsigned char *box, size_t in_stride, int ybox0, size_t n,
                          const Coeffs *cv, const int16_t *kv, const float *band,
                          const int *start, int span, int out_w, int out_h, float *rowf,
                          int32_t *rowout, const unsigned char **vrow, int32_t *vw,
                          const ResizeOut *o)
{
    resize_body(box, in_stride, ybox0, n, cv, kv, band, start, span, out_w, out_h, rowf, rowout,
                vrow, vw, o);
}

/* The SIMD paths, best last. LIBSHARD_SIMD (none, avx2, avx512, vnni) caps the choice, as
 * libjpeg-turbo's JSIMD_FORCE* variables do: to compare the paths' speed and bytes. */
enum { SIMD_NONE, SIMD_AVX2, SIMD_AVX512, SIMD_VNNI };

static const char *const simd_names[] = {"none", "avx2", "avx512", "vnni"};

static int simd_level(ShardScratch *sc)
{
    if (sc->simd)
        return sc->simd - 1;
    int level = SIMD_NONE;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        level = SIMD_AVX2;
        if (__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")) {
            level = SIMD_AVX512;
            if (__builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni"))
                level = SIMD_VNNI;
        }
    }
    const char *cap = getenv("LIBSHARD_SIMD");
    for (int i = 0; cap && i < level; i++)
        if (!strcmp(cap, simd_names[i]))
            level = i;
    sc->simd = level + 1;
    return level;
}

/* Where the CPU has AVX-512 VBMI and VNNI (Ice Lake and later, Zen 4): integer throughout.
 * The box's rows are split into three planes first (vpermt2b), so that the vertical pass's
 * sums come out planar: per output row, three 16-bit planes with MIDBITS of fraction. The
 * horizontal pass takes those two at a time against 16-bit weights (HBITS) with vpdpwssd,
 * which multiplies pairs and adds them in one instruction, 8 output pixels per register as
 * the float pass does: half its instructions. */
#define VNNI_TARGET "avx2,fma,avx512f,avx512vl,avx512bw,avx512vbmi,avx512vnni"
#define MIDBITS 7 /* the most int16 holds: 255 << 7 */
#define HBITS VBITS /* weights16 makes the horizontal weights too */

/* acc + the pairwise products of a and b (vpdpwssd). In assembly: GCC 12 copies the
 * accumulator around each use of the intrinsic, twice the instructions of the loop. */
__attribute__((target(VNNI_TARGET), always_inline))
static inline __m256i dpwssd(__m256i acc, __m256i a, __m256i b)
{
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
    return acc;
}

/* The same with b the 32-bit value at p in every lane (an embedded broadcast). */
__attribute__((target(VNNI_TARGET), always_inline))
static inline __m256i dpwssd_bcast(__m256i acc, __m256i a, const void *p)
{
    __asm__("vpdpwssd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*(const int16_t(*)[2])p));
    return acc;
}

/* 32 bytes of a row of n bytes from off, zeros past its end, without reading past it. */
__attribute__((target(VNNI_TARGET)))
static inline __m256i load32(const unsigned char *row, size_t n, size_t off)
{
    if (off + 32 <= n)
        return _mm256_loadu_si256((const __m256i *)(row + off));
    __mmask32 m = off >= n ? 0 : (__mmask32)((1u << (n - off)) - 1);
    return _mm256_maskz_loadu_epi8(m, row + off);
}

/* The box's rows as three planes of bytes each: row r's channel c at planar + (r * 3 + c) *
 * pcols, zeros past cols (pcols a multiple of 32). */
__attribute__((target(VNNI_TARGET)))
static void split_planes(const unsigned char *box, size_t in_stride, int rows, size_t n,
                         size_t pcols, unsigned char *planar)
{
    /* channel c of the 32 pixels: those whose byte is in the first two registers, then
     * the rest from the third */
    unsigned char ib[3][32], ic[3][32];
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < 32; x++) {
            ib[c][x] = (unsigned char)(3 * x + c < 64 ? 3 * x + c : 0);
            ic[c][x] = (unsigned char)(3 * x + c >= 64 ? 3 * x + c - 64 : 0);
        }
    __m256i lo[3], hi[3];
    __mmask32 from2[3];
    for (int c = 0; c < 3; c++) {
        lo[c] = _mm256_loadu_si256((const __m256i *)ib[c]);
        hi[c] = _mm256_loadu_si256((const __m256i *)ic[c]);
        from2[c] = 0;
        for (int x = 0; x < 32; x++)
            if (3 * x + c >= 64)
                from2[c] |= 1u << x;
    }
    for (int r = 0; r < rows; r++) {
        const unsigned char *row = box + (size_t)r * in_stride;
        unsigned char *d = planar + (size_t)r * 3 * pcols;
        for (size_t x = 0; x < pcols; x += 32) {
            __m256i v0 = load32(row, n, 3 * x), v1 = load32(row, n, 3 * x + 32),
                    v2 = load32(row, n, 3 * x + 64);
            for (int c = 0; c < 3; c++) {
                __m256i v = _mm256_permutex2var_epi8(v0, lo[c], v1);
                v = _mm256_mask_permutexvar_epi8(v, from2[c], hi[c], v2);
                _mm256_store_si256((__m256i *)(d + (size_t)c * pcols + x), v);
            }
        }
    }
}

/* One output row's vertical sums over the three planes of the window's rows (rows[] at the
 * box's planar rows, 3 * pcols bytes each; w[] two weights per word, an even count): 32
 * bytes per step, two rows per vpdpwssd, stored as (sum + rounding) >> (VBITS - MIDBITS)
 * into dst's planes, pstride values apart. */
__attribute__((target(VNNI_TARGET)))
static void vertical_planar(const unsigned char *const *rows, const int32_t *w, int taps,
                            size_t pcols, int16_t *dst, size_t pstride)
{
    const __m256i z = _mm256_setzero_si256();
    const __m256i round = _mm256_set1_epi32(1 << (VBITS - MIDBITS - 1));
    const int sh = VBITS - MIDBITS;
    for (int c = 0; c < 3; c++)
        for (size_t p = 0; p < pcols; p += 32) {
            size_t at = (size_t)c * pcols + p;
            __m256i a0 = round, a1 = round, a2 = round, a3 = round;
            for (int y = 0; y < taps; y += 2) {
                __m256i ra = _mm256_load_si256((const __m256i *)(rows[y] + at));
                __m256i rb = _mm256_load_si256((const __m256i *)(rows[y + 1] + at));
                __m256i k = _mm256_set1_epi32(w[y / 2]);
                __m256i lo = _mm256_unpacklo_epi8(ra, rb), hi = _mm256_unpackhi_epi8(ra, rb);
                a0 = dpwssd(a0, _mm256_unpacklo_epi8(lo, z), k);
                a1 = dpwssd(a1, _mm256_unpackhi_epi8(lo, z), k);
                a2 = dpwssd(a2, _mm256_unpacklo_epi8(hi, z), k);
                a3 = dpwssd(a3, _mm256_unpackhi_epi8(hi, z), k);
            }
            /* a0 holds bytes 0-3 and 16-19, a1 4-7 and 20-23, a2 8-11 and 24-27, a3 12-15
             * and 28-31: packed in pairs, 0-7 | 16-23 and 8-15 | 24-31 */
            __m256i u = _mm256_packs_epi32(_mm256_srai_epi32(a0, sh), _mm256_srai_epi32(a1, sh));
            __m256i v = _mm256_packs_epi32(_mm256_srai_epi32(a2, sh), _mm256_srai_epi32(a3, sh));
            int16_t *d = dst + (size_t)c * pstride + p;
            _mm256_store_si256((__m256i *)d, _mm256_permute2x128_si256(u, v, 0x20));
            _mm256_store_si256((__m256i *)(d + 16), _mm256_permute2x128_si256(u, v, 0x31));
        }
}

__attribute__((target(VNNI_TARGET)))
static void resize_vnni(const unsigned char *planar, size_t pcols, int ybox0, const Coeffs *cv,
                        const int16_t *kv, const int32_t *band, const int *start, int span,
                        int out_w, int out_h, int16_t *mid, size_t pstride, int32_t *rowout,
                        const unsigned char **vrow, int32_t *vw, const ResizeOut *o)
{
    const __m256i half = _mm256_set1_epi32(1 << (MIDBITS + HBITS - 1));
    const int16_t *pr = mid, *pg = mid + pstride, *pb = mid + 2 * pstride;
    size_t wpad = ((size_t)out_w + 7) & ~(size_t)7;
    for (int yy = 0; yy < out_h; yy++) {
        int taps = window(planar, 3 * pcols, ybox0, cv, kv, yy, vrow, vw);
        vertical_planar(vrow, vw, taps, pcols, mid, pstride);
        for (int xb = 0; xb < out_w; xb += 8) {
            int s0 = start[xb / 8];
            const int32_t *w = band + (size_t)(xb / 8) * (size_t)span * 4;
            /* two sums per channel (pairs t and t + 2): half as long a chain */
            __m256i r = half, g = half, b = half, z = _mm256_setzero_si256(), r1 = z, g1 = z, b1 = z;
            for (int t = 0; t < span; t += 4, w += 16) {
                __m256i wt = _mm256_load_si256((const __m256i *)w), wt1 = _mm256_load_si256((const __m256i *)(w + 8));
                r = dpwssd_bcast(r, wt, pr + s0 + t);
                g = dpwssd_bcast(g, wt, pg + s0 + t);
                b = dpwssd_bcast(b, wt, pb + s0 + t);
                r1 = dpwssd_bcast(r1, wt1, pr + s0 + t + 2);
                g1 = dpwssd_bcast(g1, wt1, pg + s0 + t + 2);
                b1 = dpwssd_bcast(b1, wt1, pb + s0 + t + 2);
            }
            const int sh = MIDBITS + HBITS;
            _mm256_store_si256((__m256i *)(rowout + xb), _mm256_srai_epi32(_mm256_add_epi32(r, r1), sh));
            _mm256_store_si256((__m256i *)(rowout + wpad + xb), _mm256_srai_epi32(_mm256_add_epi32(g, g1), sh));
            _mm256_store_si256((__m256i *)(rowout + 2 * wpad + xb), _mm256_srai_epi32(_mm256_add_epi32(b, b1), sh));
        }
        emit_row(rowout, wpad, out_w, yy, o);
    }
}
#endif


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
#if defined(__x86_64__) || defined(__i386__)
    int level = vertical_first ? simd_level(sc) : SIMD_NONE;
    if (level != SIMD_NONE) {
        /* per block of 8 output pixels: where its inputs start, and the 8 pixels' weights
         * for each input of the span (one span for all: a loop of one length) */
        int blocks = (out_w + 7) / 8, span = 0;
        for (int bk = 0; bk < blocks; bk++)
            for (int xx = bk * 8; xx < out_w && xx < bk * 8 + 8; xx++) {
                int end = ch.bounds[xx * 2] + ch.bounds[xx * 2 + 1] - ch.bounds[bk * 16];
                span = end > span ? end : span;
            }
        span = level == SIMD_VNNI ? (span + 3) & ~3 : (span + 1) & ~1; /* 4 or 2 at a time */
        size_t band_n = (size_t)blocks * (size_t)span * 8;
        int *start = shard_scratch(sc, SHARD_SCR_START, (size_t)blocks * sizeof(int));
        int16_t *kv = shard_scratch(sc, SHARD_SCR_KV, (size_t)out_h * (size_t)cv.ksize * sizeof(int16_t));
        int32_t *vw = shard_scratch(sc, SHARD_SCR_VW, ((size_t)cv.ksize / 2 + 1) * sizeof(int32_t));
        const unsigned char **vrow = shard_scratch(sc, SHARD_SCR_VROW, ((size_t)cv.ksize + 1) * sizeof(void *));
        int32_t *rowout = shard_scratch(sc, SHARD_SCR_ROWOUT, 3 * (((size_t)out_w + 7) & ~(size_t)7) * sizeof(int32_t));
        if (!start || !kv || !vw || !vrow || !rowout)
            return SHARD_ERR_NOMEM;
        for (int bk = 0; bk < blocks; bk++)
            start[bk] = ch.bounds[bk * 16] - xbox0;
        weights16(&cv, out_h, kv);
        size_t plane = (size_t)out_w * (size_t)out_h;
        ResizeOut o = {planar ? NULL : out, {out, out + plane, out + 2 * plane}, flip};
        if (level == SIMD_VNNI) {
            /* 16-bit weights in pairs: input t and t + 1 of each block's span, lane j */
            int16_t *band = shard_scratch(sc, SHARD_SCR_BAND, band_n * sizeof(int16_t));
            int16_t *kh = shard_scratch(sc, SHARD_SCR_KH, (size_t)out_w * (size_t)ch.ksize * sizeof(int16_t));
            /* the box in planes; one output row's sums in planes, with the last span's reach
             * past cols (zeros) */
            size_t pcols = ((size_t)cols + 31) & ~(size_t)31;
            size_t pstride = (pcols + (size_t)span + 15) & ~(size_t)15;
            unsigned char *split = shard_scratch(sc, SHARD_SCR_TMP, (size_t)rows * 3 * pcols);
            int16_t *mid = shard_scratch(sc, SHARD_SCR_ROWF, 3 * pstride * sizeof(int16_t));
            if (!band || !kh || !split || !mid)
                return SHARD_ERR_NOMEM;
            memset(mid, 0, 3 * pstride * sizeof *mid);
            memset(band, 0, band_n * sizeof *band);
            weights16(&ch, out_w, kh);
            for (int bk = 0; bk < blocks; bk++)
                for (int j = 0; j < 8 && bk * 8 + j < out_w; j++) {
                    int xx = bk * 8 + j, off = ch.bounds[xx * 2] - ch.bounds[bk * 16];
                    for (int t = 0; t < ch.bounds[xx * 2 + 1]; t++) {
                        int p = off + t;
                        band[(((size_t)bk * (size_t)span + (size_t)(p & ~1)) * 8 + (size_t)j * 2) + (size_t)(p & 1)] =
                            kh[(size_t)xx * (size_t)ch.ksize + (size_t)t];
                    }
                }
            split_planes(box, in_stride, rows, box_stride, pcols, split);
            resize_vnni(split, pcols, ybox0, &cv, kv, (const int32_t *)band, start, span,
                        out_w, out_h, mid, pstride, rowout, vrow, vw, &o);
            return 0;
        }
        size_t npad = (box_stride + 31) & ~(size_t)31, rowf_n = npad + 3 * (size_t)span + 8;
        float *band = shard_scratch(sc, SHARD_SCR_BAND, band_n * sizeof(float));
        float *rowf = shard_scratch(sc, SHARD_SCR_ROWF, rowf_n * sizeof(float));
        if (!band || !rowf)
            return SHARD_ERR_NOMEM;
        /* the vertical sums come out VBITS above 1, which the horizontal weights undo */
        float unit = 1.0f / (float)(1 << PRECISION_BITS) / (float)(1 << VBITS);
        memset(band, 0, band_n * sizeof *band);
        for (int bk = 0; bk < blocks; bk++)
            for (int j = 0; j < 8 && bk * 8 + j < out_w; j++) {
                int xx = bk * 8 + j, off = ch.bounds[xx * 2] - ch.bounds[bk * 16];
                for (int t = 0; t < ch.bounds[xx * 2 + 1]; t++)
                    band[((size_t)bk * (size_t)span + (size_t)(off + t)) * 8 + (size_t)j] =
                        (float)ch.k[(size_t)xx * (size_t)ch.ksize + (size_t)t] * unit;
            }
        /* the last span reads past the box's values, over weights of 0: finite values */
        memset(rowf + npad, 0, (rowf_n - npad) * sizeof *rowf);
        if (level == SIMD_AVX512)
            resize_avx512(box, in_stride, ybox0, box_stride, &cv, kv, band, start, span, out_w,
                          out_h, rowf, rowout, vrow, vw, &o);
        else
            resize_avx2(box, in_stride, ybox0, box_stride, &cv, kv, band, start, span, out_w,
                        out_h, rowf, rowout, vrow, vw, &o);
        return 0;
    }
#endif
    return resize_scalar(sc, in, in_stride, ybox0, rows, box, box_stride, &ch, &cv, xbox0, out,
                         out_w, out_h, vertical_first, planar, flip);
}

const char *shard_resize_path(ShardScratch *sc)
{
#if defined(__x86_64__) || defined(__i386__)
    return simd_names[simd_level(sc)];
#else
    (void)sc;
    return "none";
#endif
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
