/*
 * shardcat repair (shardcat_repair.c). Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_REPAIR_H
#define SHARD_TOOLS_SHARDCAT_REPAIR_H

#include "shardcat_cli.h"

/* Repairs the local set of the manifest cli->args[0] (which may be gone): its indexes, its
 * damaged shards cut to their whole samples, its manifest from the shards found; says what
 * it did and what it could not. The exit status: 1 when something could not be repaired. */
int shardcat_repair(const ShardcatCli *cli, ShardRemote *remote);

#endif /* SHARD_TOOLS_SHARDCAT_REPAIR_H */
