/*
 * The shard writer's rules other writers follow (shardwriter.c).
 */
#ifndef SHARD_WRITE_SHARDWRITER_H
#define SHARD_WRITE_SHARDWRITER_H

#include "base/attr.h"

/* Whether a writer with this compression setting (ShardCompression) and pattern writes
 * .tar.zst. */
SHARD_HIDDEN int shard_writes_zstd(int compression, const char *pattern);

#endif /* SHARD_WRITE_SHARDWRITER_H */
