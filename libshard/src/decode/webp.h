/*
 * WebP decoding (webp.c) with libwebp: lossy, lossless, with or without alpha.
 */
#ifndef SHARD_DECODE_WEBP_H
#define SHARD_DECODE_WEBP_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "decode/scratch.h"
#include "shard/decode.h"

/* The whole WebP as RGB (the alpha dropped: what PIL's convert("RGB") gives) in the
 * scratch's pixel buffer (*rgb, *w x *h), refused past t's max_pixels and max_decode_memory (t NULL: the defaults); an animation is refused
 * (which frame would be the sample's is not the loader's to choose). 0, or
 * SHARD_ERR_DECODE / SHARD_ERR_UNSUPPORTED / SHARD_ERR_NOMEM with msg. */
SHARD_HIDDEN int shard_webp_decode(ShardScratch *sc, const void *data, size_t size,
                                   const ShardTransform *t, unsigned char **rgb, int *w, int *h,
                                   char *msg, size_t msgsize);

#endif /* SHARD_DECODE_WEBP_H */
