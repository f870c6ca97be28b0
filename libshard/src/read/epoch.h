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
/* Stops the epoch's reading and forgets it: epoch e, nothing entered, none delivered
 * (threads stopped, not started). */
SHARD_HIDDEN void shard_reader_reset(ShardReader *r, uint64_t e);
/* The order of the epoch a reset began: parts partitions (0: the setting's or the automatic
 * count) over a sequence of total samples (0: this topology's; a state's differs with a mix
 * of epoch_samples), not yet begun (shard_order_begin: from the start, or a state's cut;
 * then shard_reader_set_length). */
SHARD_HIDDEN int shard_reader_plan_order(ShardReader *r, uint32_t parts, uint64_t total);
/* Begins epoch e from its start: shard_reader_reset, shard_reader_plan_order, the order
 * begun. */
SHARD_HIDDEN int shard_reader_plan(ShardReader *r, uint64_t e, uint32_t parts, uint64_t total);
/* Enters piece i of the order (npieces: the repeats) skip samples past where it begins,
 * those before passed over (replayed on identities, or read and dropped). */
SHARD_HIDDEN int shard_reader_enter(ShardReader *r, int64_t i, uint64_t skip);
/* shard_reader_take for any reader, order_only included (whose items are identities:
 * shard, sample number, repeat, position). */
SHARD_HIDDEN int shard_reader_take_next(ShardReader *r, ShardItem **out);
/* Sets epoch_length from the order. */
SHARD_HIDDEN void shard_reader_set_length(ShardReader *r);

#endif /* SHARD_READ_EPOCH_H */
