/*
 * shardcat stream (shardcat_stream.c): the exit status. reader is shardcat_parse's,
 * completed here (urls, sources, remote).
 */
#ifndef SHARD_TOOLS_SHARDCAT_STREAM_H
#define SHARD_TOOLS_SHARDCAT_STREAM_H

#include <shard/shard.h>

#include "shardcat_cli.h"

int shardcat_stream(const ShardcatCli *cli, ShardReaderSettings *reader, ShardRemote *remote);

#endif /* SHARD_TOOLS_SHARDCAT_STREAM_H */
