/*
 * PNG decoding (png.c) with libpng's simplified API.
 */
#ifndef SHARD_DECODE_PNG_H
#define SHARD_DECODE_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "decode/scratch.h"
#include "shard/decode.h"

/* The whole PNG as RGB (RGBA with the alpha dropped: what PIL's convert("RGB") gives; grey
 * and palettes expanded) in the scratch's pixel buffer (*rgb, *w x *h), refused past
 * t's max_pixels and max_decode_memory (t NULL: the defaults). 0, or SHARD_ERR_DECODE / SHARD_ERR_NOMEM with msg. */
SHARD_HIDDEN int shard_png_decode(ShardScratch *sc, const void *data, size_t size,
                                  const ShardTransform *t, unsigned char **rgb, int *w, int *h,
                                  char *msg, size_t msgsize);

#endif /* SHARD_DECODE_PNG_H */
