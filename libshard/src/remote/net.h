/*
 * A ShardRemote's network thread (net.c): it carries every transfer started without a lane.
 */
#ifndef SHARD_REMOTE_NET_H
#define SHARD_REMOTE_NET_H

#include "base/attr.h"
#include "remote/remotedef.h"

/* Queues x on r's network thread (started when it is not running) and wakes it; 0 or an
 * error with err. */
SHARD_HIDDEN int shard_net_add(ShardRemote *r, ShardXfer *x, char *err);
/* Stops the network thread (no transfer is left: each source freed its own). */
SHARD_HIDDEN void shard_net_stop(ShardRemote *r);

#endif /* SHARD_REMOTE_NET_H */
