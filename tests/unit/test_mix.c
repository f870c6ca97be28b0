/* Weighted mixing of sources in the reader: exact proportions per epoch, a small source
 * repeated evenly and a large one read in turn, the interleave, consumers that partition the
 * mix in exact and equal modes, determinism, resume, and the errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shard/shard.h>

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
TestSuite(mix, .init = setup, .fini = teardown, .timeout = 120);

#define NA 300 /* samples of source a, in shards of 23 */
#define NB 60  /* of source b, in shards of 7 */

/* Bytes of each sample's text when set: its key, then padding. */
static size_t pad;

/* n samples keyed NAME%05d in shards of per, with a manifest NAME.json; returns its path. */
static const char *make_source(int which, const char *name, int n, uint64_t per)
{
    TuSet t;
    tu_set_open(&t, dir, name, ".tar", per);
    char *txt = calloc(pad + 32, 1);
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s%05d", name, i);
        size_t len = strlen(key);
        memcpy(txt, key, len);
        for (; len < pad; len++)
            txt[len] = (char)('a' + (len * 7 + (size_t)i) % 26);
        ShardField f[] = {{"txt", txt, len}};
        tu_set_add(&t, key, f, 1);
    }
    free(txt);
    return manifest[which] = tu_set_finish(&t);
}

static const char *urls_a[1], *urls_b[1];
static ShardMixInput inputs[2];

/* Sources a (NA samples, weight wa) and b (NB samples, weight wb). */
static void mix_settings(ShardReaderSettings *s, double wa, double wb)
{
    urls_a[0] = make_source(0, "a", NA, 23);
    urls_b[0] = make_source(1, "b", NB, 7);
    inputs[0] = (ShardMixInput){urls_a, 1, wa};
    inputs[1] = (ShardMixInput){urls_b, 1, wb};
    shard_reader_default_settings(s);
    s->sources = inputs;
    s->nsources = 2;
    s->seed = 11;
    s->have_seed = 1;
    s->rank = 0;
    s->world_size = 1;
    s->streams = 3;
    s->queue_depth = 4;
}

/* A sample as a number: a's i is i, b's i is NA + i. */
static int sample_id(const char *key) { return (key[0] == 'a' ? 0 : NA) + atoi(key + 1); }

/* The consumer's epoch e as sample ids; returns how many (at most cap). */
static size_t read_epoch(const ShardReaderSettings *s, uint64_t e, int *ids, size_t cap)
{
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, s, &err), 0, "%s", err.message);
    if (e)
        cr_assert_eq(shard_reader_set_epoch(r, e), 0);
    size_t n = 0;
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf;
    int rc;
    while ((rc = shard_reader_next(r, &key, &url, &f, &nf)) == 0) {
        cr_assert_lt(n, cap);
        cr_assert(strstr(url, key[0] == 'a' ? "/a-" : "/b-"), "%s comes from %s", key, url);
        ids[n++] = sample_id(key);
    }
    cr_assert_eq(rc, SHARD_EOS, "%s", shard_reader_error(r));
    cr_assert_eq(shard_reader_epoch_length(r), (int64_t)n);
    shard_reader_free(&r);
    return n;
}

Test(mix, every_epoch_has_the_weights_share_of_each_source)
{
    ShardReaderSettings s;
    mix_settings(&s, 0.7, 0.3);
    int ids[1000], seen[NA + NB] = {0};
    for (uint64_t e = 0; e < 5; e++) {
        size_t n = read_epoch(&s, e, ids, 1000);
        cr_assert_eq(n, NA + NB, "the sources' sizes summed");
        int from_b = 0, this_epoch[NA + NB] = {0};
        for (size_t i = 0; i < n; i++) {
            from_b += ids[i] >= NA;
            this_epoch[ids[i]]++;
            seen[ids[i]]++;
        }
        cr_assert_eq(from_b, 108, "0.3 of 360, exactly");
        /* b is smaller than its share: every b sample once or twice */
        for (int i = NA; i < NA + NB; i++)
            cr_assert(this_epoch[i] == 1 || this_epoch[i] == 2, "b%d %d times in epoch %d", i - NA,
                      this_epoch[i], (int)e);
        /* a is larger: a subset, no repeats */
        for (int i = 0; i < NA; i++)
            cr_assert_leq(this_epoch[i], 1);
    }
    /* Over 5 epochs a gave 5 x 252 = 1260 = 4.2 passes, b 540 = 9 passes: each sample as
     * often as any other, to within one. */
    for (int i = 0; i < NA; i++)
        cr_assert(seen[i] == 4 || seen[i] == 5, "a%d seen %d times", i, seen[i]);
    for (int i = NA; i < NA + NB; i++)
        cr_assert_eq(seen[i], 9, "b%d seen %d times", i - NA, seen[i]);
}

