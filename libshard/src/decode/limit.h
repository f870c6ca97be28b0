/*
 * The limits every decoder holds images to, each refused before memory or time goes to it:
 * pixels declared, the memory a decode takes, a JPEG's scans.
 */
#ifndef SHARD_DECODE_LIMIT_H
#define SHARD_DECODE_LIMIT_H

#include <stdint.h>
#include <stdio.h>

#include "shard/decode.h"

/* PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS x 2, where it raises) */
#define DEFAULT_MAX_PIXELS 178956970ull

/* the most scans a JPEG may have: progressive encoders write about 10, mozjpeg's scan
 * search fewer than 70 */
#define DEFAULT_MAX_SCANS 100
/* the most memory one decode may take (its coefficients and pixels): a 50 Mpx photo's
 * progressive decode takes about 300 MiB */
#define DEFAULT_MAX_DECODE_MEMORY ((uint64_t)512 << 20)

static inline int shard_scan_limit(const ShardTransform *t)
{
    return t && t->max_scans ? (int)(t->max_scans > 1000000 ? 1000000 : t->max_scans)
                             : DEFAULT_MAX_SCANS;
}

static inline uint64_t shard_decode_memory_limit(const ShardTransform *t)
{
    return t && t->max_decode_memory ? t->max_decode_memory : DEFAULT_MAX_DECODE_MEMORY;
}

/* The limit of t (NULL: the default). */
static inline uint64_t shard_pixel_limit(const ShardTransform *t)
{
    return t && t->max_pixels ? t->max_pixels : DEFAULT_MAX_PIXELS;
}

/* SHARD_ERR_DECODE, msg (msgsize bytes; NULL: none) naming what and its size, when w x h
 * pixels pass max; else 0. */
static inline int shard_too_big(const char *what, uint64_t w, uint64_t h, uint64_t max,
                                char *msg, size_t msgsize)
{
    if (w * h <= max)
        return 0;
    if (msg)
        snprintf(msg, msgsize, "%s of %llux%llu pixels, more than the limit of %llu (max_pixels)",
                 what, (unsigned long long)w, (unsigned long long)h, (unsigned long long)max);
    return SHARD_ERR_DECODE;
}

#endif /* SHARD_DECODE_LIMIT_H */
