/* The streaming reader's threads, from C: determinism whatever the timing, consumers that
 * partition the epoch, resume, errors in both policies, stopping while fetch threads are
 * blocked, and owned samples outliving the reader. Run under ThreadSanitizer in CI. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

#include "testshard.h"

static char *dir;
static char *manifest;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
    free(manifest);
    manifest = NULL;
}
TestSuite(reader, .init = setup, .fini = teardown, .timeout = 120);

#define NSAMPLES 300

/* Bytes of each sample's text when set: "sample N", then a pattern that depends on N. */
static size_t pad;

static size_t fill(char *buf, int i)
{
    size_t n = (size_t)snprintf(buf, 64, "sample %d", i);
    for (; n < pad; n++)
        buf[n] = (char)('a' + (n * 7 + (size_t)i) % 26);
    return n;
}

/* NSAMPLES samples in shards of 23 (the last shorter), with a manifest; returns its path. */
static const char *make_shards(const char *ext)
{
    TuSet t;
    tu_set_open(&t, dir, "r", ext, 23);
    for (int i = 0; i < NSAMPLES; i++) {
        char key[32], small[64], *txt = pad ? malloc(pad) : small;
        snprintf(key, sizeof key, "s%05d", i);
        ShardField f[] = {{"txt", txt, fill(txt, i)}};
        tu_set_add(&t, key, f, 1);
        if (txt != small)
            free(txt);
    }
    return manifest = tu_set_finish(&t);
}

static void settings(ShardReaderSettings *s, const char **urls)
{
    shard_reader_default_settings(s);
    s->urls = urls;
    s->nurls = 1;
    s->seed = 7;
    s->have_seed = 1;
    s->rank = 0;
    s->world_size = 1;
    s->shuffle_buffer = 40;
    s->streams = 3;
    s->queue_depth = 4;
}

/* Reads up to max samples; their numbers (from the keys) go to out. */
static int read_keys(ShardReader *r, int *out, int max)
{
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf;
    int n = 0, rc;
    while (n < max && (rc = shard_reader_next(r, &key, &url, &f, &nf)) == 0) {
        cr_assert_eq(nf, 1);
        cr_assert_eq(memcmp(f[0].data, "sample ", 7), 0);
        out[n++] = atoi(key + 1);
    }
    return n;
}

Test(reader, same_seed_same_sequence_and_every_sample_once)
{
    const char *urls[] = {make_shards(".tar")};
    ShardReaderSettings s;
    settings(&s, urls);
    int a[NSAMPLES], b[NSAMPLES], seen[NSAMPLES] = {0};
    for (int round = 0; round < 2; round++) {
        s.queue_depth = round ? 1 : 64; /* a different timing, the same order */
        ShardReader *r;
        ShardError err;
        cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
        cr_assert_eq(shard_reader_epoch_length(r), NSAMPLES);
        cr_assert_eq(read_keys(r, round ? b : a, NSAMPLES), NSAMPLES);
        const char *k, *u;
        const ShardFieldView *f;
        size_t nf;
        cr_assert_eq(shard_reader_next(r, &k, &u, &f, &nf), SHARD_EOS);
        ShardReaderStats st;
        shard_reader_stats(r, &st);
        cr_assert_eq(st.samples, NSAMPLES);
        cr_assert_eq(st.shards_opened, 14);
        shard_reader_free(&r);
        cr_assert_null(r);
    }
    cr_assert_eq(memcmp(a, b, sizeof a), 0, "the order depends on the seed, not the timing");
    int shuffled = 0;
    for (int i = 0; i < NSAMPLES; i++) {
        seen[a[i]]++;
        shuffled |= a[i] != i;
    }
    for (int i = 0; i < NSAMPLES; i++)
        cr_assert_eq(seen[i], 1, "sample %d seen %d times", i, seen[i]);
    cr_assert(shuffled);
}

Test(reader, ranks_and_workers_partition_the_epoch)
{
    const char *urls[] = {make_shards(".tar.zst")};
    ShardReaderSettings s;
    settings(&s, urls);
    s.world_size = 3;
    s.num_workers = 2;
    int seen[NSAMPLES] = {0}, buf[NSAMPLES];
    for (int rank = 0; rank < 3; rank++)
        for (int worker = 0; worker < 2; worker++) {
            s.rank = rank;
            s.worker = worker;
            ShardReader *r;
            ShardError err;
            cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
            int n = read_keys(r, buf, NSAMPLES);
            cr_assert_eq(n, shard_reader_epoch_length(r));
            for (int i = 0; i < n; i++)
                seen[buf[i]]++;
            shard_reader_free(&r);
        }
    for (int i = 0; i < NSAMPLES; i++)
        cr_assert_eq(seen[i], 1, "sample %d read %d times", i, seen[i]);
}

