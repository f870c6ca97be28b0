/*
 * The remote handle as the rest of the library holds it (handle.c): a reference taken and
 * dropped, the handle a reader, writer or list resolves once at open (the caller's, or one
 * with the defaults), the settings its users read, and the counters they add to. Outside
 * remote/, ShardRemote is an incomplete type: its insides (remotedef.h) and libcurl stay
 * in this folder.
 */
#ifndef SHARD_REMOTE_HANDLE_H
#define SHARD_REMOTE_HANDLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/remote.h"

/* A reference on r for a source, a sink or a transfer; shard_remote_put drops it. */
SHARD_HIDDEN ShardRemote *shard_remote_ref(ShardRemote *r);

/* Drops a reference; the last one stops the network thread and frees r. Accepts NULL. */
SHARD_HIDDEN void shard_remote_put(ShardRemote *r);

/* The handle an opener keeps: a reference on given, or (given NULL) a new handle with the
 * defaults. NULL when out of memory (err, SHARD_ERROR_MAX bytes, says so). */
SHARD_HIDDEN ShardRemote *shard_remote_resolve(ShardRemote *given, char *err);

/* The settings its users read: the local cache's folder (NULL: no cache) and its limit in
 * bytes (0: none), the retries a failed request earns, the size of an upload's parts. */
SHARD_HIDDEN const char *shard_remote_cache_dir(const ShardRemote *r);
SHARD_HIDDEN uint64_t shard_remote_cache_limit(const ShardRemote *r);
SHARD_HIDDEN int shard_remote_retries(const ShardRemote *r);
SHARD_HIDDEN uint64_t shard_remote_upload_part(const ShardRemote *r);

/* The counters of shard/remote.h's ShardRemoteStats that sources and the cache add to. */
typedef enum ShardRemoteCount {
    SHARD_REMOTE_RETRIES,
    SHARD_REMOTE_RESUMES,
    SHARD_REMOTE_RANGE_IGNORED,
    SHARD_REMOTE_REPLACED,
    SHARD_REMOTE_CACHE_HITS,
    SHARD_REMOTE_CACHE_MISSES,
    SHARD_REMOTE_CACHE_BYTES,
    SHARD_REMOTE_RESOLVES,
    SHARD_REMOTE_DIRECT,
} ShardRemoteCount;
SHARD_HIDDEN void shard_remote_count(ShardRemote *r, ShardRemoteCount which, uint64_t n);

#endif /* SHARD_REMOTE_HANDLE_H */
