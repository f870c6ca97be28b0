/*
 * What the streaming reader (streamreader.c) tells the loader besides its public API
 * (shard/reader.h): the fetch stage's counters and the list's timing for its statistics, and where
 * the fetch threads record their spans.
 */
#ifndef SHARD_READ_STREAMREADER_H
#define SHARD_READ_STREAMREADER_H

#include "base/attr.h"
#include "read/fetch.h"
#include "shard/reader.h"

/* For the loader's statistics and traces (load/batchloader.c): the fetch stage's counters; when
 * the reader listed its shards, and for how long (a trace's span); and where the fetch
 * threads record their spans (borrowed; NULL: none), set before they start. */
SHARD_HIDDEN void shard_reader_fetch_counters(const ShardReader *r, ShardFetchCounters *c);
SHARD_HIDDEN void shard_reader_list_time(const ShardReader *r, double *start, double *seconds);
SHARD_HIDDEN void shard_reader_set_trace(ShardReader *r, struct ShardTrace *trace);
/* From another thread: a take blocked on the fetch stage (a slow command, a server, a
 * backoff) returns now, failing; the epoch is given up (set_epoch or restore next). */
SHARD_HIDDEN void shard_reader_interrupt(ShardReader *r);
/* The order of the epoch the reader is in (a reference, the caller's to put): the loader's
 * batches keep theirs, for states taken while the reader reads ahead. On the reading
 * thread, or while it is stopped. */
struct ShardOrder;
SHARD_HIDDEN struct ShardOrder *shard_reader_order(ShardReader *r);
/* Samples this consumer has yielded in the epoch (a restore's base included). */
SHARD_HIDDEN uint64_t shard_reader_position(const ShardReader *r);
/* The mix source shard (an index into the shard list) belongs to; 0 without a mix. */
SHARD_HIDDEN uint32_t shard_reader_source_of(const ShardReader *r, size_t shard);

#endif /* SHARD_READ_STREAMREADER_H */
