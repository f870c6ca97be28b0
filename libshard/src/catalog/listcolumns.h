/*
 * The image sizes of a list's shards (listcolumns.c; ShardListSettings.columns): the
 * columns beside each shard's index, else those kept in the index cache, made there from
 * the shard's headers where the list makes indexes; several shards at a time.
 */
#ifndef SHARD_CATALOG_LISTCOLUMNS_H
#define SHARD_CATALOG_LISTCOLUMNS_H

#include "base/attr.h"
#include "shard/list.h"

/* Fills ShardListEntry.columns of l's shards (each count must be known). 0, or an error
 * with msg (SHARD_ERROR_MAX bytes) naming the shard. */
SHARD_HIDDEN int shard_list_fill_columns(ShardList *l, const ShardListSettings *s, char *msg);

#endif /* SHARD_CATALOG_LISTCOLUMNS_H */
