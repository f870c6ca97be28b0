/*
 * Stage statistics (stats.h): naming the bottleneck.
 */
#include <stdio.h>

#include "load/stats.h"

static double share(double part, double whole) { return whole > 0 ? part / whole : 0; }

/* The busiest stage for its threads (the caller, "deliver", counts: its busy time is its
 * own work), with the evidence, the stages waiting on it. */
void shard_stats_judge(ShardLoaderStats *o)
{
    ShardStageStats *st = o->stages;
    int b = SHARD_STAGE_FETCH;
    double best = -1;
    for (int i = SHARD_STAGE_FETCH; i < SHARD_STAGES; i++) { /* list ran before them all */
        if (!st[i].threads)
            continue;
        double u = share(st[i].busy_seconds, st[i].seconds);
        if (u > best)
            best = u, b = i;
    }
    o->bottleneck = b;
    int n;
    if (b == SHARD_STAGE_DELIVER)
        n = snprintf(o->verdict, sizeof o->verdict,
                     "deliver: the caller's own work takes %.0f%% of the time, waiting for "
                     "batches %.0f%%: the pipeline keeps up", 100 * best,
                     100 * share(st[b].wait_input_seconds, st[b].seconds));
    else
        n = snprintf(o->verdict, sizeof o->verdict, "%s: busy %.0f%% of %u thread%s",
                     st[b].name, 100 * best, st[b].threads, st[b].threads == 1 ? "" : "s");
    const char *sep = "; ";
    for (int i = SHARD_STAGE_FETCH; i < SHARD_STAGES && n > 0 && (size_t)n < sizeof o->verdict;
         i++) {
        if ((i < SHARD_STAGE_PARSE && b > SHARD_STAGE_PARSE) || !st[i].threads)
            continue; /* the fetch streams wait on later stages as parse: said once */
        double w = i < b ? share(st[i].wait_output_seconds, st[i].seconds)
                 : i > b ? share(st[i].wait_input_seconds, st[i].seconds) : 0;
        if (w < 0.1)
            continue;
        n += snprintf(o->verdict + n, sizeof o->verdict - (size_t)n, "%s%s waits on it %.0f%%",
                      sep, st[i].name, 100 * w);
        sep = ", ";
    }
}

static double at_least_0(double v) { return v < 0 ? 0 : v; }

void shard_stage_clamp(ShardStageStats *s)
{
    s->seconds = at_least_0(s->seconds);
    s->busy_seconds = at_least_0(s->busy_seconds);
    s->wait_input_seconds = at_least_0(s->wait_input_seconds);
    s->wait_output_seconds = at_least_0(s->wait_output_seconds);
}
