/*
 * Lanes (lane.c): a libcurl multi handle of its own, driven by the one thread that reads its
 * transfers, inside their reads (xfer.h).
 */
#ifndef SHARD_REMOTE_LANE_H
#define SHARD_REMOTE_LANE_H

#include <sys/types.h>

#include "base/attr.h"
#include "remote/xfertypes.h"

/* A lane with one reference, or NULL when out of memory. Its transfers are started, read
 * and freed on one thread at a time: the caller's. */
SHARD_HIDDEN ShardNetLane *shard_lane_new(void);
SHARD_HIDDEN ShardNetLane *shard_lane_ref(ShardNetLane *l);
/* Drops a reference (each transfer on the lane holds one). Accepts NULL. */
SHARD_HIDDEN void shard_lane_put(ShardNetLane *l);

/* From any thread: the lane's transfers end now, as failed ("stopped"), and so do those
 * started on it after; its reader's waits (a retry's backoff too) end at once. */
SHARD_HIDDEN void shard_lane_abort(ShardNetLane *l);
/* Whether l (NULL: none) was aborted. */
SHARD_HIDDEN int shard_lane_aborted(const ShardNetLane *l);

/* For xfer.c: puts x on lane (x->lane set, a reference) and sends its request; 0 or an
 * error. */
SHARD_HIDDEN int shard_lane_add(ShardXfer *x, ShardNetLane *lane, char *err);
/* shard_xfer_head and shard_xfer_read for a transfer on a lane: the reader runs the lane's
 * transfers itself until x has what is asked for. */
SHARD_HIDDEN int shard_lane_head(ShardXfer *x);
SHARD_HIDDEN ssize_t shard_lane_read(ShardXfer *x, const void **block);
/* Takes x off its lane, if it is still on it, and drops x's reference on the lane. */
SHARD_HIDDEN void shard_lane_remove(ShardXfer *x);

#endif /* SHARD_REMOTE_LANE_H */
