/*
 * shardcat show (shardcat_show.c): a picture of what the loader delivers. Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_SHOW_H
#define SHARD_TOOLS_SHARDCAT_SHOW_H

#include <shard/shard.h>

#include "shardcat_cli.h"

/* Draws the loader's first batch (loader's settings, over remote; cli->state restored
 * first) as a PNG grid into cli->output: each tile the image as the batch holds it, its
 * key and label under it. @return the exit status: 0, or 1 after saying what failed */
int shardcat_show(const ShardcatCli *cli, ShardLoaderSettings *loader, ShardRemote *remote);

/* shardcat_show's drawing, the loader restored to state (NULL: none) instead of cli's:
 * shardcat batch --show draws a step's batch so. */
int shardcat_show_from(const ShardcatCli *cli, ShardLoaderSettings *loader, ShardRemote *remote,
                       const char *state);

#endif /* SHARD_TOOLS_SHARDCAT_SHOW_H */
