/*
 * The shard writer's rules other writers follow (writer.c).
 */
#ifndef SHARD_WRITE_WRITER_H
#define SHARD_WRITE_WRITER_H

#include "base/attr.h"

/* Whether a writer with this compression setting (ShardCompression) and pattern writes
 * .tar.zst. */
SHARD_HIDDEN int shard_writes_zstd(int compression, const char *pattern);

#endif /* SHARD_WRITE_WRITER_H */
