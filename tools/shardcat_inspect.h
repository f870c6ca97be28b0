/*
 * shardcat ls, info and cat (shardcat_inspect.c): each returns the exit status.
 */
#ifndef SHARD_TOOLS_SHARDCAT_INSPECT_H
#define SHARD_TOOLS_SHARDCAT_INSPECT_H

#include <shard/shard.h>

#include "shardcat_cli.h"

int shardcat_ls(const ShardcatCli *cli, ShardRemote *remote);
int shardcat_info(const ShardcatCli *cli, ShardRemote *remote);
int shardcat_cat(const ShardcatCli *cli, ShardRemote *remote);

#endif /* SHARD_TOOLS_SHARDCAT_INSPECT_H */
