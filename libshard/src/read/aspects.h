/*
 * A list's image sizes as the aspect buckets use them (aspects.c; shard/image.h's
 * shard_aspect_buckets is the public side): one shard's sizes, checked, and the "auto"
 * buckets fitted to the list's aspect histogram.
 */
#ifndef SHARD_READ_ASPECTS_H
#define SHARD_READ_ASPECTS_H

#include <stddef.h>

#include "base/attr.h"
#include "resume/resume.h"
#include "shard/list.h"
#include "shard/remote.h"
#include "tar/columns.h"

/* Shard i's sizes (ShardListEntry.columns) into c, their width and height columns into k:
 * 0, or an error with msg (SHARD_ERROR_MAX bytes) naming the shard or file and what is
 * wrong (none made, gone, no such columns, another count of samples than the shard's). */
SHARD_HIDDEN int shard_aspect_sizes(const ShardList *l, size_t i, ShardRemote *remote,
                                    ShardColumns *c, int k[2], char *msg);
/* "auto": b's b->auto_k buckets of side x side's area fitted to the aspect histogram of
 * every sample of l with a size, one shard's sizes in memory at a time. 0, or an error
 * with msg. */
SHARD_HIDDEN int shard_aspect_fit(const ShardList *l, ShardBuckets *b, int side,
                                  ShardRemote *remote, char *msg);

/* The side whose square the named sets and "auto" are scaled to for images of width x
 * height (the loader's transform): the same area. */
SHARD_HIDDEN int shard_aspect_side(int width, int height);

#endif /* SHARD_READ_ASPECTS_H */
