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

size_t shard_loader_buckets(const ShardLoader *l, int *heights, int *widths, uint64_t *samples,
                            size_t n)
{
    if (heights || widths)
        shard_reader_buckets(l->reader, heights, widths, n);
    for (size_t i = 0; samples && i < n && i < l->nbuckets; i++)
        samples[i] = atomic_load(&l->bucket_samples[i]);
    return l->nbuckets;
}

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
    st[SHARD_STAGE_LIST] = (ShardStageStats){
        .name = "list", .threads = 1, .items = rs.shards, .seconds = rs.list_seconds,
        .busy_seconds = rs.list_seconds};
    o->indexes_built = rs.indexes_built;
    o->decode_memory_waits = ps.memory_waits;
    o->indexes_cached = rs.indexes_cached;
    st[SHARD_STAGE_FETCH] = (ShardStageStats){
        .name = "fetch", .threads = streams, .items = fc.items, .bytes = fc.read_bytes,
        .seconds = fwall, .busy_seconds = fc.read, .wait_input_seconds = idle,
        .wait_output_seconds = fc.alive - fc.read};
    st[SHARD_STAGE_DECOMPRESS] = (ShardStageStats){
        .name = "decompress", .threads = streams, .items = fc.items, .bytes = fc.unpack_bytes,
        .seconds = fwall, .busy_seconds = fc.unpack, .wait_input_seconds = idle + fc.read,
        .wait_output_seconds = fc.alive - fc.read - fc.unpack};
    st[SHARD_STAGE_PARSE] = (ShardStageStats){
        .name = "parse", .threads = streams, .items = fc.items, .bytes = fc.bytes,
        .seconds = fwall, .busy_seconds = parse, .wait_input_seconds = idle + fc.read + fc.unpack,
        .wait_output_seconds = fc.put_wait, .queue_fill = fc.fill, .queue_capacity = fc.capacity};
    st[SHARD_STAGE_SHUFFLE] = (ShardStageStats){
        .name = "shuffle", .threads = 1, .items = rs.samples, .bytes = rs.bytes, .seconds = wall,
        .busy_seconds = reader - rs.wait_seconds, .wait_input_seconds = rs.wait_seconds,
        .wait_output_seconds = wall - reader};
    double batch_out = free_q.take_wait + ps.jobs.put_wait;
    st[SHARD_STAGE_BATCH] = (ShardStageStats){
        .name = "batch", .threads = 1, .items = ps.jobs.items, .bytes = ps.jobs.bytes,
        .seconds = wall, .busy_seconds = producer - reader - batch_out,
        .wait_input_seconds = reader + (wall - producer), .wait_output_seconds = batch_out,
        .queue_fill = ps.jobs.fill, .queue_capacity = ps.jobs.capacity};
    st[SHARD_STAGE_DECODE] = (ShardStageStats){
        .name = "decode", .threads = (unsigned)ps.threads, .items = ps.decoded,
        .bytes = ps.decoded * l->spec.image_bytes, .seconds = ps.threads * wall,
        .busy_seconds = ps.busy, .wait_input_seconds = ps.threads * wall - ps.busy,
        .queue_fill = ready_q.fill, .queue_capacity = ready_q.capacity};
    st[SHARD_STAGE_UPLOAD] = (ShardStageStats){.name = "upload"}; /* not in this pipeline */
    uint64_t d = atomic_load(&l->delivered);
    st[SHARD_STAGE_DELIVER] = (ShardStageStats){
        .name = "deliver", .threads = 1, .items = d, .bytes = atomic_load(&l->delivered_bytes),
        .seconds = wall, .busy_seconds = wall - ready_q.take_wait,
        .wait_input_seconds = ready_q.take_wait,
        .queue_fill = l->nslots - atomic_load(&l->held), .queue_capacity = l->nslots};
    for (int i = 0; i < SHARD_STAGES; i++) /* clock readings a moment apart */
        shard_stage_clamp(&st[i]);
    shard_stats_judge(o);
}
