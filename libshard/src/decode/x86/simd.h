/*
 * The resampler's x86-64 paths (dispatch.c, rows.c, avx2.c, vnni.c): the pieces
 * they share. Compiled only on x86-64; every function carries the ISA it needs as a target
 * attribute and runs only where the CPU has it.
 */
#ifndef SHARD_DECODE_X86_SIMD_H
#define SHARD_DECODE_X86_SIMD_H

#include <immintrin.h>

#include "base/attr.h"
#include "decode/resample.h"

/* Where the result goes: interleaved RGB rows, or three planes (mirrored or not), which
 * spares the batch a separate pass to reorder channels. */
typedef struct ResizeOut {
    unsigned char *rgb;      /* interleaved, or NULL */
    unsigned char *plane[3]; /* with rgb NULL: the three planes */
    int flip;
} ResizeOut;

/* Weights in 16 bits (VBITS of fraction), each window's summing to exactly 1. */
SHARD_HIDDEN void shard_weights16(const Coeffs *c, int n, int16_t *out);

/* Output row yy's window of input rows, and its weights two to a 32-bit word for pmaddwd;
 * an even count, the last of weight 0 when the window is odd. Returns the count. */
static inline int shard_window(const unsigned char *box, size_t in_stride, int ybox0, const Coeffs *cv,
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

/* Output row yy from its three rows of sums (planes wpad apart), into o. */
SHARD_HIDDEN void shard_emit_row(const int32_t *rowout, size_t wpad, int out_w, int yy,
                                 const ResizeOut *o);

/* The AVX2 path (avx2.c), and the same code built for AVX-512VL. */
SHARD_HIDDEN void shard_resize_avx2(const unsigned char *box, size_t in_stride, int ybox0,
                                    size_t n, const Coeffs *cv, const int16_t *kv,
                                    const float *band, const int *start, int span, int out_w,
                                    int out_h, float *rowf, int32_t *rowout,
                                    const unsigned char **vrow, int32_t *vw, const ResizeOut *o);
SHARD_HIDDEN void shard_resize_avx512(const unsigned char *box, size_t in_stride, int ybox0,
                                      size_t n, const Coeffs *cv, const int16_t *kv,
                                      const float *band, const int *start, int span, int out_w,
                                      int out_h, float *rowf, int32_t *rowout,
                                      const unsigned char **vrow, int32_t *vw,
                                      const ResizeOut *o);

/* The AVX-512 VBMI + VNNI path (vnni.c). */
SHARD_HIDDEN void shard_split_planes(const unsigned char *box, size_t in_stride, int rows,
                                     size_t n, size_t pcols, unsigned char *planar);
SHARD_HIDDEN void shard_resize_vnni(const unsigned char *planar, size_t pcols, int ybox0,
                                    const Coeffs *cv, const int16_t *kv, const int32_t *band,
                                    const int *start, int span, int out_w, int out_h,
                                    int16_t *mid, size_t pstride, int32_t *rowout,
                                    const unsigned char **vrow, int32_t *vw, const ResizeOut *o);

#endif /* SHARD_DECODE_X86_SIMD_H */
