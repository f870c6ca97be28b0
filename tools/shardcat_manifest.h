/*
 * shardcat manifest (shardcat_manifest.c). Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_MANIFEST_H
#define SHARD_TOOLS_SHARDCAT_MANIFEST_H

#include "shardcat_cli.h"

/* Writes the shards cli->args name (folders and prefixes listed, brace patterns, manifests)
 * as one manifest to cli->output, each counted and as its store names it (the Hub's pinned
 * to a commit). The exit status: 1 when a shard has no count or the manifest is not written. */
int shardcat_manifest(const ShardcatCli *cli, ShardRemote *remote);

#endif /* SHARD_TOOLS_SHARDCAT_MANIFEST_H */