Test(mix, the_sources_are_spread_through_the_epoch)
{
    ShardReaderSettings s;
    mix_settings(&s, 0.5, 0.5);
    s.epoch_samples = 400;
    int ids[1000];
    size_t n = read_epoch(&s, 0, ids, 1000);
    cr_assert_eq(n, 400);
    /* Without a shuffle buffer the order is the interleave's: every prefix holds b in its
     * proportion to within two samples, yet the order is not a plain alternation. */
    int from_b = 0, alternations = 0;
    for (size_t i = 0; i < n; i++) {
        from_b += ids[i] >= NA;
        double want = (double)(i + 1) / 2;
        cr_assert(from_b >= want - 2 && from_b <= want + 2, "%d of b in the first %zu", from_b,
                  i + 1);
        alternations += i && ((ids[i] >= NA) != (ids[i - 1] >= NA));
    }
    cr_assert_eq(from_b, 200);
    cr_assert(alternations > 120 && alternations < 330, "%d changes of source", alternations);
}

Test(mix, the_same_seed_and_epoch_give_the_same_sequence)
{
    ShardReaderSettings s;
    mix_settings(&s, 0.6, 0.4);
    s.shuffle_buffer = 50;
    int x[1000], y[1000], z[1000];
    size_t n = read_epoch(&s, 2, x, 1000);
    cr_assert_eq(read_epoch(&s, 2, y, 1000), n);
    cr_assert_arr_eq(x, y, n * sizeof *x);
    cr_assert_eq(read_epoch(&s, 3, z, 1000), n);
    cr_assert(memcmp(x, z, n * sizeof *x) != 0, "another epoch, another sequence");
    s.seed = 12;
    cr_assert_eq(read_epoch(&s, 2, z, 1000), n);
    cr_assert(memcmp(x, z, n * sizeof *x) != 0, "another seed, another sequence");
}

/* The multiset of an epoch's samples over all consumers equals that of one consumer. */
static void check_partition(ShardReaderSettings *s, int world, int workers, int equal)
{
    int whole[NA + NB] = {0}, parts[NA + NB] = {0}, ids[1000];
    ShardReaderSettings one = *s;
    size_t n = read_epoch(&one, 1, ids, 1000);
    for (size_t i = 0; i < n; i++)
        whole[ids[i]]++;
    size_t total = 0, first = 0;
    for (int rank = 0; rank < world; rank++) {
        size_t rank_total = 0;
        for (int w = 0; w < workers; w++) {
            ShardReaderSettings c = *s;
            c.rank = rank;
            c.world_size = world;
            c.worker = w;
            c.num_workers = workers;
            c.mode = equal ? SHARD_MODE_EQUAL : SHARD_MODE_EXACT;
            size_t m = read_epoch(&c, 1, ids, 1000);
            for (size_t i = 0; i < m; i++)
                parts[ids[i]]++;
            rank_total += m;
        }
        if (rank == 0)
            first = rank_total;
        if (equal)
            cr_assert_eq(rank_total, first, "equal mode: rank %d has %zu, rank 0 %zu", rank,
                         rank_total, first);
        else
            cr_assert(rank_total + 1 >= first && rank_total <= first + 1);
        total += rank_total;
    }
    if (equal) {
        cr_assert_eq(total, n / (size_t)world * (size_t)world);
    } else {
        cr_assert_eq(total, n);
        cr_assert_arr_eq(whole, parts, sizeof whole, "the consumers partition the mix");
    }
}

Test(mix, ranks_and_workers_partition_the_mix)
{
    ShardReaderSettings s;
    mix_settings(&s, 0.25, 0.75);
    check_partition(&s, 2, 3, 0);
    check_partition(&s, 3, 2, 0);
    check_partition(&s, 4, 1, 1);
}

