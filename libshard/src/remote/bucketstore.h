/*
 * Buckets as stores (bucketstore.c): gs:// and s3:// objects, their conventions in gcs.c
 * and s3.c.
 */
#ifndef SHARD_REMOTE_BUCKETSTORE_H
#define SHARD_REMOTE_BUCKETSTORE_H

#include "base/attr.h"
#include "remote/storedef.h"

SHARD_HIDDEN extern const ShardStoreRow shard_store_bucket;

#endif /* SHARD_REMOTE_BUCKETSTORE_H */
