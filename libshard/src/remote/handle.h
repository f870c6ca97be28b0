/*
 * The remote handle's lifetime inside the library (handle.c): a reference dropped, a
 * handle with the defaults for a caller that gave none.
 */
#ifndef SHARD_REMOTE_HANDLE_H
#define SHARD_REMOTE_HANDLE_H

#include "base/attr.h"
#include "shard/remote.h"

/* Drops a reference; the last one stops the network thread and frees r. Accepts NULL. */
SHARD_HIDDEN void shard_remote_put(ShardRemote *r);

/* A ShardRemote for a caller that gave none: the defaults. NULL when out of memory (err,
 * SHARD_ERROR_MAX bytes, says so). */
SHARD_HIDDEN ShardRemote *shard_remote_default(char *err);

#endif /* SHARD_REMOTE_HANDLE_H */
