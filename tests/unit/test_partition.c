/* Canonical partitions (libshard/src/resume/cut.h): ranges and blocks that cover
 * everything once, the checks' messages, the runs' text both ways, and a partition's plan
 * as its slice of the epoch's sequence. The cut a resume goes on from: test_cut.c. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resume/resume.h"
#include "read/epochplan.h"
#include "shard/plan.h"
#include "shard/common.h"

TestSuite(partition, .timeout = 60);

Test(partition, ranges_and_blocks_cover_everything_once)
{
    for (uint32_t p = 1; p <= 40; p++) {
        uint64_t total = 1000 + p * 7, next = 0;
        for (uint32_t i = 0; i < p; i++) {
            uint64_t a, b;
            shard_partition_range(total, p, i, &a, &b);
            cr_assert_eq(a, next);
            cr_assert(b - a == total / p || b - a == total / p + 1);
            next = b;
        }
        cr_assert_eq(next, total);
        for (int world = 1; world <= 5; world++)
            for (int workers = 1; workers <= 3; workers++) {
                uint32_t want = 0;
                for (int r = 0; r < world; r++)
                    for (int w = 0; w < workers; w++) {
                        uint32_t lo, hi;
                        shard_partition_block(p, world, workers, r, w, &lo, &hi);
                        cr_assert_eq(lo, want, "p %u, %d x %d: rank %d worker %d", p, world,
                                     workers, r, w);
                        want = hi;
                    }
                cr_assert_eq(want, p);
            }
    }
    cr_assert_eq(shard_partition_total(1003, 10, SHARD_MODE_EXACT, 0), 1003);
    cr_assert_eq(shard_partition_total(1003, 10, SHARD_MODE_EQUAL, 0), 1000);
    cr_assert_eq(shard_partition_total(1003, 10, SHARD_MODE_EQUAL, 1), 1010);
}

Test(partition, checks_name_what_does_not_fit_and_a_value_that_does)
{
    char msg[SHARD_ERROR_MAX];
    cr_assert_eq(shard_partition_check(2880, 64, 8, SHARD_MODE_EQUAL, msg), 0);
    cr_assert_eq(shard_partition_check(2880, 128, 1, SHARD_MODE_EQUAL, msg), SHARD_ERR_INVALID);
    cr_assert(strstr(msg, "partitions=2880 do not divide among world_size=128 ranks") &&
                  strstr(msg, "such as 5760"),
              "%s", msg);
    cr_assert_eq(shard_partition_check(2880, 128, 1, SHARD_MODE_EXACT, msg), 0, "%s", msg);
    cr_assert_eq(shard_partition_check(12, 4, 4, SHARD_MODE_EQUAL, msg), SHARD_ERR_INVALID);
    cr_assert(strstr(msg, "leave 3 to a rank, fewer than its num_workers=4"), "%s", msg);
    cr_assert_eq(shard_partition_check(0, 1, 1, SHARD_MODE_EXACT, msg), SHARD_ERR_INVALID);
    /* whole partitions where they fit; the rest is spread (test_cut.c) */
    cr_assert(shard_partition_whole(12, 3, 4, SHARD_MODE_EQUAL));
    cr_assert(!shard_partition_whole(4, 3, 1, SHARD_MODE_EQUAL), "3 ranks do not divide 4");
    cr_assert(shard_partition_whole(4, 3, 1, SHARD_MODE_EXACT), "exact: a partition apart");
    cr_assert(!shard_partition_whole(4, 8, 4, SHARD_MODE_EXACT), "32 consumers, 4 partitions");
}

Test(partition, the_runs_read_back_as_written_and_bad_ones_are_named)
{
    uint64_t len[9] = {5, 5, 5, 0, 5, 5, 5, 5, 5};
    uint64_t pos[9] = {5, 5, 2, 0, 0, 0, 5, 3, 0}, back[9];
    char text[256], msg[SHARD_ERROR_MAX];
    cr_assert_eq(shard_runs_format(pos, len, 9, text, sizeof text), 0);
    cr_assert_str_eq(text, "0-1:d,2:2,3:d,4-5:0,6:d,7:3,8:0");
    cr_assert_eq(shard_runs_parse(text, len, 9, back, msg), 0, "%s", msg);
    cr_assert_arr_eq(back, pos, sizeof pos);
    cr_assert_eq(shard_runs_format(pos, len, 9, text, 12), SHARD_ERR_INVALID, "too small");
    const char *bad[] = {"0-1:d,2:2", "0-1:d,3:2,3:d,4-8:0", "0-8:x", "0-8:d,", "0:7,1-8:0",
                         "0-1:d,2:2,3:d,4-5:0,6:d,7:3,8:0,9:0", "", "0-8:d;"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        msg[0] = 0;
        cr_assert_eq(shard_runs_parse(bad[i], len, 9, back, msg), SHARD_ERR_INVALID, "%s", bad[i]);
        cr_assert(msg[0], "%s: no message", bad[i]);
    }
    cr_assert_eq(shard_runs_parse("0:7,1-8:0", len, 9, back, msg), SHARD_ERR_INVALID);
    cr_assert(strstr(msg, "delivers 7 samples of partition 0, which has 5"), "%s", msg);
}