Test(mix, a_restored_reader_continues_the_mix)
{
    ShardReaderSettings s;
    mix_settings(&s, 0.7, 0.3);
    s.shuffle_buffer = 40;
    s.rank = 1;
    s.world_size = 2;
    int all[1000];
    size_t n = read_epoch(&s, 3, all, 1000);
    size_t cuts[] = {0, 1, 57, 140, n - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        ShardReader *r, *q;
        ShardError err;
        cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
        cr_assert_eq(shard_reader_set_epoch(r, 3), 0);
        const char *key, *url;
        const ShardFieldView *f;
        size_t nf;
        for (size_t i = 0; i < cuts[c]; i++)
            cr_assert_eq(shard_reader_next(r, &key, &url, &f, &nf), 0);
        char state[SHARD_READER_STATE_MAX];
        cr_assert_eq(shard_reader_state(r, state, sizeof state), 0);
        shard_reader_free(&r);
        cr_assert_eq(shard_reader_open(&q, &s, &err), 0, "%s", err.message);
        cr_assert_eq(shard_reader_restore(q, state), 0, "%s", shard_reader_error(q));
        size_t i = cuts[c];
        while (shard_reader_next(q, &key, &url, &f, &nf) == 0) {
            cr_assert_lt(i, n);
            cr_assert_eq(sample_id(key), all[i], "after a restore at %zu, sample %zu", cuts[c],
                         i);
            i++;
        }
        cr_assert_eq(i, n);
        shard_reader_free(&q);
    }
}

Test(mix, a_state_is_refused_by_a_mix_of_other_weights_or_sources)
{
    ShardReaderSettings s;
    mix_settings(&s, 0.7, 0.3);
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf;
    for (int i = 0; i < 30; i++)
        cr_assert_eq(shard_reader_next(r, &key, &url, &f, &nf), 0);
    char state[SHARD_READER_STATE_MAX], why[SHARD_ERROR_MAX];
    cr_assert_eq(shard_reader_state(r, state, sizeof state), 0);
    shard_reader_free(&r);
    cr_assert_eq(tu_restore_into(&s, state, why), 0, "%s", why);
    ShardReaderSettings t = s;
    ShardMixInput other[2] = {inputs[0], inputs[1]};
    other[0].weight = 0.5;
    other[1].weight = 0.5;
    t.sources = other;
    cr_assert_eq(tu_restore_into(&t, state, why), SHARD_ERR_INVALID);
    cr_assert(strstr(why, "the sources' weights (fingerprint) is "), "%s", why);
    /* one source of the two: the shards and the sources differ */
    t = s;
    t.nsources = 1;
    cr_assert_eq(tu_restore_into(&t, state, why), SHARD_ERR_INVALID);
    cr_assert(strstr(why, "the number of sources is 2 in the state and 1 here"), "%s", why);
    /* the same shards in sources of other bounds: the list's fingerprint differs */
    t = s;
    t.sources = NULL;
    t.nsources = 0;
    const char *both[] = {urls_a[0], urls_b[0]};
    t.urls = both;
    t.nurls = 2;
    t.epoch_samples = 0;
    cr_assert_eq(tu_restore_into(&t, state, why), SHARD_ERR_INVALID);
    cr_assert(strstr(why, "the shard list (fingerprint of its shards' names and counts)"), "%s", why);
}

Test(mix, waits_in_slices_give_the_same_mix)
{
    ShardReaderSettings s;
    pad = 100000; /* large samples: the fetch threads fall behind, and takes must wait */
    mix_settings(&s, 0.6, 0.4);
    pad = 0;
    s.shuffle_buffer = 20;
    s.queue_depth = 1;
    int all[1000], sliced[1000];
    size_t n = read_epoch(&s, 1, all, 1000);
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(shard_reader_set_epoch(r, 1), 0);
    shard_reader_set_wait(r, 1e-6);
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf, got = 0, again = 0;
    int rc;
    while ((rc = shard_reader_next(r, &key, &url, &f, &nf)) != SHARD_EOS) {
        if (rc == SHARD_AGAIN) {
            again++;
            continue;
        }
        cr_assert_eq(rc, 0, "%s", shard_reader_error(r));
        cr_assert_lt(got, 1000);
        sliced[got++] = sample_id(key);
    }
    shard_reader_free(&r);
    cr_assert_eq(got, n);
    cr_assert_gt(again, 0, "no take had to wait: the test shows nothing");
    cr_assert_eq(memcmp(sliced, all, n * sizeof *all), 0, "a take that waited moved the mix");
}

