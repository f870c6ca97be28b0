/*
 * A bucketed epoch's plan (bucketplan.c; ShardReaderSettings.aspect_buckets): the buckets,
 * each sample's from the shards' image sizes, and the epoch's line replayed on identities
 * through the grouper, to find what is pending at a point (bucketline.c's carry-in), how
 * many batches each consumer delivers (len(), equal mode) and the job's state after a
 * number of batches a rank (a DataLoader's state_dict).
 *
 * DESIGN
 * - The replay is an order_only reader of one consumer on the reading's epoch and
 *   partitions (opened when first needed, through the handle's calls so that this file does
 *   not reach back into streamreader.c), its items identities only; each sample's bucket
 *   comes from its shard's columns, a few shards' kept at once. Its cost is a walk over the
 *   order before the point, no image read; memory follows the settings (buckets x batch).
 */
#ifndef SHARD_READ_BUCKETPLAN_H
#define SHARD_READ_BUCKETPLAN_H

#include "base/attr.h"
#include "read/readerdef.h"

typedef struct ShardBucketPlan ShardBucketPlan;

/* How the replay's reader is opened and freed: the handle's calls (streamreader.c). */
typedef struct ShardReplayOps {
    int (*open)(ShardReader **out, const ShardReaderSettings *s, ShardError *err);
    void (*free)(ShardReader **r);
} ShardReplayOps;

/* The plan for r opened on settings s (whose specs are copied for the replay): 0, or an
 * error in r->err naming the setting refused. */
SHARD_HIDDEN int shard_bucketplan_new(ShardBucketPlan **out, ShardReader *r,
                                      const ShardReaderSettings *s, const ShardReplayOps *ops);
SHARD_HIDDEN void shard_bucketplan_free(ShardBucketPlan **p);

/* The buckets: how many, bucket b's size, the batch and whether partials are dropped. */
SHARD_HIDDEN size_t shard_bucketplan_count(const ShardBucketPlan *p);
SHARD_HIDDEN void shard_bucketplan_size(const ShardBucketPlan *p, size_t b, int *height,
                                        int *width);
SHARD_HIDDEN size_t shard_bucketplan_batch(const ShardBucketPlan *p);
SHARD_HIDDEN int shard_bucketplan_drops(const ShardBucketPlan *p);

/* The bucket of sample index of shard: 0, or an error in r->err naming the sample. A
 * sample without an image size is in no bucket: with skip_errors *b is SHARD_NO_BUCKET,
 * the same on every consumer and replay (the live reading counts it skipped). */
#define SHARD_NO_BUCKET ((size_t)-1)
SHARD_HIDDEN int shard_bucketplan_bucket_of(ShardBucketPlan *p, ShardReader *r, uint32_t shard,
                                            uint64_t index, size_t *b);
/* What a sample without an image size is told with, into buf. */
SHARD_HIDDEN void shard_bucketplan_no_size(const ShardReader *r, uint32_t shard,
                                           uint64_t index, char *buf, size_t size);
/* The line's points [0, upto) of r's reading through grouper g on identities; each batch
 * completed at a point passed to done(ctx, point) (done may be NULL). 0 or an error in
 * r->err. */
SHARD_HIDDEN int shard_bucketplan_replay(ShardBucketPlan *p, ShardReader *r, ShardGrouper *g,
                                         uint64_t upto, void (*done)(void *ctx, uint64_t point),
                                         void *ctx);

/* Rank rank's batches from the reading's cut on (shard_reader_rank_batches); -1 on an
 * error (in r->err). */
SHARD_HIDDEN int64_t shard_bucketplan_rank_batches(ShardBucketPlan *p, ShardReader *r,
                                                   int rank);
/* The batches r's consumer delivers in its reading: its own with the partials where it ends
 * the line; in equal mode its share (the fewest any rank has,
 * a rank's excess dropped from its last workers). 0 or an error in r->err. */
SHARD_HIDDEN int shard_bucketplan_quota(ShardBucketPlan *p, ShardReader *r, uint64_t *quota);
/* The reading's cut after every rank delivered `batches` batches, its workers' taken in
 * turn from worker first as a DataLoader does (shard_cut_deal), into out (a copy of the
 * reading's cut, advanced). 0 or an error code. */
SHARD_HIDDEN int shard_bucketplan_cut_after(ShardBucketPlan *p, ShardReader *r,
                                            uint64_t batches, int first, ShardCut *out);

#endif /* SHARD_READ_BUCKETPLAN_H */
