/*
 * Memory buffers as sources (memory.c): a shard a caller already holds, a test's bytes.
 */
#ifndef SHARD_SOURCE_MEMORY_H
#define SHARD_SOURCE_MEMORY_H

#include <stddef.h>
#include "base/attr.h"
#include "source/source.h"

/* A source reading the size bytes at data, which the caller keeps valid and unchanged
 * while the source (or any hold on it) lives; url names it in messages (copied). */
SHARD_HIDDEN int shard_source_memory(ShardSource **out, const void *data, size_t size,
                                     const char *url, char *err);


#endif /* SHARD_SOURCE_MEMORY_H */
