/*
 * Blocks of freed samples, kept for the next samples of the same stage.
 *
 * A reader's samples are made on its fetch threads and freed wherever the consumer lets go
 * of them. Through malloc alone, memory freed on one thread and trimmed back to the kernel
 * is faulted in again page by page for the next sample: on a remote read that was a tenth
 * of the fetch threads' time. The pool keeps a bounded number of blocks (its bounds are
 * its memory), hands out the smallest that fits, and is reference-counted, since samples
 * may outlive the stage that made them.
 */
#ifndef SHARD_BASE_BLOCKPOOL_H
#define SHARD_BASE_BLOCKPOOL_H

#include <stddef.h>

#include "base/attr.h"


typedef struct ShardBlockPool ShardBlockPool;

/* A pool keeping at most max_blocks blocks and max_bytes bytes; NULL when out of memory.
 * The caller owns one reference. */
SHARD_HIDDEN ShardBlockPool *shard_block_pool_new(size_t max_blocks, size_t max_bytes);
/* Takes another reference (p may be NULL); returns p. */
SHARD_HIDDEN ShardBlockPool *shard_block_pool_ref(ShardBlockPool *p);
/* Drops a reference; the last one frees the pool and its blocks. Accepts NULL. */
SHARD_HIDDEN void shard_block_pool_unref(ShardBlockPool *p);
/* A block of at least n bytes, its size in *cap: a kept one, else malloc's (p may be NULL).
 * NULL when out of memory. The caller owns it and gives it back with shard_block_put. */
SHARD_HIDDEN void *shard_block_get(ShardBlockPool *p, size_t n, size_t *cap);
/* Keeps block b of cap bytes for a later get, or frees it (p may be NULL; b may be NULL). */
SHARD_HIDDEN void shard_block_put(ShardBlockPool *p, void *b, size_t cap);

#endif /* SHARD_BASE_BLOCKPOOL_H */
