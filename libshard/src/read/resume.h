/*
 * A restore (resume.c): a state's epoch begun where its cut says, and the replay of a
 * partition entered in its middle.
 */
#ifndef SHARD_READ_RESUME_H
#define SHARD_READ_RESUME_H

#include <stdint.h>

#include "base/attr.h"
#include "read/readerdef.h"
#include "read/state.h"

/* Passes over the first n samples of the partition just entered, as though it had yielded
 * them: its round-robin and buffer replayed on sample identities (every count known), the
 * buffered samples then read by index. The fetch threads start at the next pull. */
SHARD_HIDDEN int shard_reader_replay(ShardReader *r, uint64_t n);

/* Begins a checked state's epoch where its cut says (partitions entered lazily). */
SHARD_HIDDEN int shard_reader_resume(ShardReader *r, const ShardStateIn *in);

#endif /* SHARD_READ_RESUME_H */
