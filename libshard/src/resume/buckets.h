/*
 * Aspect-ratio buckets (buckets.c): the output sizes a bucketed epoch batches by, from a
 * spec ("HxW,HxW,...", a named set, or "auto" fitted to the data set's aspect histogram),
 * and the bucket each image goes to (the nearest in log aspect ratio). Arithmetic only: a
 * sample's bucket is part of the epoch's order.
 */
#ifndef SHARD_RESUME_BUCKETS_H
#define SHARD_RESUME_BUCKETS_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"

/* The most buckets a spec may give. */
#define SHARD_BUCKETS_MAX 128
/* The aspect histogram "auto" fits to: bins of log(width / height) over [-2, 2] (aspects
 * 1:7.4 to 7.4:1; those past the ends counted in the end bins). */
#define SHARD_ASPECT_BINS 256
#define SHARD_ASPECT_LOG_MAX 2.0
/* "auto" without a count: this many buckets. */
#define SHARD_BUCKETS_AUTO_DEFAULT 8

typedef struct ShardBucket {
    int height, width;
} ShardBucket;

typedef struct ShardBuckets {
    ShardBucket v[SHARD_BUCKETS_MAX];
    size_t n;
    size_t auto_k; /* "auto[:K]": K buckets to fit (shard_buckets_fit), v empty until then */
} ShardBuckets;

/* Parses spec for an output of side x side pixels (the named sets and "auto" are scaled to
 * its area): "HxW[,HxW...]" (each side 8 to 16384), "sdxl" (the 1024x1024 family of
 * 64-aligned sizes, scaled by side / 1024 and aligned to 8), "auto" or "auto:K" (K from 2
 * to SHARD_BUCKETS_MAX). 0, or SHARD_ERR_INVALID with err (SHARD_ERROR_MAX bytes) naming
 * what in spec is wrong. */
SHARD_HIDDEN int shard_buckets_parse(ShardBuckets *b, const char *spec, int side, char *err);

/* The "sdxl" set for side (what shard_buckets_parse gives for it). */
SHARD_HIDDEN void shard_buckets_sdxl(ShardBuckets *b, int side);

/* The histogram bin of a width x height image. */
SHARD_HIDDEN size_t shard_aspect_bin(uint32_t width, uint32_t height);

/* "auto": b->auto_k sizes of side x side pixels' area (sides aligned to 8), their aspects
 * the medians of b->auto_k groups of equal count in hist (SHARD_ASPECT_BINS counts), equal
 * ones merged. A histogram of no image gives the one square bucket. */
SHARD_HIDDEN void shard_buckets_fit(ShardBuckets *b, const uint64_t *hist, int side);

/* The bucket of a width x height image: the nearest in log aspect ratio, the first of
 * equals. b has at least one bucket. */
SHARD_HIDDEN size_t shard_bucket_of(const ShardBuckets *b, uint32_t width, uint32_t height);

/* ---- batches by bucket --------------------------------------------------------------------
 * A bucketed epoch's batches, planned on the line (resume.h): its samples taken in the
 * line's order, each into its bucket's pending batch; a batch goes out whole when its
 * bucket's B-th sample comes, so a batch is known by the point that completed it, and what
 * is pending at any point is a function of the line before it (replayed on identities
 * where a reading begins). What is pending at the line's end are the epoch's partial
 * batches: at most one per bucket. Pending holds at most buckets x (B - 1) samples. */

/* A sample as the planner knows it: its point on the line, and where it is read. */
typedef struct ShardGroupItem {
    uint64_t point;
    uint64_t shard;  /* the shard's number in the list */
    uint64_t sample; /* its number in the shard */
} ShardGroupItem;

typedef struct ShardGrouper {
    size_t nbuckets, batch;
    ShardGroupItem *pend; /* nbuckets x batch: bucket b's pending at pend + b * batch */
    size_t *npend;
} ShardGrouper;

/* 0, or SHARD_ERR_NOMEM / SHARD_ERR_INVALID (no bucket, a batch of 0). */
SHARD_HIDDEN int shard_grouper_init(ShardGrouper *g, size_t nbuckets, size_t batch);
/* Adds it to bucket b: its batch, when it completes one (batch items in the order they
 * came, valid until the next call), the bucket then empty; else NULL. */
SHARD_HIDDEN const ShardGroupItem *shard_grouper_add(ShardGrouper *g, size_t b,
                                                     const ShardGroupItem *it);
/* Bucket b's pending items (*n of them, in the order they came). */
SHARD_HIDDEN const ShardGroupItem *shard_grouper_pending(const ShardGrouper *g, size_t b,
                                                         size_t *n);
/* Every bucket emptied. */
SHARD_HIDDEN void shard_grouper_clear(ShardGrouper *g);
SHARD_HIDDEN void shard_grouper_free(ShardGrouper *g);

#endif /* SHARD_RESUME_BUCKETS_H */
