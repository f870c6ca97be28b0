/* Exact elastic resume, end to end in C (formats/order.md): loaders as DataLoader workers,
 * ranks taking their workers' batches in turn, a cut after some batches a rank, the job's
 * state from a reader that only plans (as libshard.torch.ShardLoader's main process takes
 * it), and the rest of the epoch on another number of ranks, workers and batch size. What
 * was delivered before the cut and after the resume is the uninterrupted epoch's samples,
 * each once (equal mode's repeats aside), with the same augmentation seed each, over many
 * topology pairs, cut points, shuffle buffers, mixing and equal mode; equal mode's ranks
 * get the same number of batches after the resume too. And a partition's samples come in
 * the same order on every topology. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

#include "testjpeg.h"
#include "testshard.h"

static char *dir;
static char *manifest[2];
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
    for (int i = 0; i < 2; i++) {
        free(manifest[i]);
        manifest[i] = NULL;
    }
}
TestSuite(elastic, .init = setup, .fini = teardown, .timeout = 300);

#define NA 150 /* source a: in shards of 13 */
#define NB 40  /* source b: in shards of 7 */

static void grey(int x, int y, int w, int h, int seed, unsigned char rgb[3])
{
    (void)w, (void)h;
    rgb[0] = rgb[1] = rgb[2] = (unsigned char)(seed * 11 + x * 3 + y);
}

static const char *make_source(int which, const char *name, int n, uint64_t per)
{
    TuSet t;
    tu_set_open(&t, dir, name, ".tar", per);
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s%04d", name, i);
        unsigned long size;
        unsigned char *img = tu_jpeg(12, 10, grey, i + which * 1000, &size);
        ShardField f[] = {{"jpg", img, size}};
        tu_set_add(&t, key, f, 1);
        free(img);
    }
    return manifest[which] = tu_set_finish(&t);
}

typedef struct Config {
    int mix;          /* two sources, weights 3 : 1, instead of a's alone */
    ShardMode mode;
    int pad;
    size_t shuffle, streams;
    uint32_t partitions;
    uint64_t epoch_samples; /* per consumer of the topology the epoch begins on */
} Config;

typedef struct Topo {
    int world, workers;
    size_t bs;
} Topo;

typedef struct Got {
    char key[16];
    uint64_t seed;
    int repeat;
} Got;

typedef struct Run {
    Got *v;
    size_t n, cap;
    uint64_t batches[16]; /* per rank */
    uint64_t repeats[16]; /* per rank */
} Run;

static const char *urls_a[1], *urls_b[1];
static ShardMixInput inputs[2];

static void loader_settings(const Config *c, const Topo *t, int rank, int worker,
                            ShardLoaderSettings *s)
{
    shard_loader_default_settings(s);
    ShardReaderSettings *r = &s->reader;
    if (c->mix) {
        inputs[0] = (ShardMixInput){urls_a, 1, 3.0};
        inputs[1] = (ShardMixInput){urls_b, 1, 1.0};
        r->sources = inputs;
        r->nsources = 2;
    } else {
        r->urls = urls_a;
        r->nurls = 1;
    }
    r->seed = 5;
    r->have_seed = 1;
    r->epoch = 2;
    r->mode = c->mode;
    r->pad = c->pad;
    r->shuffle_buffer = c->shuffle;
    r->streams = c->streams;
    r->queue_depth = 4;
    r->partitions = c->partitions;
    r->epoch_samples = c->epoch_samples;
    r->rank = rank;
    r->world_size = t->world;
    r->worker = worker;
    r->num_workers = t->workers;
    s->batch_size = t->bs;
    s->threads = 1;
    s->batches = 2;
    s->label_field = NULL;
    s->raw_fields = "";
    s->transform.width = s->transform.height = 8;
}

static void record(Run *out, const ShardBatch *b)
{
    for (size_t i = 0; i < b->size; i++) {
        if (out->n == out->cap) {
            out->cap = out->cap ? out->cap * 2 : 256;
            out->v = realloc(out->v, out->cap * sizeof *out->v);
        }
        Got *g = &out->v[out->n++];
        snprintf(g->key, sizeof g->key, "%s", b->keys[i]);
        g->seed = b->seeds[i];
        g->repeat = b->repeats[i];
    }
}

/* Runs topology t from state (NULL: the epoch's start) for `batches` batches a rank
 * (UINT64_MAX: to the end), each rank taking its workers' batches in turn from worker 0,
 * an ended worker skipped; records every sample delivered. Returns the job's state after
 * it, as a reader that only plans says it (malloc'd). */