Test(reader, a_restored_reader_continues_the_sequence)
{
    const char *urls[] = {make_shards(".tar")};
    ShardReaderSettings s;
    settings(&s, urls);
    s.epoch = 2;
    int whole[NSAMPLES], head[NSAMPLES], rest[NSAMPLES];
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(read_keys(r, whole, NSAMPLES), NSAMPLES);
    shard_reader_free(&r);
    for (int cut = 1; cut < NSAMPLES; cut += 97) {
        cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
        cr_assert_eq(read_keys(r, head, cut), cut);
        char state[SHARD_READER_STATE_MAX];
        cr_assert_eq(shard_reader_state(r, state, sizeof state), 0);
        shard_reader_free(&r); /* mid-epoch: its fetch threads are running */
        cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
        cr_assert_eq(shard_reader_restore(r, state), 0, "%s", shard_reader_error(r));
        cr_assert_eq(read_keys(r, rest, NSAMPLES), NSAMPLES - cut);
        shard_reader_free(&r);
        cr_assert_eq(memcmp(head, whole, (size_t)cut * sizeof *head), 0);
        cr_assert_eq(memcmp(rest, whole + cut, (size_t)(NSAMPLES - cut) * sizeof *rest), 0,
                     "resumed at %d", cut);
    }
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0);
    cr_assert_eq(shard_reader_restore(r, "v1:2:5:8"), SHARD_ERR_INVALID, "another seed");
    cr_assert_eq(shard_reader_restore(r, "nonsense"), SHARD_ERR_INVALID);
    shard_reader_free(&r);
}

/* A state taken with settings: its text, after `cut` samples. */
static void state_after(const ShardReaderSettings *s, int cut, char *state)
{
    ShardReader *r;
    ShardError err;
    int keys[NSAMPLES];
    cr_assert_eq(shard_reader_open(&r, s, &err), 0, "%s", err.message);
    cr_assert_eq(read_keys(r, keys, cut), cut);
    cr_assert_eq(shard_reader_state(r, state, SHARD_READER_STATE_MAX), 0);
    shard_reader_free(&r);
}

