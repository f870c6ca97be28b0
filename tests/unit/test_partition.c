/* Canonical partitions and the cut (libshard/src/read/partition.h): ranges and blocks that
 * cover everything once, the checks' messages, the cut's text both ways, and the property the
 * elastic resume rests on: a cut computed from one rank's count of batches, taken on W x K
 * consumers and continued on W' x K' (and again on W'' x K''), delivers every sample of the
 * epoch exactly once. The deliveries are simulated sample by sample, apart from the
 * arithmetic under test. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/partition.h"
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
}

Test(partition, the_cut_reads_back_as_written_and_bad_ones_are_named)
{
    uint64_t len[9] = {5, 5, 5, 0, 5, 5, 5, 5, 5};
    uint64_t pos[9] = {5, 5, 2, 0, 0, 0, 5, 3, 0}, back[9];
    char text[256], msg[SHARD_ERROR_MAX];
    cr_assert_eq(shard_cut_format(pos, len, 9, text, sizeof text), 0);
    cr_assert_str_eq(text, "0-1:d,2:2,3:d,4-5:0,6:d,7:3,8:0");
    cr_assert_eq(shard_cut_parse(text, len, 9, back, msg), 0, "%s", msg);
    cr_assert_arr_eq(back, pos, sizeof pos);
    cr_assert_eq(shard_cut_format(pos, len, 9, text, 12), SHARD_ERR_INVALID, "too small");
    const char *bad[] = {"0-1:d,2:2", "0-1:d,3:2,3:d,4-8:0", "0-8:x", "0-8:d,", "0:7,1-8:0",
                         "0-1:d,2:2,3:d,4-5:0,6:d,7:3,8:0,9:0", "", "0-8:d;"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        msg[0] = 0;
        cr_assert_eq(shard_cut_parse(bad[i], len, 9, back, msg), SHARD_ERR_INVALID, "%s", bad[i]);
        cr_assert(msg[0], "%s: no message", bad[i]);
    }
    cr_assert_eq(shard_cut_parse("0:7,1-8:0", len, 9, back, msg), SHARD_ERR_INVALID);
    cr_assert(strstr(msg, "delivers 7 samples of partition 0, which has 5"), "%s", msg);
}

/* ---- exactly once over topologies, simulated sample by sample ---------------------------- */

typedef struct Topo {
    int world, workers;
    uint64_t batch;
} Topo;

static uint64_t rng_state;

static uint64_t below(uint64_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (rng_state >> 33) % n;
}

/* Runs topology t from pos0 for `batches` batches a rank (UINT64_MAX: to the end), marking
 * each sample delivered in seen[p][j]; the workers' streams are their blocks' partitions from
 * pos0 on; a rank takes workers' batches in turn from worker 0, skipping ended ones. */
static void deliver(const Topo *t, uint32_t p, const uint64_t *len, const uint64_t *pos0,
                    uint64_t batches, unsigned **seen)
{
    for (int r = 0; r < t->world; r++) {
        uint32_t *at = calloc((size_t)t->workers, sizeof *at); /* partition each is in */
        uint64_t *off = calloc((size_t)t->workers, sizeof *off);
        uint32_t *hi = calloc((size_t)t->workers, sizeof *hi);
        for (int w = 0; w < t->workers; w++) {
            shard_partition_block(p, t->world, t->workers, r, w, &at[w], &hi[w]);
            off[w] = at[w] < hi[w] ? pos0[at[w]] : 0;
        }
        uint64_t done = 0;
        for (int w = 0, ended = 0; done < batches && ended < t->workers; w = (w + 1) % t->workers) {
            uint64_t got = 0;
            while (got < t->batch && at[w] < hi[w]) { /* the next sample of w's stream */
                if (off[w] >= len[at[w]]) {
                    if (++at[w] < hi[w])
                        off[w] = pos0[at[w]];
                    continue;
                }
                seen[at[w]][off[w]++]++;
                got++;
            }
            if (got) {
                done++;
                ended = 0;
            } else {
                ended++; /* a DataLoader drops the ended worker; here: one turn of none ends it */
            }
        }
        free(at);
        free(off);
        free(hi);
    }
}