static char *run(const Config *c, const Topo *t, const char *state, uint64_t batches, Run *out)
{
    for (int r = 0; r < t->world; r++) {
        ShardLoader *l[8];
        int ended[8] = {0}, nended = 0;
        for (int w = 0; w < t->workers; w++) {
            ShardLoaderSettings s;
            loader_settings(c, t, r, w, &s);
            ShardError err;
            cr_assert_eq(shard_loader_open(&l[w], &s, &err), 0, "%s", err.message);
            if (state)
                cr_assert_eq(shard_loader_restore(l[w], state), 0, "rank %d worker %d: %s", r,
                             w, shard_loader_error(l[w]));
        }
        uint64_t done = 0;
        for (int w = 0; done < batches && nended < t->workers; w = (w + 1) % t->workers) {
            if (ended[w])
                continue;
            const ShardBatch *b;
            int rc = shard_loader_next(l[w], &b);
            if (rc == SHARD_EOS) {
                ended[w] = 1;
                nended++;
                continue;
            }
            cr_assert_eq(rc, 0, "%s", shard_loader_error(l[w]));
            record(out, b);
            for (size_t i = 0; i < b->size; i++)
                out->repeats[r] += b->repeats[i] != 0;
            shard_batch_release(l[w], b);
            done++;
        }
        out->batches[r] = done;
        for (int w = 0; w < t->workers; w++)
            shard_loader_free(&l[w]);
    }
    /* the state, as the main process of any rank takes it from its count of batches */
    ShardLoaderSettings s;
    loader_settings(c, t, t->world - 1, 0, &s);
    s.reader.batch_size = t->bs;
    ShardReader *planner;
    ShardError err;
    cr_assert_eq(shard_reader_open(&planner, &s.reader, &err), 0, "%s", err.message);
    if (state)
        cr_assert_eq(shard_reader_restore(planner, state), 0, "%s", shard_reader_error(planner));
    char *after = malloc(SHARD_READER_STATE_MAX);
    cr_assert_eq(shard_reader_state_after(planner, batches == UINT64_MAX ? 1u << 30 : batches,
                                          t->bs, 0, 0, after, SHARD_READER_STATE_MAX),
                 0);
    shard_reader_free(&planner);
    return after;
}

static int by_key_seed(const void *a, const void *b)
{
    const Got *x = a, *y = b;
    int k = strcmp(x->key, y->key);
    return k ? k : (x->seed > y->seed) - (x->seed < y->seed);
}

/* The samples that are not repeats, sorted; *n their number. */
static Got *firsts(const Run *r, size_t *n)
{
    Got *v = malloc((r->n ? r->n : 1) * sizeof *v);
    *n = 0;
    for (size_t i = 0; i < r->n; i++)
        if (!r->v[i].repeat)
            v[(*n)++] = r->v[i];
    qsort(v, *n, sizeof *v, by_key_seed);
    return v;
}

static void check_same(const Run *whole, const Run *parts, const char *what)
{
    size_t n, m;
    Got *a = firsts(whole, &n), *b = firsts(parts, &m);
    cr_assert_eq(m, n, "%s: %zu samples delivered, the uninterrupted epoch has %zu", what, m, n);
    for (size_t i = 0; i < n; i++)
        cr_assert(!strcmp(a[i].key, b[i].key) && a[i].seed == b[i].seed,
                  "%s: #%zu is %s (seed %llx), the uninterrupted epoch's %s (seed %llx)", what, i,
                  b[i].key, (unsigned long long)b[i].seed, a[i].key,
                  (unsigned long long)a[i].seed);
    free(a);
    free(b);
}

static uint64_t rng = 99;
static uint64_t below(uint64_t n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (rng >> 33) % n;
}

