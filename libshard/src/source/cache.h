/*
 * The local cache of remote shards (ShardRemoteSettings.cache_dir): a shard read from the
 * network in full is kept in a folder, and later opens (the next epoch, another rank on the
 * machine) read the file instead. A shard is written under a temporary name as it streams
 * to the reader and renamed into place once complete, so readers never see part of one;
 * several processes may share the folder (each writes its own temporary file; the last
 * rename wins with the same bytes). The folder is kept under its size limit by deleting the
 * least recently used shards (an open counts as a use), under an flock so that processes
 * do not evict at once. The cache is an optimisation: a failure to write it is not an error.
 */
#ifndef SHARD_SOURCE_CACHE_H
#define SHARD_SOURCE_CACHE_H

#include "base/attr.h"
#include "source/source.h"

typedef struct ShardCacheFill ShardCacheFill;

/* The cached copy of url as a (mapped) file source: 0 with *out set, SHARD_ERR_NOT_FOUND
 * when it is not cached, or another error. */
SHARD_HIDDEN int shard_cache_open(ShardRemote *r, const char *url, ShardSource **out, char *err);

/* Starts caching url; NULL when it cannot (the stream goes on uncached). */
SHARD_HIDDEN ShardCacheFill *shard_cache_fill_begin(ShardRemote *r, const char *url);
/* Appends the stream's next bytes; on failure the fill is dropped (*f set to NULL). */
SHARD_HIDDEN void shard_cache_fill_write(ShardCacheFill **f, const void *p, size_t n);
/* The stream ended after size bytes: the file goes into place, the folder is trimmed. */
SHARD_HIDDEN void shard_cache_fill_commit(ShardCacheFill **f, uint64_t size);
/* Drops a fill that did not complete. Accepts NULL. */
SHARD_HIDDEN void shard_cache_fill_abort(ShardCacheFill **f);

#endif /* SHARD_SOURCE_CACHE_H */
