/*
 * A partition's streams and buffer stepped (steps.c): the order both the reading and a
 * resume's replay follow.
 */
#ifndef SHARD_READ_STEPS_H
#define SHARD_READ_STEPS_H

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
/* Source src's stream whose turn it is in the round-robin; NULL when all of them ended.
 * The data path and the replay share this order. */
SHARD_HIDDEN ReaderStream *shard_reader_turn(ShardReader *r, size_t src);
/* The source of the next sample (0 unless mixing); -1 at the end of a mix. */
SHARD_HIDDEN int shard_reader_source(ShardReader *r);
/* The next sample of the partition through its shuffle buffer, pulled with pullf; NULL at
 * its end or on failure (*rc). */
SHARD_HIDDEN ShardItem *shard_reader_step(ShardReader *r, ShardPullFn pullf, int *rc);
/* A ShardPullFn on sample identities alone (shard, sample number; no byte read): the next
 * one of the round-robin, advancing the replay's bookkeeping. */
SHARD_HIDDEN ShardItem *shard_reader_pull_ids(void *cookie, int *rc);
/* Passes over the first n samples of the partition just entered, as though it had yielded
 * them: its round-robin and buffer replayed on sample identities (every count known), the
 * buffered samples then read by index (not for an order_only reader, whose buffer holds identities). The
 * fetch threads start at the next pull. */
SHARD_HIDDEN int shard_reader_replay(ShardReader *r, uint64_t n);

#endif /* SHARD_READ_STEPS_H */
