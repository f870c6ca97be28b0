/*
 * The resampler's parts (resize.c, and on x86-64 resize_x86.c, resize_avx2.c and
 * resize_vnni.c): the filter's coefficients and the crop box both passes read, shared by
 * the portable code and the SIMD paths.
 */
#ifndef SHARD_RESIZE_H
#define SHARD_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define PRECISION_BITS (32 - 8 - 2)
#define VBITS 14 /* the SIMD passes' 16-bit weights: 1.0 fits */

typedef struct Coeffs {
    int *bounds; /* per output pixel: first input index, count */
    int32_t *k;  /* per output pixel: ksize fixed-point weights */
    int ksize;
} Coeffs;

/* The box of input pixels the two passes read, and the filter for each axis. */
typedef struct ShardResizeBox {
    const unsigned char *box; /* its first pixel */
    size_t in_stride;         /* bytes from one input row to the next */
    size_t box_stride;        /* bytes of the box's rows (cols * 3) */
    int ybox0, xbox0;         /* its first row and column in the input */
    int rows, cols;
    const Coeffs *ch, *cv;    /* horizontal and vertical coefficients */
} ShardResizeBox;

/* The SIMD paths, best last. */
enum { SHARD_SIMD_NONE, SHARD_SIMD_AVX2, SHARD_SIMD_AVX512, SHARD_SIMD_VNNI };

#ifdef SHARD_RESIZE_X86
/* The best path this CPU has (resize_x86.c). */
SHARD_HIDDEN int shard_resize_cpu_level(void);
/* Both passes, vertical first, on the path level (not NONE), into out: interleaved RGB, or
 * with planar three planes (mirrored when flip). */
SHARD_HIDDEN int shard_resize_simd(ShardScratch *sc, int level, const ShardResizeBox *b,
                                   unsigned char *out, int out_w, int out_h, int planar, int flip);
#endif

#endif /* SHARD_RESIZE_H */
