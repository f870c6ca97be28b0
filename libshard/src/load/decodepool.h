/*
 * The decode pool: `threads` threads that take decode jobs from one bounded queue, decode
 * and transform each image straight into the place the job names (a sample's slot in a
 * batch buffer), and report each job done through a callback, on the decoding thread.
 */
#ifndef SHARD_LOAD_DECODEPOOL_H
#define SHARD_LOAD_DECODEPOOL_H

#include "base/attr.h"
#include "base/queue.h"
#include "shard/decode.h"

typedef struct ShardDecodeJob {
    const void *data; /* the encoded image, NULL when the sample has none */
    size_t size;
    uint64_t seed;    /* its augmentation draws */
    void *out;        /* shard_transform_output_size bytes (of its size, when given) */
    int width, height; /* the output's size; 0: the pool's transform's */
    void *tag;        /* the caller's, passed back (a batch slot) */
    size_t index;     /* the caller's, passed back (the sample's place in it) */
} ShardDecodeJob;

/* Called once per job on the thread that decoded it: rc 0, or the failure and what went
 * wrong (for a job without data, SHARD_ERR_NOT_FOUND and ""). */
typedef void (*ShardDecodeDone)(void *cookie, const ShardDecodeJob *job, int rc, const char *msg);

typedef struct ShardDecodePool ShardDecodePool;

/* Starts threads decoders (at least one must start) on a queue of depth jobs, their
 * decodes holding memory bytes at most together (a decode waits for room; 0: no bound).
 * The transform is copied; done and cookie must outlive the pool. */
SHARD_HIDDEN int shard_pool_open(ShardDecodePool **out, int threads, size_t depth,
                                 uint64_t memory, const ShardTransform *t, ShardDecodeDone done,
                                 void *cookie);
/* Queues a job, waiting while the queue is full; 0, or SHARD_EOS once the pool closes. */
SHARD_HIDDEN int shard_pool_submit(ShardDecodePool *p, const ShardDecodeJob *job);
/* While on, the jobs the decoders take are handed back undecoded (done with SHARD_ERR_STATE,
 * not counted): their batches are being thrown away (a loader stopping). */
SHARD_HIDDEN void shard_pool_drop(ShardDecodePool *p, int on);
/* The pool's counters: jobs decoded, seconds decoding (summed over the threads), the job
 * queue's statistics (its take_wait is the decoders waiting for work), threads. */
typedef struct ShardPoolStats {
    uint64_t decoded;
    uint64_t memory_waits; /* decodes that waited for decode_memory */
    double busy;
    ShardQueueStats jobs;
    int threads;
} ShardPoolStats;
SHARD_HIDDEN void shard_pool_stats(ShardDecodePool *p, ShardPoolStats *out);
/* Spans of the decoders go to trace (borrowed; NULL: none); set before jobs are queued. */
struct ShardTrace;
SHARD_HIDDEN void shard_pool_set_trace(ShardDecodePool *p, struct ShardTrace *trace);
/* Lets the decoders finish the jobs queued, then joins them and frees the pool. */
SHARD_HIDDEN void shard_pool_free(ShardDecodePool **p);

#endif /* SHARD_LOAD_DECODEPOOL_H */
