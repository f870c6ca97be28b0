/*
 * shardcat batch: which samples were in step N, or every step a key is in (shardcat_batch.c).
 */
#ifndef SHARD_TOOLS_SHARDCAT_BATCH_H
#define SHARD_TOOLS_SHARDCAT_BATCH_H

#include <shard/shard.h>

#include "shardcat_cli.h"

/* Runs batch with the job's loader settings (placed: shardcat_placement); the exit status. */
int shardcat_batch(const ShardcatCli *cli, ShardLoaderSettings *loader, ShardRemote *remote);

#endif /* SHARD_TOOLS_SHARDCAT_BATCH_H */
