/*
 * The loader's stage statistics (shard/loader.h: shard_loader_stats, shard_loader_reader_
 * stats): every stage's time taken from its threads and the queues around it, and the
 * bottleneck named (stats.h).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/clock.h"
#include "base/queue.h"
#include "load/decodepool.h"
#include "load/loaderdef.h"
#include "load/stats.h"
#include "read/fetch.h"
#include "read/streamreader.h"
#include "shard/loader.h"

void shard_loader_reader_stats(const ShardLoader *cl, ShardReaderStats *out)
{
    ShardLoader *l = (ShardLoader *)cl;
    pthread_mutex_lock(&l->at_end_lock);
    int ahead = l->have_at_end && l->at_end_epoch == l->epoch && atomic_load(&l->ahead);
    if (ahead)
        *out = l->at_end;
    pthread_mutex_unlock(&l->at_end_lock);
    if (!ahead)
        shard_reader_stats(l->reader, out);
}

void shard_loader_stats(const ShardLoader *cl, ShardLoaderStats *o)
{
    ShardLoader *l = (ShardLoader *)cl;
    memset(o, 0, sizeof *o);
    double now = shard_seconds(), wall = now - l->opened;
    o->wall_seconds = wall;
    ShardFetchCounters fc;
    shard_reader_fetch_counters(l->reader, &fc);
    ShardReaderStats rs;
    shard_reader_stats(l->reader, &rs);
    ShardPoolStats ps;
    shard_pool_stats(l->pool, &ps);
    ShardQueueStats free_q, ready_q;
    shard_queue_stats(&l->free_q, &free_q);
    shard_queue_stats(&l->ready_q, &ready_q);
    double start = atomic_load(&l->producer_start);
    double producer = atomic_load(&l->producer_time) + (start > 0 ? now - start : 0);
    double reader = atomic_load(&l->reader_time);

    /* Every stage's time is its threads x the loader's life, so shares compare: a thread
     * not running (a fetch stream between shards or epochs, the producer between epochs)
     * waits for input; the shuffle, pulled on the producer's thread, waits for its output
     * while the producer does batch work; the fetch streams' inline stages wait on each
     * other while one of them works. */
    ShardStageStats *st = o->stages;
    double fwall = (double)fc.threads * wall, idle = fwall - fc.alive;
    double parse = fc.alive - fc.put_wait - fc.read - fc.unpack;
    unsigned streams = (unsigned)fc.threads;
    st[SHARD_STAGE_LIST] = (ShardStageStats){"list", 1, rs.shards, 0, rs.list_seconds,
                                             rs.list_seconds, 0, 0, 0, 0};
    o->indexes_built = rs.indexes_built;
    o->decode_memory_waits = ps.memory_waits;
    o->indexes_cached = rs.indexes_cached;
    st[SHARD_STAGE_FETCH] = (ShardStageStats){"fetch", streams, fc.items, fc.read_bytes, fwall,
                                              fc.read, idle, fc.alive - fc.read, 0, 0};
    st[SHARD_STAGE_DECOMPRESS] = (ShardStageStats){
        "decompress", streams, fc.items, fc.unpack_bytes, fwall, fc.unpack, idle + fc.read,
        fc.alive - fc.read - fc.unpack, 0, 0};
    st[SHARD_STAGE_PARSE] = (ShardStageStats){"parse", streams, fc.items, fc.bytes, fwall, parse,
                                              idle + fc.read + fc.unpack, fc.put_wait, fc.fill,
                                              fc.capacity};
    st[SHARD_STAGE_SHUFFLE] = (ShardStageStats){"shuffle", 1, rs.samples, rs.bytes, wall,
                                                reader - rs.wait_seconds, rs.wait_seconds,
                                                wall - reader, 0, 0};
    double batch_out = free_q.take_wait + ps.jobs.put_wait;
    st[SHARD_STAGE_BATCH] = (ShardStageStats){"batch", 1, ps.jobs.items, ps.jobs.bytes, wall,
                                              producer - reader - batch_out,
                                              reader + (wall - producer), batch_out,
                                              ps.jobs.fill, ps.jobs.capacity};
    st[SHARD_STAGE_DECODE] = (ShardStageStats){"decode", (unsigned)ps.threads, ps.decoded,
                                               ps.decoded * l->spec.image_bytes,
                                               ps.threads * wall, ps.busy,
                                               ps.threads * wall - ps.busy, 0, ready_q.fill,
                                               ready_q.capacity};
    st[SHARD_STAGE_UPLOAD] = (ShardStageStats){"upload", 0, 0, 0, 0, 0, 0, 0, 0, 0};
    uint64_t d = atomic_load(&l->delivered);
    st[SHARD_STAGE_DELIVER] = (ShardStageStats){"deliver", 1, d, atomic_load(&l->delivered_bytes),
                                                wall, wall - ready_q.take_wait,
                                                ready_q.take_wait, 0,
                                                l->nslots - atomic_load(&l->held), l->nslots};
    for (int i = 0; i < SHARD_STAGES; i++)
        for (double *v = &st[i].busy_seconds; v <= &st[i].wait_output_seconds; v++)
            if (*v < 0) /* clock readings a moment apart */
                *v = 0;
    shard_stats_judge(o);
}
