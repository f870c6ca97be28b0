/*
 * The decode pool (decodepool.h).
 *
 * DESIGN: the job queue is the pool's only shared state. A putter waiting on a full queue
 * (the loader's producer) is woken once the queue is half empty, so it refills half a
 * queue per wake-up instead of one job per decoded sample. Each decoder keeps its own
 * scratch buffers and libjpeg decompressor from job to job (no allocation per sample once
 * they have grown), and drops buffers over 64 MiB after the sample that grew them. The
 * decodes share a memory gate: each holds what its header says it will take, so threads x
 * the largest image is not what memory must hold. Signals are blocked in the decoders.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/gate.h"
#include "shard/common.h"
#include "base/queue.h"
#include "base/thread.h"
#include "base/trace.h"
#include "decode/transform.h"
#include "decode/scratch.h"
#include "load/decodepool.h"

/* bytes of decode buffers a thread keeps between samples, all together: outside the
 * decode_memory gate, so part of what a thread may hold */
#define SCRATCH_KEEP ((size_t)16 << 20)

struct ShardDecodePool {
    ShardTransform t;
    ShardDecodeDone done;
    void *cookie;
    ShardQueue jobs;
    ShardGate gate, *memory; /* &gate, or NULL without a bound */
    pthread_t *threads;
    int nthreads;
    atomic_ullong decoded;
    _Atomic double busy; /* seconds decoding, all threads */
    atomic_int dropping; /* shard_pool_drop */
    struct ShardTrace *_Atomic trace;
};

static void *decoder_main(void *arg)
{
    pthread_setname_np(pthread_self(), "shard-decode"); /* for top -H, perf and gdb */
    ShardDecodePool *p = arg;
    ShardScratch sc = {0};
    sc.gate = p->memory;
    ShardDecodeJob j;
    while (shard_queue_take(&p->jobs, &j) == 0) {
        if (atomic_load_explicit(&p->dropping, memory_order_relaxed)) {
            p->done(p->cookie, &j, SHARD_ERR_STATE, "dropped: the batch is thrown away");
            continue;
        }
        double t0 = shard_seconds();
        char msg[256] = "";
        ShardTransform t = p->t;
        if (j.width) /* an aspect bucket's */
            t.width = j.width, t.height = j.height;
        int rc = j.data ? shard_decode_transform_with(&sc, j.data, j.size, &t, j.seed, j.out, msg,
                                                      sizeof msg)
                        : SHARD_ERR_NOT_FOUND;
        /* a huge image leaves huge buffers: not kept for the thread's life */
        shard_scratch_trim(&sc, SCRATCH_KEEP);
        shard_scratch_settle(&sc);
        /* counted before done: the batch it completes may be the consumer's last */
        double t1 = shard_seconds();
        shard_trace_span(atomic_load(&p->trace), "decode", t0, t1, 1);
        shard_add_seconds(&p->busy, t1 - t0);
        atomic_fetch_add(&p->decoded, 1);
        p->done(p->cookie, &j, rc, msg);
    }
    shard_scratch_release(&sc);
    return NULL;
}

void shard_pool_drop(ShardDecodePool *p, int on) { atomic_store(&p->dropping, on); }

int shard_pool_open(ShardDecodePool **out, int threads, size_t depth, uint64_t memory,
                    const ShardTransform *t, ShardDecodeDone done, void *cookie)
{
    *out = NULL;
    ShardDecodePool *p = calloc(1, sizeof *p);
    if (!p)
        return SHARD_ERR_NOMEM;
    p->t = *t;
    p->done = done;
    p->cookie = cookie;
    shard_gate_init(&p->gate, memory);
    p->memory = memory ? &p->gate : NULL;
    p->threads = calloc((size_t)(threads > 0 ? threads : 1), sizeof *p->threads);
    if (!p->threads || shard_queue_init(&p->jobs, depth, sizeof(ShardDecodeJob))) {
        free(p->threads);
        shard_gate_destroy(&p->gate);
        free(p);
        return SHARD_ERR_NOMEM;
    }
    shard_queue_set_wake(&p->jobs, depth / 2);
    for (int i = 0; i < threads; i++) {
        if (shard_thread_start(&p->threads[i], decoder_main, p))
            break;
        p->nthreads++;
    }
    if (!p->nthreads) {
        shard_pool_free(&p);
        return SHARD_ERR_NOMEM;
    }
    *out = p;
    return 0;
}

int shard_pool_submit(ShardDecodePool *p, const ShardDecodeJob *job)
{
    return shard_queue_put(&p->jobs, job, job->size);
}

void shard_pool_set_trace(ShardDecodePool *p, struct ShardTrace *trace)
{
    atomic_store(&p->trace, trace);
}

void shard_pool_stats(ShardDecodePool *p, ShardPoolStats *out)
{
    out->decoded = atomic_load(&p->decoded);
    pthread_mutex_lock(&p->gate.lock);
    out->memory_waits = p->gate.waits;
    pthread_mutex_unlock(&p->gate.lock);
    out->busy = atomic_load(&p->busy);
    out->threads = p->nthreads;
    shard_queue_stats(&p->jobs, &out->jobs);
}

void shard_pool_free(ShardDecodePool **pp)
{
    if (!pp || !*pp)
        return;
    ShardDecodePool *p = *pp;
    shard_queue_close(&p->jobs);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    shard_queue_destroy(&p->jobs);
    shard_gate_destroy(&p->gate);
    free(p);
    *pp = NULL;
}
