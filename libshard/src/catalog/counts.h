/*
 * The sample counts of a list's shards (counts.c): from each index's first line, and with
 * build_indexes from indexes found in the cache or made there, several shards at a time.
 */
#ifndef SHARD_CATALOG_COUNTS_H
#define SHARD_CATALOG_COUNTS_H

#include "base/attr.h"
#include "shard/list.h"

/* Fills the counts (and cached indexes) of l's shards that s asks for. 0, or an error with
 * msg (SHARD_ERROR_MAX bytes) naming the shard. */
SHARD_HIDDEN int shard_list_fill_counts(ShardList *l, const ShardListSettings *s, char *msg);

/* Whether s has the list make what the shard at url lacks (an index, its image sizes):
 * build_indexes set, and for SHARD_INDEXES_WHERE_CHEAP an uncompressed tar. */
SHARD_HIDDEN int shard_list_makes_for(const ShardListSettings *s, const char *url);

#endif /* SHARD_CATALOG_COUNTS_H */
