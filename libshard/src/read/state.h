/*
 * The reader's state as text (state.c): where it stands and every setting that fixes the
 * order of the rest of the epoch, so that a state restored where it does not fit is
 * refused, naming what differs.
 */
#ifndef SHARD_READ_STATE_H
#define SHARD_READ_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "read/readerdef.h"

/* Fingerprints the reader's shard list (URLs, counts, sources) and weights, once at open.
 * 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_reader_fingerprint(ShardReader *r);

/* The state of r at epoch and position (the loader's delivered position may lag the
 * reader's) into buf (size bytes; SHARD_READER_STATE_MAX suffice). 0 or SHARD_ERR_INVALID
 * when it does not fit. */
SHARD_HIDDEN int shard_reader_state_at(const ShardReader *r, uint64_t epoch, uint64_t position,
                                       char *buf, size_t size);

/* Reads state and checks it against r's settings: every difference named in r->err
 * (SHARD_ERR_INVALID). A reader that drew its own seed takes the state's. Fills epoch,
 * position and seed on success. */
SHARD_HIDDEN int shard_reader_state_check(ShardReader *r, const char *state, uint64_t *epoch,
                                          uint64_t *position, uint64_t *seed);

#endif /* SHARD_READ_STATE_H */
