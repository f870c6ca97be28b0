/*
 * Interleaved RGB into three planes with SSSE3 (planar.c): shard_rgb_planar's x86-64 path.
 */
#ifndef SHARD_DECODE_X86_PLANAR_H
#define SHARD_DECODE_X86_PLANAR_H

#include <stddef.h>

#include "base/attr.h"

/* The first n pixels of rgb, 16 at a time, into the planes r, g, b; returns how many it did
 * (n rounded down to 16): the caller does the rest. Only where the CPU has SSSE3. */
SHARD_HIDDEN size_t shard_rgb_planar_ssse3(const unsigned char *rgb, size_t n, unsigned char *r,
                                           unsigned char *g, unsigned char *b);

#endif /* SHARD_DECODE_X86_PLANAR_H */
