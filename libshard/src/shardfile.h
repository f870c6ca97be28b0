/*
 * ShardFile's private entry point: a shard read over a source the caller already has (a
 * verifier that checks the source's frames first, a test's own source).
 */
#ifndef SHARD_SHARDFILE_H
#define SHARD_SHARDFILE_H

#include "shard/file.h"
#include "source.h"

/* Opens a shard over src, taking over the caller's reference (released on failure too). */
SHARD_HIDDEN int shard_file_open_source(ShardFile **out, ShardSource *src,
                                        const ShardFileSettings *s, ShardError *err);

#endif /* SHARD_SHARDFILE_H */
