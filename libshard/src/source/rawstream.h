/*
 * What the library itself takes from a ShardStream (shard/stream.h).
 */
#ifndef SHARD_SOURCE_RAWSTREAM_H
#define SHARD_SOURCE_RAWSTREAM_H

#include "base/attr.h"
#include "shard/stream.h"
#include "source/source.h"

/* The stream's source, for a reader that goes on from its start: *s is freed (set to NULL),
 * *src receives its reference. SHARD_ERR_INVALID (err: SHARD_ERROR_MAX bytes) when bytes
 * were read from it. */
SHARD_HIDDEN int shard_stream_take_source(ShardStream **s, ShardSource **src, char *err);

#endif /* SHARD_SOURCE_RAWSTREAM_H */
