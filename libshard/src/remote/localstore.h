/*
 * A local folder as a store (localstore.c): files under a path or file:///PATH.
 */
#ifndef SHARD_REMOTE_LOCALSTORE_H
#define SHARD_REMOTE_LOCALSTORE_H

#include "base/attr.h"
#include "remote/storedef.h"

SHARD_HIDDEN extern const ShardStoreRow shard_store_folder;

#endif /* SHARD_REMOTE_LOCALSTORE_H */
