/*
 * Index files (index.c): a shard's .idx (formats/index.md) written whole, for the writer's
 * shards and for shards made elsewhere.
 */
#ifndef SHARD_WRITE_INDEX_H
#define SHARD_WRITE_INDEX_H

#include <stdint.h>

#include "base/attr.h"
#include "base/buf.h"
#include "sink/sink.h"

/* The index of n samples at path (a folder's or a bucket's), through a sink with settings
 * ks (NULL: the defaults): its "v1.2 N" line, then lines (a sample's line each). */
SHARD_HIDDEN int shard_index_put(const char *path, uint64_t n, const ShardBuf *lines,
                                 const ShardSinkSettings *ks, char *err);

#endif /* SHARD_WRITE_INDEX_H */
