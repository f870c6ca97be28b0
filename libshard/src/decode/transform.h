/*
 * Decoding with a caller's scratch buffers (transform.c): the decode pool's threads keep one
 * set each.
 */
#ifndef SHARD_DECODE_TRANSFORM_H
#define SHARD_DECODE_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "decode/scratch.h"
#include "shard/decode.h"

/* shard_decode_transform (shard/decode.h) with the thread's scratch buffers. */
SHARD_HIDDEN int shard_decode_transform_with(ShardScratch *sc, const void *data, size_t size,
                                             const ShardTransform *t, uint64_t seed,
                                             void *out, char *msg, size_t msgsize);

#endif /* SHARD_DECODE_TRANSFORM_H */
