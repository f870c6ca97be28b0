#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <shard/plan.h>
#include <shard/reader.h>

/* Marks every sample each consumer's plan covers; returns per-rank counts in per_rank. */
static void cover_all(const uint64_t *counts, size_t n, ShardMode mode, int pad, int world,
                      int workers, uint64_t epoch, unsigned *seen, uint64_t *per_rank)
{
    uint64_t *base = malloc((n + 1) * sizeof *base);
    base[0] = 0;
    for (size_t i = 0; i < n; i++)
        base[i + 1] = base[i] + counts[i];
    for (int r = 0; r < world; r++) {
        per_rank[r] = 0;
        for (int w = 0; w < workers; w++) {
            ShardPlanSettings p = {.seed = 42, .epoch = epoch, .rank = r, .world_size = world,
                                   .worker = w, .num_workers = workers, .mode = mode, .pad = pad,
                                   .shuffle_shards = 1, .worker_align = 1};
            ShardSegment *segs;
            size_t nseg;
            cr_assert_eq(shard_epoch_plan(counts, n, &p, &segs, &nseg), 0);
            for (size_t k = 0; k < nseg; k++) {
                cr_assert_lt(segs[k].shard, n);
                cr_assert_leq(segs[k].first + segs[k].count, counts[segs[k].shard]);
                for (uint64_t j = 0; j < segs[k].count; j++)
                    seen[base[segs[k].shard] + segs[k].first + j]++;
                per_rank[r] += segs[k].count;
            }
            free(segs);
        }
    }
    free(base);
}

Test(plan, exact_partitions_every_split)
{
    uint64_t counts[23];
    uint64_t total = 0;
    for (int i = 0; i < 23; i++)
        total += counts[i] = (uint64_t)(i * 7 % 13 + (i == 5 ? 40 : 1)); /* uneven, one big */
    unsigned *seen = calloc(total, sizeof *seen);
    uint64_t per[8];
    for (int world = 1; world <= 5; world++)
        for (int workers = 1; workers <= 3; workers++) {
            memset(seen, 0, total * sizeof *seen);
            cover_all(counts, 23, SHARD_MODE_EXACT, 0, world, workers, 3, seen, per);
            for (uint64_t i = 0; i < total; i++)
                cr_assert_eq(seen[i], 1, "world %d workers %d: sample %llu seen %u times", world,
                             workers, (unsigned long long)i, seen[i]);
            uint64_t lo = per[0], hi = per[0];
            for (int r = 1; r < world; r++) {
                lo = per[r] < lo ? per[r] : lo;
                hi = per[r] > hi ? per[r] : hi;
            }
            cr_assert_leq(hi - lo, 1);
        }
    free(seen);
}

Test(plan, equal_drops_or_pads)
{
    uint64_t counts[] = {10, 3, 7, 1, 9}; /* 30 samples */
    unsigned seen[30];
    uint64_t per[4];
    memset(seen, 0, sizeof seen);
    cover_all(counts, 5, SHARD_MODE_EQUAL, 0, 4, 2, 0, seen, per);
    for (int r = 0; r < 4; r++)
        cr_assert_eq(per[r], 7, "30 / 4 ranks, remainder dropped");
    unsigned total = 0;
    for (int i = 0; i < 30; i++) {
        cr_assert_leq(seen[i], 1);
        total += seen[i];
    }
    cr_assert_eq(total, 28);
    memset(seen, 0, sizeof seen);
    cover_all(counts, 5, SHARD_MODE_EQUAL, 1, 4, 2, 0, seen, per);
    for (int r = 0; r < 4; r++)
        cr_assert_eq(per[r], 8, "padded to ceil(30 / 4)");
    total = 0;
    for (int i = 0; i < 30; i++) {
        cr_assert_geq(seen[i], 1, "padding repeats, never loses");
        total += seen[i];
    }
    cr_assert_eq(total, 32);
}

