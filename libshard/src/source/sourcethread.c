/*
 * What the sources one thread reads share (sourcethread.h).
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "remote/lane.h"
#include "source/sourcethread.h"

/* What the sources one thread reads share: for remote ones, the network lane that thread
 * drives (made when the first needs it). */
struct ShardSourceThread {
    _Atomic(ShardNetLane *) lane; /* read by shard_source_thread_abort, from another thread */
    atomic_int aborted;
    atomic_int child; /* the process group of the pipe: command being read, 0: none */
};

ShardSourceThread *shard_source_thread_new(void)
{
    return calloc(1, sizeof(ShardSourceThread));
}

void shard_source_thread_free(ShardSourceThread **pt)
{
    if (!pt || !*pt)
        return;
    shard_lane_put(atomic_load(&(*pt)->lane)); /* its transfers went with their sources */
    free(*pt);
    *pt = NULL;
}

void shard_source_thread_abort(ShardSourceThread *t)
{
    atomic_store(&t->aborted, 1);
    ShardNetLane *lane = atomic_load(&t->lane);
    if (lane)
        shard_lane_abort(lane);
    int child = atomic_load(&t->child);
    if (child > 0)
        kill(-child, SIGTERM); /* its output ends: the read blocked on it returns */
}

int shard_source_thread_child(ShardSourceThread *t, int group)
{
    if (!t)
        return 0;
    if (group > 0) {
        atomic_store(&t->child, group);
        return atomic_load(&t->aborted);
    }
    atomic_store(&t->child, 0);
    return 0;
}

ShardNetLane *shard_source_thread_lane(ShardSourceThread *t)
{
    if (t && !atomic_load(&t->lane)) {
        atomic_store(&t->lane, shard_lane_new());
        if (atomic_load(&t->aborted) && atomic_load(&t->lane)) /* stopped meanwhile */
            shard_lane_abort(atomic_load(&t->lane));
    }
    return t ? atomic_load(&t->lane) : NULL;
}