static void check_once(uint32_t p, const uint64_t *len, unsigned **seen, const char *what)
{
    for (uint32_t i = 0; i < p; i++)
        for (uint64_t j = 0; j < len[i]; j++)
            cr_assert_eq(seen[i][j], 1, "%s: partition %u sample %llu delivered %u times", what,
                         i, (unsigned long long)j, seen[i][j]);
}

Test(partition, a_cut_from_one_ranks_count_resumes_exactly_on_other_topologies)
{
    static const Topo topos[] = {{1, 1, 4}, {4, 2, 3}, {3, 2, 5}, {2, 3, 4}, {8, 1, 2},
                                 {2, 2, 7}, {3, 1, 1}, {1, 4, 6}, {6, 1, 3}};
    const size_t nt = sizeof topos / sizeof *topos;
    uint32_t p = 48;
    uint64_t len[48], pos[48], cut[48];
    unsigned *seen[48];
    rng_state = 7;
    int cases = 0;
    for (int round = 0; round < 40; round++) {
        for (uint32_t i = 0; i < p; i++) {
            len[i] = 5 + below(30);
            seen[i] = calloc(len[i], sizeof **seen);
        }
        const Topo *a = &topos[below(nt)], *b = &topos[below(nt)], *c = &topos[below(nt)];
        memset(pos, 0, sizeof pos);
        /* first run: cut after some batches a rank (0: the first batch not yet out) */
        uint64_t ba = below(60);
        deliver(a, p, len, pos, ba, seen);
        cr_assert_eq(shard_cut_advance(pos, len, p, a->world, a->workers, a->batch, 0, ba, 0, NULL), 0);
        /* what the cut says is what was delivered: a prefix of every partition */
        for (uint32_t i = 0; i < p; i++)
            for (uint64_t j = 0; j < len[i]; j++)
                cr_assert_eq(seen[i][j], j < pos[i], "%d x %d, %llu batches: partition %u "
                             "sample %llu", a->world, a->workers, (unsigned long long)ba, i,
                             (unsigned long long)j);
        char text[4096], msg[SHARD_ERROR_MAX];
        cr_assert_eq(shard_cut_format(pos, len, p, text, sizeof text), 0);
        cr_assert_eq(shard_cut_parse(text, len, p, cut, msg), 0, "%s", msg);
        cr_assert_arr_eq(cut, pos, sizeof pos);
        /* second run, elsewhere, cut again; a third finishes the epoch */
        uint64_t bb = below(20);
        deliver(b, p, len, cut, bb, seen);
        cr_assert_eq(shard_cut_advance(cut, len, p, b->world, b->workers, b->batch, 0, bb, 0, NULL), 0);
        deliver(c, p, len, cut, UINT64_MAX, seen);
        char what[128];
        snprintf(what, sizeof what, "%dx%d (%llu) -> %dx%d (%llu) -> %dx%d", a->world,
                 a->workers, (unsigned long long)ba, b->world, b->workers,
                 (unsigned long long)bb, c->world, c->workers);
        check_once(p, len, seen, what);
        for (uint32_t i = 0; i < p; i++)
            free(seen[i]);
        cases++;
    }
    cr_assert_eq(cases, 40);
}

Test(partition, the_control_a_cut_that_ignores_the_workers_turns_loses_samples)
{
    /* Counting every worker as if it delivered the rank's batches / K, rounded down, instead
     * of following the DataLoader's turns: the check above sees the difference. */
    uint32_t p = 12;
    uint64_t len[12], pos[12] = {0}, naive[12] = {0};
    for (uint32_t i = 0; i < p; i++)
        len[i] = 10;
    Topo t = {2, 3, 4};
    cr_assert_eq(shard_cut_advance(pos, len, p, t.world, t.workers, t.batch, 0, 5, 0, NULL), 0);
    for (int r = 0; r < t.world; r++)
        for (int w = 0; w < t.workers; w++) {
            uint32_t lo, hi;
            shard_partition_block(p, t.world, t.workers, r, w, &lo, &hi);
            naive[lo] += 5 / 3 * t.batch;
        }
    cr_assert(memcmp(pos, naive, sizeof pos) != 0, "5 batches over 3 workers: 2, 2, 1");
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p; i++)
        sum += pos[i];
    cr_assert_eq(sum, 2 * 5 * 4, "every rank's 5 batches of 4, and no more");
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
