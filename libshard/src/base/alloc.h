/*
 * The allocator hook (shard/common.h: ShardAllocator), as the library grows buffers
 * through it.
 */
#ifndef SHARD_BASE_ALLOC_H
#define SHARD_BASE_ALLOC_H

#include <stddef.h>

#include "base/attr.h"
#include "shard/common.h"

/* Grows *(void **)buf, of capacity *cap, to at least need bytes through the allocator a
 * (doubling from 256), keeping its first keep bytes; the old block goes back to a. */
SHARD_HIDDEN int shard_alloc_grow(const ShardAllocator *a, void *buf, size_t *cap, size_t need,
                                  size_t keep);

#endif /* SHARD_BASE_ALLOC_H */