Test(mix, epoch_samples_sets_the_size_of_every_consumers_epoch)
{
    ShardReaderSettings s;
    mix_settings(&s, 1, 3);
    s.epoch_samples = 101;
    s.world_size = 2;
    s.num_workers = 2;
    int ids[1000];
    for (int c = 0; c < 4; c++) {
        ShardReaderSettings t = s;
        t.rank = c / 2;
        t.worker = c % 2;
        cr_assert_eq(read_epoch(&t, 0, ids, 1000), 101);
    }
}

Test(mix, one_source_with_its_own_size_reads_as_without_a_mix)
{
    const char *urls[] = {make_source(0, "a", NA, 23)};
    ShardReaderSettings s;
    shard_reader_default_settings(&s);
    s.urls = urls;
    s.nurls = 1;
    s.seed = 5;
    s.have_seed = 1;
    s.rank = 0;
    s.world_size = 1;
    s.shuffle_buffer = 30;
    int x[1000], y[1000];
    size_t n = read_epoch(&s, 4, x, 1000);
    s.epoch_samples = NA; /* a mix of one source, its size: the same passes */
    cr_assert_eq(read_epoch(&s, 4, y, 1000), n);
    cr_assert_arr_eq(x, y, n * sizeof *x);
    s.epoch_samples = 100; /* a third of it: epochs 0, 1, 2 read it once */
    int seen[NA] = {0};
    for (uint64_t e = 0; e < 3; e++) {
        cr_assert_eq(read_epoch(&s, e, x, 1000), 100);
        for (int i = 0; i < 100; i++)
            seen[x[i]]++;
    }
    for (int i = 0; i < NA; i++)
        cr_assert_eq(seen[i], 1, "a%d seen %d times in epochs 0 to 2", i, seen[i]);
}

Test(mix, bad_mixes_are_refused_with_the_reason)
{
    ShardReaderSettings s;
    mix_settings(&s, 0.5, 0);
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), SHARD_ERR_INVALID);
    cr_assert(strstr(err.message, "source 1 has weight 0"), "%s", err.message);
    inputs[1].weight = 1;
    s.mode = SHARD_MODE_RESAMPLED;
    cr_assert_eq(shard_reader_open(&r, &s, &err), SHARD_ERR_UNSUPPORTED);
    cr_assert(strstr(err.message, "exact or equal mode"), "%s", err.message);
    s.mode = SHARD_MODE_EXACT;
    s.urls = urls_a;
    s.nurls = 1;
    cr_assert_eq(shard_reader_open(&r, &s, &err), SHARD_ERR_INVALID);
    cr_assert(strstr(err.message, "not both"), "%s", err.message);
    /* shards without a count (no manifest, no index) */
    char tar[4096];
    snprintf(tar, sizeof tar, "%s/b-0000.tar", dir);
    const char *bare[] = {tar};
    inputs[1] = (ShardMixInput){bare, 1, 1};
    s.urls = NULL;
    s.nurls = 0;
    char idx[4096];
    snprintf(idx, sizeof idx, "%s/b-0000.idx", dir);
    remove(idx);
    s.make_indexes = SHARD_READER_INDEXES_NEVER;
    cr_assert_eq(shard_reader_open(&r, &s, &err), SHARD_ERR_UNSUPPORTED);
    cr_assert(strstr(err.message, "sample count") && strstr(err.message, "b-0000.tar has none"),
              "%s", err.message);
    /* by default such a shard is indexed into the cache, and the mix opens */
    char cache[4096];
    snprintf(cache, sizeof cache, "%s/ix", dir);
    s.make_indexes = SHARD_READER_INDEXES_AUTO;
    s.index_cache = cache;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    ShardReaderStats st;
    shard_reader_stats(r, &st);
    cr_assert_eq(st.indexes_built, 1);
    shard_reader_free(&r);
    cr_assert(access(idx, F_OK) != 0, "nothing written beside the shard");
}