Test(elastic, every_sample_once_over_topologies_cut_points_and_modes)
{
    urls_a[0] = make_source(0, "a", NA, 13);
    urls_b[0] = make_source(1, "b", NB, 7);
    static const Topo topos[] = {{1, 1, 8}, {4, 2, 5}, {3, 2, 4}, {2, 3, 6}, {8, 1, 3},
                                 {2, 2, 7}, {1, 4, 4}, {6, 1, 5}, {3, 1, 16}, {1, 2, 9},
                                 {8, 4, 2}, {2, 1, 5}};
    /* partitions 0: the default, sized from the data and the topology the epoch begins on,
     * which the others need not fit */
    static const Config configs[] = {
        {0, SHARD_MODE_EXACT, 0, 0, 1, 24, 0},   {0, SHARD_MODE_EXACT, 0, 30, 3, 24, 0},
        {0, SHARD_MODE_EQUAL, 0, 17, 2, 24, 0},  {0, SHARD_MODE_EQUAL, 1, 40, 3, 48, 0},
        {1, SHARD_MODE_EXACT, 0, 25, 2, 24, 0},  {1, SHARD_MODE_EQUAL, 0, 9, 2, 24, 0},
        {1, SHARD_MODE_EQUAL, 1, 60, 2, 24, 0},  {0, SHARD_MODE_EXACT, 0, 200, 4, 48, 0},
        {0, SHARD_MODE_EXACT, 0, 20, 2, 24, 37}, {1, SHARD_MODE_EQUAL, 0, 30, 3, 24, 41},
        {0, SHARD_MODE_EXACT, 0, 20, 2, 0, 0},   {0, SHARD_MODE_EQUAL, 0, 17, 2, 0, 0},
        {1, SHARD_MODE_EQUAL, 0, 9, 2, 0, 0},    {1, SHARD_MODE_EXACT, 0, 25, 2, 0, 0},
        {0, SHARD_MODE_EQUAL, 0, 30, 3, 5, 0},
    };
    const size_t nt = sizeof topos / sizeof *topos, nc = sizeof configs / sizeof *configs;
    int cases = 0;
    for (int round = 0; round < 75; round++) {
        const Config *c = &configs[round % nc];
        const Topo *a = &topos[below(nt)], *b = &topos[below(nt)], *z = &topos[below(nt)];
        if (round == 0) { /* the pairs the issue names */
            a = &topos[0]; /* 1 x 1 -> 4 x 2 */
            b = &topos[1];
        } else if (round == 1) { /* 3 x 2 -> 2 x 3 */
            a = &topos[2];
            b = &topos[3];
        } else if (round == 2) { /* 8 x 1 -> 1 x 1 */
            a = &topos[4];
            b = &topos[0];
        } else if (round % nc >= 10 && round < 2 * (int)nc) { /* the defaults' moves */
            static const int pairs[][2] = {{5, 8}, {5, 10}, {0, 5}, {8, 11}, {11, 1}};
            a = &topos[pairs[round % 5][0]];
            b = &topos[pairs[round % 5][1]];
        }
        Run whole = {0}, parts = {0};
        free(run(c, a, NULL, UINT64_MAX, &whole));
        uint64_t most = 0;
        for (int r = 0; r < a->world; r++)
            most = whole.batches[r] > most ? whole.batches[r] : most;
        /* cut points: before the first batch, after it, anywhere, at the last */
        uint64_t cut = round % 4 == 0 ? 0 : round % 4 == 1 ? 1 : round % 4 == 2 ? below(most + 1) : most - 1;
        char what[160];
        snprintf(what, sizeof what, "config %zu: %dx%d/%zu, %llu batches, then %dx%d/%zu",
                 (size_t)(round % nc), a->world, a->workers, a->bs, (unsigned long long)cut,
                 b->world, b->workers, b->bs);
        char *state = run(c, a, NULL, cut, &parts);
        if (round % 3 == 2) { /* a second resume, elsewhere again */
            uint64_t again = below(4);
            char *next = run(c, b, state, again, &parts);
            free(state);
            state = next;
            b = z;
            snprintf(what + strlen(what), sizeof what - strlen(what), " (%llu), then %dx%d/%zu",
                     (unsigned long long)again, b->world, b->workers, b->bs);
        }
        memset(parts.repeats, 0, sizeof parts.repeats);
        free(run(c, b, state, UINT64_MAX, &parts));
        check_same(&whole, &parts, what);
        uint64_t fewest = UINT64_MAX, most_after = 0;
        for (int r = 0; r < b->world; r++) {
            fewest = parts.batches[r] < fewest ? parts.batches[r] : fewest;
            most_after = parts.batches[r] > most_after ? parts.batches[r] : most_after;
            if (!c->pad) /* equal mode's repeats: fewer than a batch a rank */
                cr_assert_leq(parts.repeats[r], b->bs, "%s: rank %d read %llu repeats", what, r,
                              (unsigned long long)parts.repeats[r]);
        }
        /* after a resume elsewhere: exact mode's ranks a batch apart at most, equal's level */
        int moved = a->world != b->world || a->workers != b->workers || round % 3 == 2;
        if (c->mode == SHARD_MODE_EQUAL || moved)
            cr_assert_leq(most_after - fewest, c->mode == SHARD_MODE_EQUAL ? 0 : 1,
                          "%s: ranks get %llu to %llu batches after the resume", what,
                          (unsigned long long)fewest, (unsigned long long)most_after);
        free(state);
        free(whole.v);
        free(parts.v);
        cases++;
    }
    cr_assert_eq(cases, 75);
}

