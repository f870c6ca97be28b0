/* The cut (libshard/src/resume/cut.h): what is left of an epoch and which consumer reads it.
 * The properties the elastic resume rests on, with the deliveries simulated sample by sample
 * apart from the arithmetic under test: a cut computed from one rank's count of batches,
 * taken on W x K consumers and continued on any W' x K' (and again on W'' x K''), delivers
 * every sample of the epoch exactly once; after a resume elsewhere the ranks are at most a
 * batch apart, and equal mode's repeats are fewer than a batch per rank. Controls show the
 * simulation sees a wrong cut. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resume/resume.h"
#include "shard/common.h"

TestSuite(cut, .timeout = 120);

Test(cut, spans_and_edges_read_back_as_written_and_bad_ones_are_named)
{
    ShardCut c, back;
    char text[256], msg[SHARD_ERROR_MAX];
    cr_assert_eq(shard_cut_init(&c, 100), 0);
    cr_assert_eq(shard_cut_blocks(&c, 4, 2, 2), 0);
    uint64_t took[4] = {3, 0, 25, 7};
    cr_assert_eq(shard_cut_take(&c, took), 0);
    cr_assert_eq(shard_cut_format(&c, text, sizeof text), 0);
    cr_assert_str_eq(text, "left=3-50,82-100;edges=25,50,75");
    cr_assert_eq(shard_cut_parse(&back, text, 100, 2, 2, msg), 0, "%s", msg);
    cr_assert_eq(back.n, 2);
    cr_assert_arr_eq(back.edge, c.edge, 5 * sizeof *c.edge);
    cr_assert_eq(shard_cut_rest(&back, 2), 0, "consumer 2 delivered its all");
    cr_assert_eq(shard_cut_rest(&back, 3), 18);
    cr_assert_eq(shard_cut_format(&c, text, 20), SHARD_ERR_INVALID, "too small");
    shard_cut_free(&back);
    const char *bad[] = {"left=3-25,57-100;edges=25,50", "left=3-25,20-100;edges=25,50,75",
                         "left=3-125;edges=25,50,75", "left=5-5;edges=25,50,75",
                         "left=3-25;edges=50,25,75", "0:d", "", "left=3-25", "left=x;edges=1,2,3",
                         "left=3-25;edges=25,50,75,"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        msg[0] = 0;
        cr_assert_eq(shard_cut_parse(&back, bad[i], 100, 2, 2, msg), SHARD_ERR_INVALID, "%s",
                     bad[i]);
        cr_assert(msg[0], "%s: no message", bad[i]);
    }
    cr_assert_eq(shard_cut_parse(&back, "left=3-125;edges=25,50,75", 100, 2, 2, msg),
                 SHARD_ERR_INVALID);
    cr_assert(strstr(msg, "past the epoch's 100 samples"), "%s", msg);
    shard_cut_free(&c);
}

Test(cut, a_consumers_pieces_are_what_is_left_of_its_region_cut_at_partitions)
{
    ShardCut c;
    cr_assert_eq(shard_cut_init(&c, 100), 0); /* 4 partitions of 25 */
    cr_assert_eq(shard_cut_blocks(&c, 4, 1, 1), 0);
    uint64_t took = 10;
    cr_assert_eq(shard_cut_take(&c, &took), 0);
    cr_assert_eq(shard_cut_spread(&c, 3, 1), 0); /* 90 left: 30 each */
    cr_assert_eq(c.edge[1], 40);
    cr_assert_eq(c.edge[2], 70);
    ShardPiece *pc;
    size_t n;
    cr_assert_eq(shard_cut_pieces(&c, 1, 4, &pc, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert(pc[0].p == 1 && pc[0].from == 15 && pc[0].to == 25, "%u %llu %llu", pc[0].p,
              (unsigned long long)pc[0].from, (unsigned long long)pc[0].to);
    cr_assert(pc[1].p == 2 && pc[1].from == 0 && pc[1].to == 20);
    free(pc);
    shard_cut_free(&c);
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

/* Runs topology t for `batches` batches a rank (UINT64_MAX: to the end), as the regions of
 * cut c and the samples not yet seen say (the simulation's own account, not the cut's
 * spans), marking each sample it delivers in seen[]; a worker's stream is the unseen
 * samples of its region in order, then pads[k] repeats; a rank takes its workers' batches
 * in turn from worker 0, an ended one giving none. Each rank's batches into got[rank]. */
static void deliver(const Topo *t, const ShardCut *c, const uint64_t *pads, uint64_t batches,
                    unsigned *seen, uint64_t *got)
{
    unsigned char *was = malloc(c->length + 1);
    for (uint64_t g = 0; g < c->length; g++)
        was[g] = seen[g] != 0;
    for (int r = 0; r < t->world; r++) {
        uint64_t *at = calloc((size_t)t->workers, sizeof *at), *padded = calloc((size_t)t->workers, sizeof *at);
        for (int w = 0; w < t->workers; w++)
            at[w] = c->edge[r * t->workers + w];
        uint64_t done = 0;
        for (int w = 0, ended = 0; done < batches && ended < t->workers; w = (w + 1) % t->workers) {
            size_t k = (size_t)(r * t->workers + w);
            uint64_t n = 0;
            while (n < t->batch) { /* the next sample of w's stream */
                while (at[w] < c->edge[k + 1] && was[at[w]])
                    at[w]++;
                if (at[w] < c->edge[k + 1]) {
                    seen[at[w]++]++;
                    n++;
                } else if (pads && padded[w] < pads[k]) {
                    padded[w]++;
                    n++;
                } else {
                    break;
                }
            }
            if (n) {
                done++;
                ended = 0;
            } else {
                ended++;
            }
        }
        got[r] = done;
        free(at);
        free(padded);
    }
    free(was);
}

/* The cut's spans are exactly the samples not seen. */
static void check_left(const ShardCut *c, const unsigned *seen, const char *what)
{
    uint64_t left = 0;
    for (uint64_t g = 0; g < c->length; g++) {
        uint64_t in = shard_cut_left_in(c, g, g + 1);
        cr_assert_eq(in, seen[g] == 0, "%s: sample %llu: seen %u, left %llu", what,
                     (unsigned long long)g, seen[g], (unsigned long long)in);
        left += in;
    }
    cr_assert_eq(left, shard_cut_left_in(c, 0, c->length));
}

/* One run on t from cut c (its regions the last run's topology's): c's regions kept where t
 * is that topology, else spread over t; `batches` a rank delivered and c advanced. The
 * ranks' batches are checked: within one in exact mode where spread, equal with the repeats
 * (fewer than a batch per rank) in equal mode. */
static void run(ShardCut *c, const Topo *t, int equal, uint64_t batches, unsigned *seen,
                const char *what)
{
    int spread = c->world != t->world || c->workers != t->workers;
    if (spread)
        cr_assert_eq(shard_cut_spread(c, t->world, t->workers), 0);
    size_t nc = (size_t)t->world * (size_t)t->workers;
    uint64_t *pads = calloc(nc, sizeof *pads), *got = calloc((size_t)t->world, sizeof *got);
    if (equal)
        shard_cut_pads(c, t->batch, 0, pads);
    uint64_t most = 0, least = UINT64_MAX;
    for (int r = 0; r < t->world; r++) {
        uint64_t b = shard_cut_rank_batches(c, r, t->batch, 0, equal ? pads : NULL), p = 0;
        most = b > most ? b : most;
        least = b < least ? b : least;
        for (int w = 0; w < t->workers; w++)
            p += pads[r * t->workers + w];
        cr_assert_leq(p, t->batch, "%s: rank %d pads %llu, more than a batch", what, r,
                      (unsigned long long)p);
    }
    if (spread || equal) /* whole partitions in exact mode: a partition apart */
        cr_assert_leq(most - least, equal ? 0 : 1, "%s: ranks have %llu to %llu batches", what,
                      (unsigned long long)least, (unsigned long long)most);
    deliver(t, c, pads, batches, seen, got);
    for (int r = 0; r < t->world && batches == UINT64_MAX; r++)
        cr_assert_eq(got[r], shard_cut_rank_batches(c, r, t->batch, 0, equal ? pads : NULL),
                     "%s: rank %d's batches", what, r);
    cr_assert_eq(shard_cut_advance(c, t->batch, 0, batches == UINT64_MAX ? most : batches, 0,
                                   pads),
                 0);
    check_left(c, seen, what);
    free(pads);
    free(got);
}

static const Topo TOPOS[] = {{1, 1, 4}, {2, 2, 3}, {3, 1, 5}, {2, 1, 4}, {4, 2, 2}, {8, 4, 3},
                             {3, 2, 5}, {6, 1, 3}, {1, 4, 6}, {16, 4, 1}};
#define NTOPOS (sizeof TOPOS / sizeof *TOPOS)

Test(cut, a_cut_from_one_ranks_count_resumes_exactly_on_any_topology)
{
    rng_state = 7;
    for (int round = 0; round < 120; round++) {
        uint32_t parts = 1 + (uint32_t)below(48);
        uint64_t length = parts * 2 + below(600);
        int equal = round % 2;
        if (equal) /* every partition the same length */
            length -= length % parts;
        const Topo *a = &TOPOS[below(NTOPOS)], *b = &TOPOS[below(NTOPOS)],
                   *z = &TOPOS[below(NTOPOS)];
        if (round % 5 == 0)
            b = a; /* on the topology it was taken on */
        ShardCut c;
        cr_assert_eq(shard_cut_init(&c, length), 0);
        if (shard_partition_whole(parts, a->world, a->workers,
                                  equal ? SHARD_MODE_EQUAL : SHARD_MODE_EXACT))
            cr_assert_eq(shard_cut_blocks(&c, parts, a->world, a->workers), 0);
        unsigned *seen = calloc(length, sizeof *seen);
        char what[160];
        snprintf(what, sizeof what, "round %d, %s, %llu samples in %u: %dx%d -> %dx%d -> %dx%d",
                 round, equal ? "equal" : "exact", (unsigned long long)length, parts, a->world,
                 a->workers, b->world, b->workers, z->world, z->workers);
        run(&c, a, equal, below(40), seen, what);
        run(&c, b, equal, below(15), seen, what);
        run(&c, z, equal, UINT64_MAX, seen, what);
        for (uint64_t g = 0; g < length; g++)
            cr_assert_eq(seen[g], 1, "%s: sample %llu delivered %u times", what,
                         (unsigned long long)g, seen[g]);
        cr_assert_eq(shard_cut_left_in(&c, 0, length), 0);
        free(seen);
        shard_cut_free(&c);
    }
}

Test(cut, the_control_a_resume_that_spreads_the_whole_epoch_repeats_samples)
{
    ShardCut c, whole;
    unsigned *seen = calloc(1000, sizeof *seen);
    uint64_t got[2];
    cr_assert_eq(shard_cut_init(&c, 1000), 0);
    cr_assert_eq(shard_cut_blocks(&c, 4, 2, 2), 0);
    deliver(&TOPOS[1], &c, NULL, 10, seen, got);
    cr_assert_eq(shard_cut_advance(&c, 3, 0, 10, 0, NULL), 0);
    check_left(&c, seen, "2x2, 10 batches");
    cr_assert_eq(shard_cut_init(&whole, 1000), 0); /* the cut forgotten */
    cr_assert_eq(shard_cut_spread(&whole, 3, 1), 0);
    unsigned *again = calloc(1000, sizeof *again);
    uint64_t got3[3];
    deliver(&TOPOS[2], &whole, NULL, UINT64_MAX, again, got3);
    int repeated = 0;
    for (uint64_t g = 0; g < 1000; g++)
        repeated += seen[g] + again[g] > 1;
    cr_assert_eq(repeated, 60, "2 ranks x 10 batches of 3 delivered twice");
    free(seen);
    free(again);
    shard_cut_free(&c);
    shard_cut_free(&whole);
}

Test(cut, the_control_a_cut_that_ignores_the_workers_turns_loses_samples)
{
    /* Counting every worker as if it delivered the rank's batches / K, rounded down, instead
     * of following the DataLoader's turns: 5 batches over 3 workers are 2, 2 and 1. */
    ShardCut c, naive;
    cr_assert_eq(shard_cut_init(&c, 120), 0);
    cr_assert_eq(shard_cut_blocks(&c, 12, 2, 3), 0);
    cr_assert_eq(shard_cut_copy(&naive, &c), 0);
    cr_assert_eq(shard_cut_advance(&c, 4, 0, 5, 0, NULL), 0);
    uint64_t took[6];
    for (int k = 0; k < 6; k++)
        took[k] = 5 / 3 * 4;
    cr_assert_eq(shard_cut_take(&naive, took), 0);
    cr_assert_eq(shard_cut_left_in(&c, 0, 120), 120 - 2 * 5 * 4, "every rank's 5 of 4");
    cr_assert_neq(shard_cut_left_in(&naive, 0, 120), shard_cut_left_in(&c, 0, 120));
    shard_cut_free(&c);
    shard_cut_free(&naive);
}

Test(cut, after_a_resume_elsewhere_exact_ranks_are_a_batch_apart_and_equal_ones_pad_less_than_one)
{
    /* The report's case: 8,000 samples in 4 partitions on 2 x 2, 30 batches of 32 a rank,
     * then 3 x 1. Whole partitions would leave 54, 69 and 69 batches (or 504 repeats). */
    ShardCut c;
    cr_assert_eq(shard_cut_init(&c, 8000), 0);
    cr_assert_eq(shard_cut_blocks(&c, 4, 2, 2), 0);
    cr_assert_eq(shard_cut_advance(&c, 32, 0, 30, 0, NULL), 0);
    cr_assert_eq(shard_cut_left_in(&c, 0, 8000), 8000 - 2 * 30 * 32);
    cr_assert_eq(shard_cut_spread(&c, 3, 1), 0);
    uint64_t b[3], pads[3];
    for (int r = 0; r < 3; r++)
        b[r] = shard_cut_rank_batches(&c, r, 32, 0, NULL);
    cr_assert(b[0] == 64 && b[1] == 64 && b[2] == 64, "%llu %llu %llu",
              (unsigned long long)b[0], (unsigned long long)b[1], (unsigned long long)b[2]);
    shard_cut_pads(&c, 32, 0, pads);
    cr_assert(!pads[0] && !pads[1] && !pads[2], "6080 samples: 2027, 2027, 2026: 64 each");
    shard_cut_free(&c);
    /* 2001, 2000 and 2000 in batches of 40: 51, 50 and 50; a repeat each makes 51 */
    cr_assert_eq(shard_cut_init(&c, 6001), 0);
    cr_assert_eq(shard_cut_spread(&c, 3, 1), 0);
    shard_cut_pads(&c, 40, 0, pads);
    cr_assert(pads[0] == 0 && pads[1] == 1 && pads[2] == 1, "%llu %llu %llu",
              (unsigned long long)pads[0], (unsigned long long)pads[1], (unsigned long long)pads[2]);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(shard_cut_rank_batches(&c, r, 40, 0, pads), 51);
    shard_cut_pads(&c, 40, 1, pads); /* drop_last: 50 each already */
    cr_assert(!pads[0] && !pads[1] && !pads[2]);
    shard_cut_free(&c);
}
