/*
 * Interleaved RGB into three planes with SSSE3's byte shuffle: 16 pixels (48 bytes, three
 * vectors) a step, each plane's 16 bytes gathered from the three and or-ed together.
 */
#include <immintrin.h>

#include "decode/x86/planar.h"

/* For each of the three input vectors, where each output byte of a plane comes from
 * (-1: not from this vector). Pixel p's channel c is byte 3p + c of the 48. */
#define Z -1
static const signed char masks[3][3][16] = {
    {{0, 3, 6, 9, 12, 15, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z},
     {Z, Z, Z, Z, Z, Z, 2, 5, 8, 11, 14, Z, Z, Z, Z, Z},
     {Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, 1, 4, 7, 10, 13}},
    {{1, 4, 7, 10, 13, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z},
     {Z, Z, Z, Z, Z, 0, 3, 6, 9, 12, 15, Z, Z, Z, Z, Z},
     {Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, 2, 5, 8, 11, 14}},
    {{2, 5, 8, 11, 14, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z},
     {Z, Z, Z, Z, Z, 1, 4, 7, 10, 13, Z, Z, Z, Z, Z, Z},
     {Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, 0, 3, 6, 9, 12, 15}},
};
#undef Z

__attribute__((target("ssse3")))
size_t shard_rgb_planar_ssse3(const unsigned char *rgb, size_t n, unsigned char *r,
                              unsigned char *g, unsigned char *b)
{
    unsigned char *planes[3] = {r, g, b};
    __m128i m[3][3];
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 3; v++)
            m[c][v] = _mm_loadu_si128((const __m128i *)masks[c][v]);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const unsigned char *p = rgb + 3 * i;
        __m128i v0 = _mm_loadu_si128((const __m128i *)p);
        __m128i v1 = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i v2 = _mm_loadu_si128((const __m128i *)(p + 32));
        for (int c = 0; c < 3; c++) {
            __m128i x = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, m[c][0]),
                                                  _mm_shuffle_epi8(v1, m[c][1])),
                                     _mm_shuffle_epi8(v2, m[c][2]));
            _mm_storeu_si128((__m128i *)(planes[c] + i), x);
        }
    }
    return i;
}