Test(plan, epochs_reorder_and_unknown_counts_deal_shards)
{
    uint64_t counts[50];
    for (int i = 0; i < 50; i++)
        counts[i] = 4;
    ShardPlanSettings p = {.seed = 9, .epoch = 0, .rank = 0, .world_size = 1, .worker = 0,
                           .num_workers = 1, .mode = SHARD_MODE_EXACT, .pad = 0,
                           .shuffle_shards = 1, .worker_align = 1};
    ShardSegment *a, *b;
    size_t na, nb;
    cr_assert_eq(shard_epoch_plan(counts, 50, &p, &a, &na), 0);
    p.epoch = 1;
    cr_assert_eq(shard_epoch_plan(counts, 50, &p, &b, &nb), 0);
    cr_assert_eq(na, 50);
    int same = 1;
    for (size_t i = 0; i < na; i++)
        same &= a[i].shard == b[i].shard;
    cr_assert(!same, "another epoch, another shard order");
    free(a);
    free(b);
    counts[7] = SHARD_COUNT_UNKNOWN;
    p.mode = SHARD_MODE_EQUAL;
    cr_assert_eq(shard_epoch_plan(counts, 50, &p, &a, &na), SHARD_ERR_UNSUPPORTED);
    p.mode = SHARD_MODE_EXACT;
    p.world_size = 3;
    p.rank = 2;
    cr_assert_eq(shard_epoch_plan(counts, 50, &p, &a, &na), 0);
    cr_assert_eq(na, 16, "shards 2, 5, ... 47 of the shuffled order");
    for (size_t i = 0; i < na; i++)
        cr_assert_eq(a[i].count, SHARD_COUNT_UNKNOWN);
    free(a);
    p.rank = 3;
    cr_assert_eq(shard_epoch_plan(counts, 50, &p, &a, &na), SHARD_ERR_INVALID);
}

Test(plan, workers_split_in_whole_batches)
{
    uint64_t counts[] = {100, 37, 200, 13}; /* 350 */
    uint64_t got[3];
    for (int w = 0; w < 3; w++) {
        ShardPlanSettings p = {.seed = 1, .epoch = 0, .rank = 0, .world_size = 1, .worker = w,
                               .num_workers = 3, .mode = SHARD_MODE_EXACT, .pad = 0,
                               .shuffle_shards = 1, .worker_align = 64};
        ShardSegment *segs;
        size_t n;
        cr_assert_eq(shard_epoch_plan(counts, 4, &p, &segs, &n), 0);
        got[w] = 0;
        for (size_t k = 0; k < n; k++)
            got[w] += segs[k].count;
        free(segs);
    }
    /* 6 batches of 64 (the last of 30): 2 + 2 + 2 */
    cr_assert_eq(got[0], 128);
    cr_assert_eq(got[1], 128);
    cr_assert_eq(got[2], 94);
}

/* Equal mode with pad: the samples a rank gets past the end of the epoch's sequence come in
 * segments flagged as repeats, and only those: without them every sample is seen once. */
Test(plan, padding_is_flagged_as_repeats)
{
    uint64_t counts[] = {40, 40, 40, 40, 40, 40, 40, 20}; /* 300 over 7 ranks: 43 each */
    unsigned seen[300] = {0};
    uint64_t repeats = 0;
    for (int r = 0; r < 7; r++) {
        ShardPlanSettings p = {.seed = 1, .rank = r, .world_size = 7, .worker = 0,
                               .num_workers = 1, .mode = SHARD_MODE_EQUAL, .pad = 1,
                               .shuffle_shards = 1, .worker_align = 1};
        ShardSegment *segs;
        size_t nseg;
        cr_assert_eq(shard_epoch_plan(counts, 8, &p, &segs, &nseg), 0);
        uint64_t mine = 0;
        for (size_t k = 0; k < nseg; k++) {
            mine += segs[k].count;
            if (segs[k].flags & SHARD_SEGMENT_REPEAT) {
                repeats += segs[k].count;
                continue;
            }
            for (uint64_t j = 0; j < segs[k].count; j++)
                seen[segs[k].shard * 40 + segs[k].first + j]++;
        }
        cr_assert_eq(mine, 43, "rank %d", r);
        free(segs);
    }
    cr_assert_eq(repeats, 1);
    for (int i = 0; i < 300; i++)
        cr_assert_eq(seen[i], 1, "sample %d seen %u times", i, seen[i]);
}
