/*
 * The resampler's parts (resize.c, and on x86-64 x86/dispatch.c, x86/rows.c,
 * x86/avx2.c and x86/vnni.c): the filter's coefficients and the crop box both passes
 * read, shared by the portable code and the SIMD paths.
 */
#ifndef SHARD_DECODE_RESAMPLE_H
#define SHARD_DECODE_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "decode/pilfilter.h"
#include "decode/scratch.h"

#define VBITS 14 /* the SIMD passes' 16-bit weights: 1.0 fits */

typedef struct Coeffs {
    int *bounds; /* per output pixel: first input index, count */
    int32_t *k;  /* per output pixel: ksize fixed-point weights */
    int ksize;
} Coeffs;

static inline unsigned char shard_clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
}

/* One pass of the filter along columns: out row yy of width n is the weighted sum of the
 * input rows its coefficients name (row r of the input at src + (r - first) * stride).
 * Contiguous rows, so the compiler vectorizes the inner loop. */
static inline __attribute__((always_inline)) void
shard_column_pass(const unsigned char *src, size_t src_stride, int first, size_t n, const Coeffs *c,
                  int out_rows, unsigned char *dst, size_t dst_stride, int32_t *acc)
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
            d[x] = shard_clip8(acc[x]);
    }
}

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
/* The best path this CPU has (x86/dispatch.c). */
SHARD_HIDDEN int shard_resize_cpu_level(void);
/* Both passes, vertical first, on the path level (not NONE), into out: interleaved RGB, or
 * with planar three planes (mirrored when flip). */
/* shard_column_pass built for AVX2. */
SHARD_HIDDEN void shard_column_pass_avx2(const unsigned char *src, size_t src_stride, int first,
                                         size_t n, const Coeffs *c, int out_rows,
                                         unsigned char *dst, size_t dst_stride, int32_t *acc);
SHARD_HIDDEN int shard_resize_simd(ShardScratch *sc, int level, const ShardResizeBox *b,
                                   unsigned char *out, int out_w, int out_h, int planar, int flip);
#endif

#endif /* SHARD_DECODE_RESAMPLE_H */
