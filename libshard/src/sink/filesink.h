/*
 * Local files that appear complete or not at all (filesink.c): the sink of a path.
 */
#ifndef SHARD_SINK_FILESINK_H
#define SHARD_SINK_FILESINK_H

#include "base/attr.h"
#include "base/keyset.h"
#include "sink/sinkdef.h"

/* Makes k write the file at path (sync: fsync it and its folder). */
SHARD_HIDDEN int shard_sink_file_open(ShardSink *k, const char *path, int sync, char *err);

/* Removes the temporaries of the names in names (NULL: all) that no live writer holds, in
 * dir. */
SHARD_HIDDEN void shard_sink_file_sweep(const char *dir, const ShardKeySet *names);

#endif /* SHARD_SINK_FILESINK_H */
