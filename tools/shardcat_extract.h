/*
 * shardcat extract (shardcat_extract.c): the exit status.
 */
#ifndef SHARD_TOOLS_SHARDCAT_EXTRACT_H
#define SHARD_TOOLS_SHARDCAT_EXTRACT_H

#include <shard/shard.h>

#include "shardcat_cli.h"

int shardcat_extract(const ShardcatCli *cli, ShardRemote *remote);

#endif /* SHARD_TOOLS_SHARDCAT_EXTRACT_H */
