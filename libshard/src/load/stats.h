/*
 * Stage statistics (ShardLoaderStats, shard/loader.h): the loader fills its stages, the
 * uploader (gpu/uploader.c) adds its own between decode and the caller, and either names the
 * bottleneck here.
 */
#ifndef SHARD_LOAD_STATS_H
#define SHARD_LOAD_STATS_H

#include "base/attr.h"
#include "shard/loader.h"

/* Sets o->bottleneck and o->verdict from o->stages: the stage busiest for its threads
 * (list, which runs before the others, and stages with no threads left out), with the
 * stages that wait on it. */
SHARD_HIDDEN void shard_stats_judge(ShardLoaderStats *o);

#endif /* SHARD_LOAD_STATS_H */
