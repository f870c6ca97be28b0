/*
 * A digest computed on a thread of its own (MD5 without SHA extensions runs at ~750 MB/s,
 * slower than the bytes are written): the writer hands it one buffer at a time and fills
 * another meanwhile.
 *
 * DESIGN: the hasher reads a buffer the caller no longer touches until the next hand-over,
 * so the only shared state is its hand-over slot, under its mutex. Buffers are hashed in the
 * order they are given.
 */
#ifndef SHARD_SINK_HASHER_H
#define SHARD_SINK_HASHER_H

#include <stddef.h>

#include "base/attr.h"

typedef struct ShardHasher ShardHasher;

/* SHA-256 (sha256 set) or MD5 on a thread of its own; NULL when out of memory or threads. */
SHARD_HIDDEN ShardHasher *shard_hasher_new(int sha256);
/* Hashes the n bytes at p, which stay unchanged until shard_hasher_wait returns. The hasher
 * must be idle (shard_hasher_wait). */
SHARD_HIDDEN void shard_hasher_give(ShardHasher *h, const unsigned char *p, size_t n);
/* Waits until the buffer given last is hashed. */
SHARD_HIDDEN void shard_hasher_wait(ShardHasher *h);
/* The digest of everything given, as hex (65 or 33 bytes), once idle. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_hasher_hex(ShardHasher *h, char *out);
/* Joins the thread and frees; accepts NULL. */
SHARD_HIDDEN void shard_hasher_free(ShardHasher *h);

#endif /* SHARD_SINK_HASHER_H */
