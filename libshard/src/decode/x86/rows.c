/*
 * What the resampler's x86-64 paths share (simd.h): weights as 16-bit integers, and
 * output rows packed to bytes, interleaved or into planes.
 */
#include <string.h>

#include "decode/x86/simd.h"

/* Weights in 16 bits (VBITS of fraction) for pmaddwd and vpdpwssd, each window's rounded
 * to sum to exactly 1 so that flat areas stay exact. */
void shard_weights16(const Coeffs *c, int n, int16_t *out)
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
void shard_emit_row(const int32_t *rowout, size_t wpad, int out_w, int yy, const ResizeOut *o)
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

