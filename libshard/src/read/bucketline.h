/*
 * A bucketed reading (bucketline.c; ShardReaderSettings.aspect_buckets): the consumer's
 * samples regrouped into batches of one aspect bucket each, planned on the epoch's line.
 *
 * DESIGN
 * - The line is the epoch's partitions end to end (readerdef.h). Its samples go, in the
 *   line's order, each into its bucket's pending batch (resume/buckets.h's grouper); a
 *   batch is known by the point that completes it, and a consumer delivers the batches
 *   completed in its pieces of the line, in that order. What is pending at a point is a
 *   function of the line before it, so topology never enters: a state's position counts
 *   the points of the batches delivered, and a reading that begins at a point (a
 *   consumer's first piece, a resume, a jump over points delivered) replays the line's
 *   identities before it (bucketplan.c) and reads what is pending there by index.
 *   Consecutive pieces keep theirs in memory.
 * - Partial batches exist only at the line's end: at most one per bucket and epoch, given
 *   by the consumer that takes the line's last point (or dropped, drop_last). A state taken
 *   between them resumes after all of them.
 * - Equal mode: each consumer hands out its share (bucketplan.c's quota) and drops the
 *   batches past it; the order's repeats are passed over.
 */
#ifndef SHARD_READ_BUCKETLINE_H
#define SHARD_READ_BUCKETLINE_H

#include "base/attr.h"
#include "read/bucketplan.h"
#include "read/readerdef.h"

typedef struct ShardBucketLine ShardBucketLine;

/* A bucketed reading for r on plan (borrowed; it outlives the reading): 0, or an error in
 * r->err. A new reading of r (an epoch, a restore: ShardReader.readings) starts it anew. */
SHARD_HIDDEN int shard_bucketline_new(ShardBucketLine **out, ShardReader *r,
                                      ShardBucketPlan *plan);
/* shard_reader_take for a bucketed reader. */
SHARD_HIDDEN int shard_bucketline_take(ShardReader *r, ShardItem **out);
/* The position a state records: after the last batch delivered whole. */
SHARD_HIDDEN uint64_t shard_bucketline_position(const ShardReader *r);
SHARD_HIDDEN void shard_bucketline_free(ShardBucketLine **bl);

#endif /* SHARD_READ_BUCKETLINE_H */
