/*
 * libshard — epoch plans: which runs of which shards make a consumer's part of an epoch.
 *
 * A plan is a pure function of the sample counts and the settings (seed, epoch, rank and
 * world size, worker and worker count, mode), so every consumer of a distributed job
 * computes its own part of the same plan without talking to the others. The epoch's
 * sequence (the shards in the epoch's shuffled order) is the streaming reader's too; the
 * reader (reader.h) cuts it into canonical partitions that consumers take whole
 * (formats/order.md), where this plan splits it directly by rank and worker, a contiguous
 * range each. Tools and tests can inspect a plan directly.
 */
#ifndef SHARD_PLAN_H
#define SHARD_PLAN_H

#include "common.h"
#include "reader.h" /* ShardMode */

#ifdef __cplusplus
extern "C" {
#endif

/** A run of consecutive samples of one shard, as an epoch plan lists them. */
typedef struct ShardSegment {
    uint32_t shard;  /**< index into the shard list */
    uint32_t flags;  /**< SHARD_SEGMENT_REPEAT: padding (equal mode, pad) repeating samples
                          from the start of the epoch's sequence */
    uint64_t first;  /**< first sample */
    uint64_t count;  /**< samples, SHARD_COUNT_UNKNOWN for "to the end of the shard" */
    /** Which reading of these samples in the epoch it is, 0 for the first: a small source
     *  mixed with a large weight is read more than once, and so is padding. With the shard
     *  and the sample's index it names one occurrence of a sample in the epoch, whatever
     *  the consumer that reads it: the augmentation's draws follow it. */
    uint32_t round;
} ShardSegment;

enum { SHARD_SEGMENT_REPEAT = 1 };

/** The inputs of an epoch plan (shard_epoch_plan). */
typedef struct ShardPlanSettings {
    uint64_t seed, epoch;
    int rank, world_size, worker, num_workers;
    ShardMode mode; /**< EXACT or EQUAL (resampled epochs are drawn, not planned) */
    int pad;
    int shuffle_shards;
    uint64_t worker_align; /**< as in ShardReaderSettings; 0 or 1 for none */
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[32];
} ShardPlanSettings;

/** Fills p with the defaults: seed 0, epoch 0, rank 0 of 1, worker 0 of 1, exact mode, no
 *  padding, shards shuffled, no worker alignment. */
SHARD_API void shard_plan_default_settings(ShardPlanSettings *p);

/**
 * Plans one consumer's epoch: the segments of shards it reads, in order. Pure: every
 * consumer computes its own part of the same plan.
 * @param counts samples per shard (SHARD_COUNT_UNKNOWN allowed in exact mode only: then
 *        whole shards are dealt round-robin); borrowed
 * @param out receives a malloc'd array of *nseg segments, owned by the caller (free)
 * @return 0, SHARD_ERR_INVALID (bad rank/worker) or SHARD_ERR_UNSUPPORTED (equal mode
 *         without counts)
 */
SHARD_API int shard_epoch_plan(const uint64_t *counts, size_t nshards, const ShardPlanSettings *p,
                               ShardSegment **out, size_t *nseg);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_PLAN_H */
