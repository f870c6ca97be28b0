/*
 * The stores that are read and never written (readonly.c): a web server (http://,
 * https://) and a command's output (pipe:COMMAND). Neither lists; a command's output has no
 * siblings and no version.
 */
#ifndef SHARD_REMOTE_READONLY_H
#define SHARD_REMOTE_READONLY_H

#include "base/attr.h"
#include "remote/storedef.h"

SHARD_HIDDEN extern const ShardStoreRow shard_store_web, shard_store_command;

#endif /* SHARD_REMOTE_READONLY_H */
