/*
 * The hook through which a later stage takes samples to decode (defer.h).
 */
#include <pthread.h>
#include <stdlib.h>

#include "load/decodepool.h"
#include "load/defer.h"
#include "load/loaderdef.h"
#include "load/producer.h"
#include "shard/reader.h"

void shard_loader_defer(ShardLoader *l, const ShardDefer *d)
{
    pthread_mutex_lock(&l->defer_lock);
    l->defer_take = d ? d->take : NULL;
    l->defer_ctx = d ? d->ctx : NULL;
    pthread_mutex_unlock(&l->defer_lock);
}

void shard_loader_defer_from_here(ShardLoader *l, const ShardDefer *d)
{
    char *state = malloc(SHARD_READER_STATE_MAX);
    int have = state && shard_loader_state(l, state, SHARD_READER_STATE_MAX) >= 0;
    if (have)
        shard_loader_stop_producer(l);
    shard_loader_defer(l, d);
    if (have)
        shard_loader_restore(l, state);
    free(state);
}

const ShardTransform *shard_loader_transform(const ShardLoader *l) { return &l->s.transform; }

void shard_loader_decode_work(const ShardLoader *l, int *threads, uint64_t *items, double *busy)
{
    ShardPoolStats ps;
    shard_pool_stats(l->pool, &ps);
    *threads = ps.threads;
    *items = ps.decoded;
    *busy = ps.busy;
}
