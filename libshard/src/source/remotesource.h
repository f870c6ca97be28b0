/*
 * Remote objects as sources (remotesource.c): http(s)://, gs://, s3://, streamed through transfers
 * (remote/xfer.h), retried and resumed, and teed into the cache (cache.h) as they are read.
 */
#ifndef SHARD_SOURCE_REMOTESOURCE_H
#define SHARD_SOURCE_REMOTESOURCE_H

#include "base/attr.h"
#include "remote/xfer.h"
#include "shard/remote.h"
#include "source/source.h"

/* Opens url through remote (NULL: a ShardRemote with the default settings, made for this
 * source); its transfers run on lane (a reference is taken; NULL: remote's network thread). */
SHARD_HIDDEN int shard_source_remote(ShardSource **out, const char *url, ShardRemote *remote,
                                     int flags, ShardNetLane *lane, char *err);

#endif /* SHARD_SOURCE_REMOTESOURCE_H */