/* The samples (as data-set indexes) of a plan, in order; *n their number. */
static uint64_t *flatten(const uint64_t *counts, size_t nshards, const ShardPlanSettings *p,
                         size_t *n, unsigned char *repeat)
{
    uint64_t base[32] = {0};
    for (size_t i = 0; i < nshards; i++)
        base[i + 1] = base[i] + counts[i];
    ShardSegment *segs;
    size_t nseg;
    cr_assert_eq(shard_epoch_plan(counts, nshards, p, &segs, &nseg), 0);
    uint64_t *out = malloc((2 * base[nshards] + 1) * sizeof *out);
    *n = 0;
    for (size_t k = 0; k < nseg; k++)
        for (uint64_t j = 0; j < segs[k].count; j++) {
            if (repeat)
                repeat[*n] = (segs[k].flags & SHARD_SEGMENT_REPEAT) != 0;
            out[(*n)++] = base[segs[k].shard] + segs[k].first + j;
        }
    free(segs);
    return out;
}

Test(partition, a_partitions_plan_is_its_slice_of_the_epochs_sequence)
{
    /* What formats/order.md 3.1 and 3.2 rest on: the plan of partition p's range is p's
     * slice of the epoch's sequence (the shards in the epoch's order), in every mode, the
     * samples past its end repeats of its start. */
    uint64_t counts[17];
    for (int i = 0; i < 17; i++)
        counts[i] = (uint64_t)(i * 5 % 11 + 1);
    ShardPlanSettings all;
    shard_plan_default_settings(&all);
    all.seed = 9;
    all.epoch = 2;
    all.shuffle_shards = 1;
    size_t t;
    uint64_t *seq = flatten(counts, 17, &all, &t, NULL);
    static const struct { ShardMode mode; int pad; } modes[] = {
        {SHARD_MODE_EXACT, 0}, {SHARD_MODE_EQUAL, 0}, {SHARD_MODE_EQUAL, 1}};
    uint64_t base[18] = {0};
    for (size_t i = 0; i < 17; i++)
        base[i + 1] = base[i] + counts[i];
    for (size_t m = 0; m < 3; m++)
        for (uint32_t np = 1; np <= 13; np++) {
            uint64_t total = shard_partition_total(t, np, modes[m].mode, modes[m].pad);
            for (uint32_t i = 0; i < np; i++) {
                uint64_t a, b;
                shard_partition_range(total, np, i, &a, &b);
                ShardSegment *segs;
                size_t nseg, n = 0;
                cr_assert_eq(shard_epoch_plan_range(counts, 17, &all, a, b, &segs, &nseg), 0);
                for (size_t k = 0; k < nseg; k++)
                    for (uint64_t j = 0; j < segs[k].count; j++, n++) {
                        cr_assert_eq(base[segs[k].shard] + segs[k].first + j, seq[(a + n) % t],
                                     "mode %zu, P %u, partition %u, #%zu", m, np, i, n);
                        cr_assert_eq((segs[k].flags & SHARD_SEGMENT_REPEAT) != 0, a + n >= t);
                    }
                cr_assert_eq(n, b - a, "mode %zu, %u partitions: partition %u", m, np, i);
                free(segs);
            }
        }
    free(seq);
}

Test(partition, runs_of_partitions_of_one_length_differ_by_at_most_a_sample)
{
    /* The longer partitions spread evenly: every rank's (and worker's) block of an exact
     * epoch is within a sample of every other's, whatever the world size dividing P. */
    for (uint64_t total = 1000; total < 1100; total += 7)
        for (uint32_t p = 12; p <= 48; p += 12)
            for (int world = 1; world <= 12; world++) {
                if (p % (uint32_t)world)
                    continue;
                uint64_t lo = UINT64_MAX, hi = 0;
                for (int r = 0; r < world; r++) {
                    uint32_t x, y;
                    shard_partition_block(p, world, 1, r, 0, &x, &y);
                    uint64_t a, b, z;
                    shard_partition_range(total, p, x, &a, &z);
                    shard_partition_range(total, p, y - 1, &z, &b);
                    lo = b - a < lo ? b - a : lo;
                    hi = b - a > hi ? b - a : hi;
                }
                cr_assert_leq(hi - lo, 1, "%llu samples, %u partitions, %d ranks: %llu to %llu",
                              (unsigned long long)total, p, world, (unsigned long long)lo,
                              (unsigned long long)hi);
            }
    /* the control: the longer partitions first, as a plain split puts them */
    uint64_t a, b, rank0 = 0, rank2 = 0;
    for (uint32_t i = 0; i < 4; i++) {
        shard_plan_split(1003, 12, i, &a, &b);
        rank0 += b - a;
        shard_plan_split(1003, 12, 8 + i, &a, &b);
        rank2 += b - a;
    }
    cr_assert_eq(rank0 - rank2, 4, "1003 in 12, 3 ranks: 336 against 332");
}
