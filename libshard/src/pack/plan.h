/*
 * What the pack plan (plan.c) tells the scans (scan.c) that fill it.
 */
#ifndef SHARD_PACK_PLAN_H
#define SHARD_PACK_PLAN_H

#include "base/attr.h"
#include "shard/pack.h"
#include "shard/remote.h"

/* The ShardRemote a plan reads remote inputs through, made when first needed; NULL when
 * out of memory (err, SHARD_ERROR_MAX bytes, says so). Thread-safe. */
SHARD_HIDDEN ShardRemote *shard_pack_plan_remote(ShardPackPlan *p, char *err);
/* Remote inputs a plan requests at once (ShardPackSettings.inflight, clamped). */
SHARD_HIDDEN unsigned shard_pack_plan_inflight(const ShardPackPlan *p);

#endif /* SHARD_PACK_PLAN_H */
