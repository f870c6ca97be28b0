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
 *   consumer's first piece, a resume) replays the line's identities before it (an
 *   order_only reader of one consumer on the same partitions) through the grouper, then
 *   reads what is pending there by index. Consecutive pieces keep theirs in memory.
 * - Partial batches exist only at the line's end: at most one per bucket and epoch, given
 *   by the consumer that takes the line's last point (or dropped, drop_last).
 * - Sizes come from the shards' columns, a few shards' at a time.
 */
#ifndef SHARD_READ_BUCKETLINE_H
#define SHARD_READ_BUCKETLINE_H

#include "base/attr.h"
#include "read/readerdef.h"

typedef struct ShardBucketLine ShardBucketLine;

/* How the replay's reader is opened and freed: the handle's calls (streamreader.c, which
 * makes the bucketed reading). */
typedef struct ShardReplayOps {
    int (*open)(ShardReader **out, const ShardReaderSettings *s, ShardError *err);
    void (*free)(ShardReader **r);
} ShardReplayOps;

/* A bucketed reading for r (opened on settings s, whose specs are copied for the replay):
 * 0, or an error in r->err naming the setting refused. A new reading of r (an epoch, a
 * restore: ShardReader.readings) starts it anew. */
SHARD_HIDDEN int shard_bucketline_new(ShardBucketLine **out, ShardReader *r,
                                      const ShardReaderSettings *s, const ShardReplayOps *ops);
/* shard_reader_take for a bucketed reader. */
SHARD_HIDDEN int shard_bucketline_take(ShardReader *r, ShardItem **out);
/* The position a state records: after the last batch delivered whole. */
SHARD_HIDDEN uint64_t shard_bucketline_position(const ShardReader *r);
/* Bucket b's size. */
SHARD_HIDDEN void shard_bucketline_size(const ShardBucketLine *bl, size_t b, int *height,
                                        int *width);
SHARD_HIDDEN void shard_bucketline_free(ShardBucketLine **bl);

#endif /* SHARD_READ_BUCKETLINE_H */
