/*
 * An epoch of the streaming reader (epoch.c): its order, and the consumer's reading of it,
 * partition after partition (their steps are steps.c's).
 */
#ifndef SHARD_READ_EPOCH_H
#define SHARD_READ_EPOCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "read/readerdef.h"

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

#endif /* SHARD_READ_EPOCH_H */
