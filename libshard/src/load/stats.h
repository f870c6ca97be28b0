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

/* A stage's times made at least 0: each is a difference of clock readings taken a moment
 * apart, which can come out a hair below. */
SHARD_HIDDEN void shard_stage_clamp(ShardStageStats *s);

#endif /* SHARD_LOAD_STATS_H */