Test(reader, a_state_is_refused_where_its_settings_differ_naming_each)
{
    const char *urls[] = {make_shards(".tar")};
    ShardReaderSettings s, t;
    settings(&s, urls);
    s.world_size = 2;
    char state[SHARD_READER_STATE_MAX], why[SHARD_ERROR_MAX];
    state_after(&s, 50, state);
    cr_assert_eq(tu_restore_into(&s, state, why), 0, "the same settings: %s", why);
    static const struct {
        const char *named;
    } cases[] = {{"partitions is 2 in the state and 4 here"},
                 {"shuffle_buffer (shuffle=) is 40 in the state and 41 here"},
                 {"mode is exact in the state and equal here"},
                 {"sources"},
                 {"streams is 3 in the state and 4 here"},
                 {"seed is 7 in the state and 8 here"},
                 {"shuffle_shards is 1 in the state and 0 here"},
                 {"epoch_samples is 0 in the state and 100 here"},
                 {"pad is 0 in the state and 1 here"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t = s;
        switch (i) {
        case 0: t.partitions = 4; break;
        case 1: t.shuffle_buffer = 41; break;
        case 2: t.mode = SHARD_MODE_EQUAL; break;
        case 3: { /* the same shards as a mix of two sources */
            static ShardMixInput mix[2];
            mix[0] = (ShardMixInput){urls, 1, 1.0};
            mix[1] = (ShardMixInput){urls, 1, 1.0};
            t.urls = NULL;
            t.nurls = 0;
            t.sources = mix;
            t.nsources = 2;
            break;
        }
        case 4: t.streams = 4; break;
        case 5: t.seed = 8; break;
        case 6: t.shuffle_shards = 0; break;
        case 7: t.epoch_samples = 100; break;
        case 8: t.pad = 1; break;
        }
        cr_assert_eq(tu_restore_into(&t, state, why), SHARD_ERR_INVALID, "case %zu accepted", i);
        cr_assert(strstr(why, cases[i].named), "case %zu: %s", i, why);
    }
    /* every difference at once, each named */
    t = s;
    t.streams = 4;
    t.shuffle_buffer = 10;
    cr_assert_eq(tu_restore_into(&t, state, why), SHARD_ERR_INVALID);
    cr_assert(strstr(why, "streams is 3") && strstr(why, "shuffle_buffer (shuffle=) is 40"),
              "%s", why);
    /* the topology is not one of them: the partitions are the same on any that fits */
    t = s;
    t.world_size = 1;
    t.rank = 0;
    cr_assert_eq(tu_restore_into(&t, state, why), 0, "%s", why);
    /* another shard list: one shard fewer */
    char **all;
    size_t n;
    cr_assert_eq(shard_urls_expand(urls[0], &all, &n, NULL), 0);
    t = s;
    t.urls = (const char *const *)all;
    t.nurls = n - 1;
    cr_assert_eq(tu_restore_into(&t, state, why), SHARD_ERR_INVALID);
    cr_assert(strstr(why, "the number of shards listed is 14 in the state and 13 here") &&
                  strstr(why, "the shard list (fingerprint of its shards' names and counts) is "),
              "%s", why);
    shard_urls_free(all, n);
}

Test(reader, rank_0s_state_continues_rank_1)
{
    const char *urls[] = {make_shards(".tar")};
    ShardReaderSettings s;
    settings(&s, urls);
    s.world_size = 2;
    s.mode = SHARD_MODE_EQUAL;
    char state[SHARD_READER_STATE_MAX], why[SHARD_ERROR_MAX];
    state_after(&s, 40, state);
    s.rank = 1;
    int whole[NSAMPLES], rest[NSAMPLES];
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    int n = read_keys(r, whole, NSAMPLES);
    shard_reader_free(&r);
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(shard_reader_restore(r, state), 0, "%s", shard_reader_error(r));
    cr_assert_eq(read_keys(r, rest, NSAMPLES), n - 40);
    cr_assert_eq(memcmp(rest, whole + 40, (size_t)(n - 40) * sizeof *rest), 0,
                 "rank 1 goes on from its own 40th sample");
    shard_reader_free(&r);
    (void)why;
}

Test(reader, a_drawn_seed_gives_way_to_the_states_and_older_states_say_how_to_go_on)
{
    const char *urls[] = {make_shards(".tar")};
    ShardReaderSettings s;
    settings(&s, urls);
    int whole[NSAMPLES], rest[NSAMPLES];
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(read_keys(r, whole, NSAMPLES), NSAMPLES);
    shard_reader_free(&r);
    char state[SHARD_READER_STATE_MAX];
    state_after(&s, 60, state);
    s.have_seed = 0; /* a new process that draws its own */
    s.seed = 0;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(shard_reader_restore(r, state), 0, "%s", shard_reader_error(r));
    cr_assert_eq(shard_reader_seed(r), 7);
    cr_assert_eq(read_keys(r, rest, NSAMPLES), NSAMPLES - 60);
    cr_assert_eq(memcmp(rest, whole + 60, (NSAMPLES - 60) * sizeof *rest), 0);
    shard_reader_free(&r);
    /* the forms 0.2 and 0.3 wrote, of the order before partitions: refused, saying how on */
    s.have_seed = 1;
    s.seed = 7;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    const char *old[] = {"v1:0:60:7", "v2:3:60:7:world_size=1,rank=0"};
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(shard_reader_restore(r, old[i]), SHARD_ERR_INVALID);
        cr_assert(strstr(shard_reader_error(r), "before canonical partitions") &&
                      strstr(shard_reader_error(r), i ? "set_epoch(4)" : "set_epoch(1)"),
                  "%s", shard_reader_error(r));
    }
    shard_reader_free(&r);
}

Test(reader, waits_in_slices_give_the_same_sequence)
{
    pad = 100000; /* large samples: the fetch threads fall behind, and takes must wait */
    const char *urls[] = {make_shards(".tar")};
    ShardReaderSettings s;
    settings(&s, urls);
    s.queue_depth = 1;
    int whole[NSAMPLES], sliced[NSAMPLES];
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(read_keys(r, whole, NSAMPLES), NSAMPLES);
    shard_reader_free(&r);
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    shard_reader_set_wait(r, 1e-6);
    int n = 0, again = 0, rc;
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf;
    while ((rc = shard_reader_next(r, &key, &url, &f, &nf)) != SHARD_EOS) {
        if (rc == SHARD_AGAIN) {
            again++;
            continue;
        }
        cr_assert_eq(rc, 0, "%s", shard_reader_error(r));
        sliced[n++] = atoi(key + 1);
    }
    shard_reader_free(&r);
    pad = 0;
    cr_assert_eq(n, NSAMPLES);
    cr_assert_gt(again, 0, "no take had to wait: the test shows nothing");
    cr_assert_eq(memcmp(sliced, whole, sizeof whole), 0, "a take that waited moved the order");
}

