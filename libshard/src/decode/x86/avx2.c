/*
 * The resampler's AVX2 path (simd.h): an integer vertical pass and a float horizontal
 * pass as a banded matrix product, built twice, for AVX2 and for AVX-512VL.
 */
#include <string.h>

#include "decode/x86/simd.h"

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
        int taps = shard_window(box, in_stride, ybox0, cv, kv, yy, vrow, vw);
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
        shard_emit_row(rowout, wpad, out_w, yy, o);
    }
}

/* The same code twice: where AVX-512VL is there, the compiler folds each broadcast into
 * its FMA (an embedded broadcast), a third fewer instructions in the horizontal pass, with
 * the same arithmetic and so the same bytes. */
__attribute__((target("avx2,fma")))
void shard_resize_avx2(const unsigned char *box, size_t in_stride, int ybox0, size_t n,
                        const Coeffs *cv, const int16_t *kv, const float *band, const int *start,
                        int span, int out_w, int out_h, float *rowf, int32_t *rowout,
                        const unsigned char **vrow, int32_t *vw, const ResizeOut *o)
{
    resize_body(box, in_stride, ybox0, n, cv, kv, band, start, span, out_w, out_h, rowf, rowout,
                vrow, vw, o);
}

__attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw")))
void shard_resize_avx512(const unsigned char *box, size_t in_stride, int ybox0, size_t n,
                          const Coeffs *cv, const int16_t *kv, const float *band,
                          const int *start, int span, int out_w, int out_h, float *rowf,
                          int32_t *rowout, const unsigned char **vrow, int32_t *vw,
                          const ResizeOut *o)
{
    resize_body(box, in_stride, ybox0, n, cv, kv, band, start, span, out_w, out_h, rowf, rowout,
                vrow, vw, o);
}

