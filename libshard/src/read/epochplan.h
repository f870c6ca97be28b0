/*
 * The pieces of an epoch plan (epochplan.c) that a mix of sources (mix.c) plans with too.
 * Not installed.
 */
#ifndef SHARD_READ_EPOCHPLAN_H
#define SHARD_READ_EPOCHPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/plan.h"

/* A growing array of segments. */
typedef struct ShardSegList {
    ShardSegment *v;
    size_t n, cap;
} ShardSegList;

/* Appends a segment (nothing for count 0). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_seglist_push(ShardSegList *l, uint32_t shard, uint64_t first,
                                    uint64_t count, uint32_t flags, uint32_t round);

/* The order of n shards for one pass over them: shuffled from (seed, pass, source) when
 * shuffle is set. A single source's pass is its epoch (source 0). malloc'd; NULL. */
SHARD_HIDDEN uint32_t *shard_plan_order(size_t n, uint64_t seed, uint64_t pass, uint64_t source,
                                        int shuffle);

/* Appends the segments covering [a, b) of the sequence of shards order[0..n) whose prefix
 * sums of counts are pre[0..n], shard numbers offset by base, with flags and round. */
SHARD_HIDDEN int shard_plan_cover(ShardSegList *l, const uint32_t *order, const uint64_t *pre,
                                  size_t n, uint64_t a, uint64_t b, uint32_t base, uint32_t flags,
                                  uint32_t round);


/* This consumer's range [a, b) of an epoch's sequence of total samples, by p's rank, worker,
 * mode, pad and worker_align; b passes total where padding wraps around to the start. */
SHARD_HIDDEN void shard_plan_range(uint64_t total, const ShardPlanSettings *p, uint64_t *a,
                                   uint64_t *b);

/* The segments of [a, b) of the epoch's sequence of shards (p's seed, epoch and
 * shuffle_shards; every count known), past its end wrapping around to its start as
 * repeats: a partition's, or equal mode's repeats after a resume. malloc'd into *out.
 * 0, SHARD_ERR_UNSUPPORTED (a count unknown), SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_epoch_plan_range(const uint64_t *counts, size_t n, const ShardPlanSettings *p,
                                        uint64_t a, uint64_t b, ShardSegment **out, size_t *nseg);

/* Whether p names a valid consumer and a planned mode. */
SHARD_HIDDEN int shard_plan_valid(const ShardPlanSettings *p);

#endif /* SHARD_READ_EPOCHPLAN_H */
