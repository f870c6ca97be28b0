/*
 * shardcat verify and index (shardcat_verify.c): each returns the exit status.
 */
#ifndef SHARD_TOOLS_SHARDCAT_VERIFY_H
#define SHARD_TOOLS_SHARDCAT_VERIFY_H

#include <shard/shard.h>

#include "shardcat_cli.h"

int shardcat_verify(const ShardcatCli *cli, ShardRemote *remote);
int shardcat_index(const ShardcatCli *cli, ShardRemote *remote);

#endif /* SHARD_TOOLS_SHARDCAT_VERIFY_H */