Test(elastic, the_control_a_resume_that_ignores_the_cut_repeats_samples)
{
    /* The same run restored from the epoch's start instead of the cut: the check above
     * sees the repeats. */
    urls_a[0] = make_source(0, "a", NA, 13);
    Config c = {0, SHARD_MODE_EXACT, 0, 30, 3, 24, 0};
    Topo a = {2, 2, 5}, b = {3, 1, 4};
    Run whole = {0}, parts = {0}, none = {0};
    free(run(&c, &a, NULL, UINT64_MAX, &whole));
    char *start = run(&c, &a, NULL, 0, &none);
    free(run(&c, &a, NULL, 3, &parts));
    free(run(&c, &b, start, UINT64_MAX, &parts));
    size_t n, m;
    Got *x = firsts(&whole, &n), *y = firsts(&parts, &m);
    cr_assert_gt(m, n, "the first 3 batches of each rank come twice");
    free(x);
    free(y);
    free(start);
    free(whole.v);
    free(parts.v);
    free(none.v);
}

/* Every consumer's samples on topology t, consumers in rank-major order: each reads its
 * block's partitions one after the other, and the blocks are contiguous, so this is the
 * partitions' streams one after another; *n their number. */
static void partition_orders(const Config *c, const Topo *t, char (*keys)[16], size_t *n)
{
    size_t at = 0;
    for (int r = 0; r < t->world; r++)
        for (int w = 0; w < t->workers; w++) {
            ShardLoaderSettings s;
            loader_settings(c, t, r, w, &s);
            ShardReader *rd;
            ShardError err;
            cr_assert_eq(shard_reader_open(&rd, &s.reader, &err), 0, "%s", err.message);
            const char *key, *url;
            const ShardFieldView *f;
            size_t nf;
            while (shard_reader_next(rd, &key, &url, &f, &nf) == 0)
                snprintf(keys[at++], 16, "%s", key);
            shard_reader_free(&rd);
        }
    *n = at;
}

Test(elastic, a_partitions_samples_come_in_the_same_order_on_every_topology)
{
    urls_a[0] = make_source(0, "a", NA, 13);
    urls_b[0] = make_source(1, "b", NB, 7);
    for (int mixed = 0; mixed < 2; mixed++) {
        Config c = {mixed, SHARD_MODE_EXACT, 0, 20, 2, 12, 0};
        static const Topo topos[] = {{1, 1, 4}, {2, 2, 4}, {4, 1, 4}, {3, 4, 4}};
        char(*first)[16] = calloc(NA + NB, 16), (*other)[16] = calloc(NA + NB, 16);
        size_t n0, n;
        partition_orders(&c, &topos[0], first, &n0);
        for (size_t i = 1; i < 4; i++) {
            partition_orders(&c, &topos[i], other, &n);
            cr_assert_eq(n, n0);
            for (size_t k = 0; k < n; k++)
                cr_assert_str_eq(other[k], first[k], "mix %d, %dx%d: sample %zu", mixed,
                                 topos[i].world, topos[i].workers, k);
        }
        /* the control: other partitions (their buffers drain elsewhere), another order */
        Config d = c;
        d.partitions = 6;
        partition_orders(&d, &topos[0], other, &n);
        cr_assert_eq(n, n0);
        size_t same = 0;
        for (size_t k = 0; k < n; k++)
            same += !strcmp(other[k], first[k]);
        cr_assert_lt(same, n / 2, "mix %d: 6 partitions read as 12 do", mixed);
        free(first);
        free(other);
    }
}

Test(elastic, states_merge_and_malformed_ones_are_refused)
{
    urls_a[0] = make_source(0, "a", NA, 13);
    Config c = {0, SHARD_MODE_EXACT, 0, 10, 2, 12, 0};
    Topo t = {2, 1, 5};
    ShardLoaderSettings s;
    loader_settings(&c, &t, 1, 0, &s);
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s.reader, &err), 0, "%s", err.message);
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf;
    for (int i = 0; i < 17; i++)
        cr_assert_eq(shard_reader_next(r, &key, &url, &f, &nf), 0);
    char *state = malloc(SHARD_READER_STATE_MAX), *merged = malloc(SHARD_READER_STATE_MAX);
    cr_assert_eq(shard_reader_state(r, state, SHARD_READER_STATE_MAX), 0);
    shard_reader_free(&r);
    const char *same[] = {state, state};
    cr_assert_eq(shard_reader_state_merge(same, 2, merged, SHARD_READER_STATE_MAX, &err), 0,
                 "%s", err.message);
    cr_assert_str_eq(strchr(merged, ';'), strchr(state, ';'));
    const char *bad[] = {"v3:5;0:0", "v3:;", "v3:1:2:;0:d", "v2:0:5:7:x=1", "", "v3:1:2:partitions=x;0:0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *one[] = {bad[i]};
        cr_assert_eq(shard_reader_state_merge(one, 1, merged, SHARD_READER_STATE_MAX, &err),
                     SHARD_ERR_INVALID, "%s", bad[i]);
        cr_assert(err.message[0], "%s: no message", bad[i]);
    }
    free(state);
    free(merged);
}
