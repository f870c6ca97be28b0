/*
 * An epoch of the streaming reader (epoch.c): its plan, the order its samples come in, and
 * the consumer's steps through it.
 */
#ifndef SHARD_READ_EPOCH_H
#define SHARD_READ_EPOCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "read/readerdef.h"
#include "read/shuffle.h"

/* This consumer's number among all (rank * num_workers + worker). */
SHARD_HIDDEN uint64_t shard_reader_consumer(const ShardReader *r);
/* Segment n of stream k, or 0 past its last (a ShardSegmentFn: called on the fetch threads
 * too, it only reads what entering a partition set while they were stopped). */
SHARD_HIDDEN int shard_reader_segment(void *cookie, size_t k, size_t n, ShardSegment *out);
/* Starts the fetch threads of the streams that have samples left. */
SHARD_HIDDEN int shard_reader_start(ShardReader *r);
/* Drops the samples buffered and handed out, and the streams' holds. */
SHARD_HIDDEN void shard_reader_clear(ShardReader *r);
/* Begins epoch e (threads stopped, not started): its order, of parts partitions (0: the
 * setting's or the automatic count) over a sequence of total samples (0: this topology's;
 * a state's differs with a mix of epoch_samples); nothing entered, none delivered. */
SHARD_HIDDEN int shard_reader_plan(ShardReader *r, uint64_t e, uint32_t parts, uint64_t total);
/* Sets epoch_length from the order. */
SHARD_HIDDEN void shard_reader_set_length(ShardReader *r);
/* Source src's stream whose turn it is in the round-robin; NULL when all of them ended.
 * The data path and the replay share this order. */
SHARD_HIDDEN ReaderStream *shard_reader_turn(ShardReader *r, size_t src);
/* The source of the next sample (0 unless mixing); -1 at the end of a mix. */
SHARD_HIDDEN int shard_reader_source(ShardReader *r);
/* The next sample of the partition through its shuffle buffer, pulled with pullf; NULL at
 * its end or on failure (*rc). */
SHARD_HIDDEN ShardItem *shard_reader_step(ShardReader *r, ShardPullFn pullf, int *rc);

#endif /* SHARD_READ_EPOCH_H */
