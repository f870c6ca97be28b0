/*
 * Indexes made on demand (indexcache.c): a shard with neither a manifest entry nor a .idx
 * beside it gets its index from one pass over its headers, kept in a cache folder of the
 * user's (never beside the shard) and found there again while the shard is unchanged; so
 * are the image sizes (.cols) of a shard that has none beside it.
 */
#ifndef SHARD_CATALOG_INDEXCACHE_H
#define SHARD_CATALOG_INDEXCACHE_H

#include <stdint.h>

#include "base/attr.h"
#include "shard/remote.h"

/* The cache folder (malloc'd; NULL out of memory): dir when given, else the remote's
 * cache_dir/index, else $XDG_CACHE_HOME/libshard/index, else $HOME/.cache/libshard/index. */
SHARD_HIDDEN char *shard_index_cache_dir(const char *dir, const ShardRemote *remote);

/* The index of the shard at url, from the cache folder dir: found there under a name made
 * of the shard's URL, size and version (a local file's mtime and inode, a remote object's
 * generation or ETag), else made now (an older version's index removed). *path receives
 * the index's path (malloc'd), *count its samples, *built whether it was made now.
 * @return 0, or an error naming the shard (and the offset and member where reading it
 *         failed); SHARD_ERR_UNSUPPORTED for a pipe, which has no version to key it by */
SHARD_HIDDEN int shard_index_cached(const char *dir, const char *url, ShardRemote *remote,
                                    char **path, uint64_t *count, int *built, char *err);

/* The image sizes of the shard at url (formats/columns.md), from the cache folder dir: found
 * there under the name its index would have, with .cols, while the shard is unchanged, else
 * made now from its index (index: the one to read offsets from, NULL for the one beside the
 * shard) with count samples; an image whose header does not parse gets "-". *path receives
 * the columns' path (malloc'd), *built whether they were made now.
 * @return 0, or an error naming the shard (and the sample, member and offset) */
SHARD_HIDDEN int shard_columns_cached(const char *dir, const char *url, const char *index,
                                      uint64_t count, ShardRemote *remote, char **path,
                                      int *built, char *err);

#endif /* SHARD_CATALOG_INDEXCACHE_H */
