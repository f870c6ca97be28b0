/*
 * How many of the JPEGs the GPU decodes (decoder "auto"), by measurement: the CPU threads'
 * rate (images per busy second of one thread, times the threads) and the GPU's (images per
 * second of the upload thread's decode calls) are followed as they run, and the GPU's
 * share is its part of the sum, the split at which both finish a batch together. A sample
 * goes one way or the other by a running remainder over that share, so the split holds
 * within a sample at every batch, and neither the order nor the seeds depend on it.
 * The share is written by the upload thread and read by the loader's producer.
 */
#ifndef SHARD_GPU_SPLIT_H
#define SHARD_GPU_SPLIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/attr.h"

typedef struct ShardSplit {
    _Atomic double share; /* of the GPU-ready JPEGs, to the GPU: 0..1 */
    double cpu_rate, gpu_rate; /* images per second, smoothed; 0: not measured yet */
    double owed;               /* the producer's running remainder */
    int fixed;                 /* 1: the share is set, not measured */
} ShardSplit;

/* share: where it starts (auto), or where it stays (fixed: 0 for "cpu", 1 for "gpu") */
SHARD_HIDDEN void shard_split_init(ShardSplit *s, double share, int fixed);

/* What was measured since the last call: cpu_items decoded in cpu_busy seconds of decode
 * threads' time, with threads of them; gpu_items in gpu_seconds of the GPU path's time. A
 * side with nothing to show keeps its last rate. */
SHARD_HIDDEN void shard_split_observe(ShardSplit *s, double cpu_items, double cpu_busy,
                                      int threads, double gpu_items, double gpu_seconds);

/* For one GPU-ready JPEG: 1 to the GPU, 0 to the CPU threads. The producer's thread only. */
SHARD_HIDDEN int shard_split_take(ShardSplit *s);

SHARD_HIDDEN double shard_split_share(ShardSplit *s);

#endif /* SHARD_GPU_SPLIT_H */
