/*
 * The measured split (split.h).
 */
#include "gpu/split.h"

/* How fast a rate follows its measurements: a new one weighs this much. Enough to follow a
 * change of speed within a few batches, little enough that one noisy batch moves the share
 * by a few percent. */
#define FOLLOW 0.25

void shard_split_init(ShardSplit *s, double share, int fixed)
{
    atomic_init(&s->share, share < 0 ? 0 : share > 1 ? 1 : share);
    s->cpu_rate = s->gpu_rate = 0;
    s->owed = 0;
    s->fixed = fixed;
}

static double follow(double old, double now) { return old > 0 ? old + FOLLOW * (now - old) : now; }

void shard_split_observe(ShardSplit *s, double cpu_items, double cpu_busy, int threads,
                         double gpu_items, double gpu_seconds)
{
    if (s->fixed)
        return;
    if (cpu_items > 0 && cpu_busy > 0 && threads > 0)
        s->cpu_rate = follow(s->cpu_rate, cpu_items / cpu_busy * threads);
    if (gpu_items > 0 && gpu_seconds > 0)
        s->gpu_rate = follow(s->gpu_rate, gpu_items / gpu_seconds);
    double share = atomic_load(&s->share);
    if (s->cpu_rate > 0 && s->gpu_rate > 0)
        share = s->gpu_rate / (s->cpu_rate + s->gpu_rate);
    atomic_store(&s->share, share);
}

int shard_split_take(ShardSplit *s)
{
    double share = atomic_load(&s->share);
    if (share >= 1)
        return 1;
    if (share <= 0)
        return 0;
    s->owed += share;
    if (s->owed >= 1) {
        s->owed -= 1;
        return 1;
    }
    return 0;
}

double shard_split_share(ShardSplit *s) { return atomic_load(&s->share); }
