/*
 * Objects in gs:// and s3:// buckets (objectsink.c): the sink of a bucket's URL.
 */
#ifndef SHARD_SINK_OBJECTSINK_H
#define SHARD_SINK_OBJECTSINK_H

#include "base/attr.h"
#include "shard/remote.h"
#include "sink/sinkdef.h"

/* Makes k write the object url names through r (NULL: the default remote). */
SHARD_HIDDEN int shard_sink_object_open(ShardSink *k, const char *url, ShardRemote *r, char *err);

#endif /* SHARD_SINK_OBJECTSINK_H */
