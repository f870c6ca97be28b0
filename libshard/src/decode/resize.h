/*
 * The resampler (resize.c; its SIMD paths in x86/): PIL's antialiased bilinear filter.
 */
#ifndef SHARD_DECODE_RESIZE_H
#define SHARD_DECODE_RESIZE_H

#include "base/attr.h"
#include "decode/scratch.h"

/* PIL's bilinear resize with the vertical pass first: within 1 of shard_resize_rgb, faster
 * when shrinking. Interleaved RGB in; out interleaved, or with planar three planes R, G, B
 * (mirrored when flip). */
SHARD_HIDDEN int shard_resize_fast(ShardScratch *sc, const unsigned char *in, int w, int h,
                                   double x0, double y0, double bw, double bh, unsigned char *out,
                                   int out_w, int out_h, int planar, int flip);
/* The SIMD path shard_resize_fast takes with this scratch: "none", "avx2", "avx512" or
 * "vnni" (the best the CPU has, capped by LIBSHARD_SIMD when the scratch is first used). */
SHARD_HIDDEN const char *shard_resize_path(ShardScratch *sc);

#endif /* SHARD_DECODE_RESIZE_H */
