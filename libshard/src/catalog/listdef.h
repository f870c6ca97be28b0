/*
 * A shard list's insides, shared by its files: the list itself (shardlist.c) and the
 * counts (counts.c) and image sizes (listcolumns.c) filled in after it is expanded.
 */
#ifndef SHARD_CATALOG_LISTDEF_H
#define SHARD_CATALOG_LISTDEF_H

#include <stddef.h>
#include <stdint.h>

#include "shard/list.h"

struct ShardList {
    ShardListEntry *v;
    size_t n, cap;
    ShardManifest **manifests; /* per spec, NULL where it was no manifest */
    size_t nspecs;
    uint64_t bytes; /* of the names brace patterns gave */
    uint64_t built, cached; /* indexes made, and found in the cache */
};

#endif /* SHARD_CATALOG_LISTDEF_H */
