/*
 * What a folder or a bucket's prefix holds (listing.c), as a pack's output and record are
 * read: names and sizes, looked up by name.
 */
#ifndef SHARD_PACK_LISTING_H
#define SHARD_PACK_LISTING_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/pack.h"

/* A folder's or a bucket prefix's objects: names relative to the listed folder (a nested
 * object's with its '/', so it never stands for one of the folder's own) and sizes, in name
 * order. */
typedef struct ShardPackEntry {
    char *name;
    uint64_t size;
} ShardPackEntry;
typedef struct ShardPackListing {
    ShardPackEntry *v;
    size_t n, cap;
} ShardPackListing;

/* Lists dir (a folder or a bucket's prefix, in the plan's output store) into out (freed by
 * shard_pack_listing_free); a folder that does not exist lists nothing. 0, or an error
 * with msg (SHARD_ERROR_MAX bytes). */
SHARD_HIDDEN int shard_pack_list(const ShardPackPlan *p, const char *dir, ShardPackListing *out,
                                 char *msg);
/* 1 when l holds name (its size into *size, which may be NULL), else 0. */
SHARD_HIDDEN int shard_pack_listing_size(const ShardPackListing *l, const char *name,
                                         uint64_t *size);
SHARD_HIDDEN void shard_pack_listing_free(ShardPackListing *l);

#endif /* SHARD_PACK_LISTING_H */
