/*
 * A restore (restore.c): a state's epoch, reset (shard_reader_reset), begun where its cut says.
 */
#ifndef SHARD_READ_RESTORE_H
#define SHARD_READ_RESTORE_H

#include <stdint.h>

#include "base/attr.h"
#include "read/readerdef.h"
#include "read/state.h"

/* Begins a checked state's epoch where its cut says (partitions entered lazily). */
SHARD_HIDDEN int shard_reader_resume(ShardReader *r, const ShardStateIn *in);

#endif /* SHARD_READ_RESTORE_H */