Test(reader, epochs_differ_and_set_epoch_restarts)
{
    const char *urls[] = {make_shards(".tar")};
    ShardReaderSettings s;
    settings(&s, urls);
    int e0[NSAMPLES], e1[NSAMPLES], again[NSAMPLES];
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(read_keys(r, e0, NSAMPLES), NSAMPLES);
    cr_assert_eq(shard_reader_set_epoch(r, 1), 0);
    cr_assert_eq(read_keys(r, e1, 50), 50); /* leave epoch 1 early */
    cr_assert_eq(shard_reader_set_epoch(r, 0), 0);
    cr_assert_eq(read_keys(r, again, NSAMPLES), NSAMPLES);
    shard_reader_free(&r);
    cr_assert_eq(memcmp(e0, again, sizeof e0), 0, "epoch 0 again is epoch 0");
    cr_assert_neq(memcmp(e0, e1, 50 * sizeof *e0), 0, "epoch 1 is another order");
}

Test(reader, errors_fail_or_are_skipped_and_counted)
{
    const char *m = make_shards(".tar");
    char missing[4096];
    snprintf(missing, sizeof missing, "%s/r-0003.tar", dir);
    cr_assert_eq(remove(missing), 0);
    const char *urls[] = {m};
    ShardReaderSettings s;
    settings(&s, urls);
    int buf[NSAMPLES];
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    read_keys(r, buf, NSAMPLES);
    const char *k, *u;
    const ShardFieldView *f;
    size_t nf;
    int rc = shard_reader_next(r, &k, &u, &f, &nf);
    cr_assert(rc != 0 && rc != SHARD_EOS, "fail mode stops at the missing shard");
    cr_assert(strstr(shard_reader_error(r), "r-0003.tar: cannot open"), "%s",
              shard_reader_error(r));
    shard_reader_free(&r);

    s.skip_errors = 1;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(read_keys(r, buf, NSAMPLES), NSAMPLES - 23);
    ShardReaderStats st;
    shard_reader_stats(r, &st);
    cr_assert_eq(st.skipped_shards, 1);
    cr_assert_eq(st.skipped_samples, 23);
    cr_assert_eq(st.errors, 1);
    cr_assert(strstr(shard_reader_kept_error(r, 0), "r-0003.tar"));
    cr_assert_null(shard_reader_kept_error(r, 1));
    shard_reader_free(&r);
}

Test(reader, owned_samples_outlive_the_reader)
{
    const char *urls[] = {make_shards(".tar")};
    ShardReaderSettings s;
    settings(&s, urls);
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    ShardItem *items[NSAMPLES];
    int n = 0;
    while (n < NSAMPLES && shard_reader_take(r, &items[n]) == 0)
        n++;
    cr_assert_eq(n, NSAMPLES);
    cr_assert_eq(shard_list_count(shard_reader_list(r)), 14);
    shard_reader_free(&r);
    int sum = 0;
    for (int i = 0; i < n; i++) {
        const ShardSampleView *v = shard_item_sample(items[i]);
        int k = atoi(v->key + 1);
        char want[64];
        int len = snprintf(want, sizeof want, "sample %d", k);
        cr_assert_eq(v->fields[0].size, (uint64_t)len);
        cr_assert_eq(memcmp(v->fields[0].data, want, (size_t)len), 0, "the shard's bytes");
        cr_assert(strstr(v->url, ".tar"));
        sum += k;
        shard_item_free(&items[i]);
    }
    cr_assert_eq(sum, NSAMPLES * (NSAMPLES - 1) / 2);
}

/* Samples read out of compressed shards are copies (taken over from the tar reader, their
 * memory recycled by the fetch stage): they too outlive the reader, every byte intact. */
