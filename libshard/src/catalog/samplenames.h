/*
 * Samples named from their shards' indexes (samplenames.c): the key of sample i of shard s
 * without reading the shard, each index read when first asked and kept among the last few
 * asked (memory bounded by the cache's size, not the data set's).
 */
#ifndef SHARD_CATALOG_SAMPLENAMES_H
#define SHARD_CATALOG_SAMPLENAMES_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/list.h"
#include "shard/remote.h"

typedef struct ShardNames ShardNames;

/* A cache of at most `keep` indexes of list l's shards (borrowed: they must outlive it),
 * read through remote; NULL when out of memory. */
SHARD_HIDDEN ShardNames *shard_names_new(const ShardList *l, ShardRemote *remote, size_t keep);
SHARD_HIDDEN void shard_names_free(ShardNames **n);

/* The key of sample `index` of shard `shard` into *key (valid until the next call), from the
 * index the list names for it (one libshard made) or the .idx beside it. 0, or an error with
 * err (SHARD_ERROR_MAX bytes) naming the shard and index: none, a DALI v1.1 index (no member
 * names), or a sample number past its count. */
SHARD_HIDDEN int shard_names_key(ShardNames *n, uint32_t shard, uint64_t index, const char **key,
                                 char *err);

/* Indexes read so far (each read again after it left the cache counted again). */
SHARD_HIDDEN uint64_t shard_names_reads(const ShardNames *n);

#endif /* SHARD_CATALOG_SAMPLENAMES_H */
