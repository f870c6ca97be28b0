/*
 * Samples a later stage decodes: the GPU's JPEG decoder (gpu/) asks the loader, through
 * this hook, to leave it the JPEGs it takes. The producer asks the hook once per sample
 * with an image; a sample it takes is not decoded by the CPU threads, its bytes go with
 * the batch (ShardBatch.gpu_*), and its place in the images is the taker's to fill.
 */
#ifndef SHARD_LOAD_DEFER_H
#define SHARD_LOAD_DEFER_H

#include <stddef.h>

#include "base/attr.h"
#include "shard/loader.h"

typedef struct ShardDefer {
    /* 0: the taker decodes this image; else why not (1..255, the taker's code, given with
     * the batch in ShardBatch.gpu_why). Called on the producer's thread only. */
    int (*take)(void *ctx, const unsigned char *data, size_t size);
    void *ctx;
} ShardDefer;

/* Sets the hook (copied), or clears it with NULL: once this returns, the producer no
 * longer calls the old one. Batches already made keep what they were given. */
SHARD_HIDDEN void shard_loader_defer(ShardLoader *l, const ShardDefer *d);

/* Sets the hook on a loader that may have made batches ahead without it (all on the CPU):
 * those are dropped and made again from where the caller stands (the producer stopped, the
 * hook set, the loader's own state restored), so the hook decides from the first batch the
 * caller takes, and each sample is asked once. */
SHARD_HIDDEN void shard_loader_defer_from_here(ShardLoader *l, const ShardDefer *d);

/* The loader's transform (borrowed: as long as the loader), for a stage that decodes. */
SHARD_HIDDEN const ShardTransform *shard_loader_transform(const ShardLoader *l);

/* The loader's decode threads: how many, the images they decoded and their busy seconds,
 * all since the loader opened. */
SHARD_HIDDEN void shard_loader_decode_work(const ShardLoader *l, int *threads, uint64_t *items,
                                           double *busy);

#endif /* SHARD_LOAD_DEFER_H */
