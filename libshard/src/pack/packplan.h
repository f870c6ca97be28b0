/*
 * What the pack plan (packplan.c) tells the scans (scan.c) that fill it.
 */
#ifndef SHARD_PACK_PACKPLAN_H
#define SHARD_PACK_PACKPLAN_H

#include "base/attr.h"
#include "shard/pack.h"
#include "shard/remote.h"
#include "shard/writer.h"

/* The ShardRemote remote inputs are read through (borrowed: the plan's), made for the
 * first of them (a scan's or shard_pack_plan_add's, before the plan is shared); NULL when
 * out of memory (err, SHARD_ERROR_MAX bytes, says so). */
SHARD_HIDDEN ShardRemote *shard_pack_plan_reach(ShardPackPlan *p, char *err);
/* Remote inputs a plan requests at once (ShardPackSettings.inflight, clamped). */
SHARD_HIDDEN unsigned shard_pack_plan_inflight(const ShardPackPlan *p);

/* The packing options as the manifest and the pack's record keep them (JSON), malloc'd;
 * NULL when out of memory. */
SHARD_HIDDEN char *shard_pack_options_json(const ShardPackPlan *p);
/* Number k in a pattern, malloc'd (NULL when out of memory). */
SHARD_HIDDEN char *shard_pack_numbered(const char *pattern, uint64_t k);
/* The writer settings for shard j of the plan: one shard, numbered j, no rotation. */
SHARD_HIDDEN void shard_pack_writer_settings(const ShardPackPlan *p, size_t j,
                                             ShardWriterSettings *w);

#endif /* SHARD_PACK_PACKPLAN_H */