Test(reader, copied_samples_outlive_the_reader)
{
    pad = 20000;
    const char *urls[] = {make_shards(".tar.zst")};
    ShardReaderSettings s;
    settings(&s, urls);
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    ShardItem **items = calloc(NSAMPLES, sizeof *items);
    int n = 0;
    while (n < NSAMPLES && shard_reader_take(r, &items[n]) == 0) {
        if (n % 3 == 2) /* some go back while the reader runs, some after it is gone */
            shard_item_free(&items[n - 1]);
        n++;
    }
    cr_assert_eq(n, NSAMPLES);
    shard_reader_free(&r);
    static char want[20000];
    int left = 0;
    for (int i = 0; i < n; i++) {
        if (!items[i])
            continue;
        const ShardSampleView *v = shard_item_sample(items[i]);
        int k = atoi(v->key + 1);
        size_t len = fill(want, k);
        cr_assert_eq(v->fields[0].size, (uint64_t)len);
        cr_assert_eq(memcmp(v->fields[0].data, want, len), 0, "sample %d's bytes", k);
        shard_item_free(&items[i]);
        left++;
    }
    cr_assert_eq(left, NSAMPLES - NSAMPLES / 3);
    free(items);
    pad = 0;
}

Test(reader, resampled_epochs_are_as_long_as_asked)
{
    const char *urls[] = {make_shards(".tar")};
    ShardReaderSettings s;
    settings(&s, urls);
    s.mode = SHARD_MODE_RESAMPLED;
    s.epoch_samples = 1000;
    int buf[1000];
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(read_keys(r, buf, 1000), 1000);
    const char *k, *u;
    const ShardFieldView *f;
    size_t nf;
    cr_assert_eq(shard_reader_next(r, &k, &u, &f, &nf), SHARD_EOS);
    shard_reader_free(&r);
}

/* A shuffle buffer past its limit: the message names the C fields, with the sizes that
 * would fit (the faces name their own keywords: tests/python/test_limits.py, the CLI's). */
Test(reader, a_shuffle_buffer_past_its_limit_names_the_c_fields, .timeout = 60)
{
    TuSet t;
    tu_set_open(&t, dir, "big", ".tar", 100);
    size_t size = (size_t)5 << 20;
    char *blob = calloc(1, size);
    cr_assert_not_null(blob);
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "s%02d", i);
        ShardField f = {"bin", blob, size};
        tu_set_add(&t, key, &f, 1);
    }
    free(blob);
    char *manifest = tu_set_finish(&t);
    const char *urls[] = {manifest};
    ShardReaderSettings s;
    settings(&s, urls);
    s.shuffle_buffer = 16;
    s.streams = 1;
    s.memory_budget = (size_t)64 << 20;
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    const char *k, *u;
    const ShardFieldView *f;
    size_t nf;
    int rc;
    while ((rc = shard_reader_next(r, &k, &u, &f, &nf)) == 0)
        ;
    const char *msg = shard_reader_error(r);
    cr_assert_eq(rc, SHARD_ERR_INVALID, "%s", msg);
    cr_assert(strstr(msg, "more than its limit of 67108864"), "%s", msg);
    cr_assert(strstr(msg, "set shuffle_buffer=11 or less, or memory_budget="), "%s", msg);
    shard_reader_free(&r);
    free(manifest);
}

/* keys: only the samples a key file lists (a view), each once, read by index; the
 * shards' indexes read by several threads at once (ThreadSanitizer's build runs this). */
Test(reader, a_view_reads_the_samples_its_keys_choose_once)
{
    const char *urls[] = {make_shards(".tar")};
    char *keys = tu_path(dir, "keys.txt");
    FILE *f = fopen(keys, "w");
    cr_assert(f);
    int chosen = 0;
    for (int i = 0; i < NSAMPLES; i += 3, chosen++)
        fprintf(f, "s%05d\n", i);
    fprintf(f, "nothing\n");
    fclose(f);
    ShardReaderSettings s;
    settings(&s, urls);
    s.keys = keys;
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    int got[NSAMPLES], seen[NSAMPLES] = {0};
    int n = read_keys(r, got, NSAMPLES);
    cr_assert_eq(n, chosen);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(got[i] % 3, 0, "sample %d was not chosen", got[i]);
        cr_assert_eq(seen[got[i]]++, 0, "sample %d twice", got[i]);
    }
    ShardReaderStats st;
    shard_reader_stats(r, &st);
    cr_assert_eq(st.keys_given, (uint64_t)chosen + 1);
    cr_assert_eq(st.keys_missing, 1);
    cr_assert_eq(st.keys_chosen, (uint64_t)chosen);
    shard_reader_free(&r);
    free(keys);
}
