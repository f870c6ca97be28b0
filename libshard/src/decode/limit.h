/*
 * The pixel limit every decoder holds images to: an image declaring more pixels is refused
 * before any memory goes to it.
 */
#ifndef SHARD_DECODE_LIMIT_H
#define SHARD_DECODE_LIMIT_H

#include <stdint.h>
#include <stdio.h>

#include "shard/decode.h"

/* PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS x 2, where it raises) */
#define DEFAULT_MAX_PIXELS 178956970ull

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
