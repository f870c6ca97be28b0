/*
 * shardcat subset (shardcat_subset.c). Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_SUBSET_H
#define SHARD_TOOLS_SHARDCAT_SUBSET_H

#include "shardcat_cli.h"

/* Writes the samples of cli->args whose keys cli->keys lists as a new set: shards by the
 * pattern cli->output (cli->shard_samples a shard, 0: 10,000), each with its index and
 * columns, and the set's manifest beside them. The exit status: 1 when something could not
 * be read or written, 2 when the set's manifest is there already. */
int shardcat_subset(const ShardcatCli *cli, ShardRemote *remote);

#endif /* SHARD_TOOLS_SHARDCAT_SUBSET_H */
