/*
 * JPEG re-encoding at pack time (shrink.c): shardpack --resize.
 */
#ifndef SHARD_PACK_SHRINK_H
#define SHARD_PACK_SHRINK_H

#include <stddef.h>

#include "base/attr.h"

/* A JPEG re-encoded smaller: data malloc'd, NULL when left as it was. */
typedef struct ShardShrunk {
    unsigned char *data;
    size_t size;
    int width, height;         /* the original's */
    int out_width, out_height; /* the new one's */
} ShardShrunk;

/* A JPEG whose longer side exceeds max_side re-encoded with that longer side at quality;
 * anything else (another format, small enough) left alone: out->data NULL. msg:
 * SHARD_ERROR_MAX bytes. */
SHARD_HIDDEN int shard_jpeg_shrink(const void *data, size_t size, int max_side, int quality,
                                   ShardShrunk *out, char *msg);

#endif /* SHARD_PACK_SHRINK_H */
