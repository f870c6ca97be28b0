/* Aspect buckets from C (ShardReaderSettings.aspect_buckets): the reader's batches one
 * bucket each, every sample once, at most one partial per bucket, the same batches on 2 x 2
 * as on 1 x 1, an elastic resume onto 3 x 1, equal mode's even counts; the loader's batches
 * of their bucket's size. Run under AddressSanitizer and ThreadSanitizer in CI. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

#include "testloader.h"

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
TestSuite(bucketed, .init = setup, .fini = teardown, .timeout = 300);

#define NSAMPLES 120
#define BATCH 4
#define MAX_BATCHES NSAMPLES
static const char BUCKETS[] = "40x60,60x40,36x64,48x48";
/* landscape 3:2, portrait 2:3, 16:9, square, in turn */
static const int SIZES[4][2] = {{60, 40}, {40, 60}, {64, 36}, {48, 48}};

/* NSAMPLES samples of the four aspects in turn, in shards of 16, with a manifest. */
static const char *make_shards(void)
{
    TuSet t;
    tu_set_open(&t, dir, "b", ".tar", 16);
    for (int i = 0; i < NSAMPLES; i++) {
        char key[32], cls[8];
        snprintf(key, sizeof key, "k%04d", i);
        snprintf(cls, sizeof cls, "%d", i % 4);
        unsigned long size;
        unsigned char *img = tu_jpeg(SIZES[i % 4][0], SIZES[i % 4][1], tu_coloured, i, &size);
        ShardField f[] = {{"jpg", img, size}, {"cls", cls, strlen(cls)}};
        tu_set_add(&t, key, f, 2);
        free(img);
    }
    return manifest = tu_set_finish(&t);
}

typedef struct Batches {
    int key[MAX_BATCHES][BATCH]; /* sample numbers, -1 past the batch's size */
    int bucket[MAX_BATCHES];
    int n;
} Batches;

static void reader_settings(ShardReaderSettings *s, const char **urls)
{
    shard_reader_default_settings(s);
    s->urls = urls;
    s->nurls = 1;
    s->seed = 5;
    s->have_seed = 1;
    s->rank = 0;
    s->world_size = 1;
    s->partitions = 6;
    s->batch_size = BATCH;
    s->aspect_buckets = BUCKETS;
}

/* Up to limit of r's batches (-1: all) into b, cut at each batch's end. */
static void take(ShardReader *r, Batches *b, int limit)
{
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf;
    int at = 0, taken = 0;
    while ((limit < 0 || taken < limit) && shard_reader_next(r, &key, &url, &f, &nf) == 0) {
        int end;
        int k = shard_reader_bucket(r, NULL, NULL, NULL, &end);
        cr_assert_geq(k, 0);
        cr_assert_lt(b->n, MAX_BATCHES);
        if (!at)
            memset(b->key[b->n], 0xff, sizeof b->key[b->n]);
        b->key[b->n][at++] = atoi(key + 1);
        b->bucket[b->n] = k;
        if (end) {
            b->n++;
            taken++;
            at = 0;
        }
    }
    cr_assert_eq(at, 0, "a batch left open");
}

/* The sample's bucket: the nearest in aspect, as the sizes are laid out. */
static int nearest(int sample) { return sample % 4; }

static void check_epoch(const Batches *b)
{
    int seen[NSAMPLES] = {0}, partial[4] = {0};
    for (int i = 0; i < b->n; i++) {
        int n = 0;
        for (int j = 0; j < BATCH && b->key[i][j] >= 0; j++, n++) {
            cr_assert_eq(nearest(b->key[i][j]), b->bucket[i], "sample %d in bucket %d",
                         b->key[i][j], b->bucket[i]);
            seen[b->key[i][j]]++;
        }
        partial[b->bucket[i]] += n < BATCH;
    }
    for (int i = 0; i < NSAMPLES; i++)
        cr_assert_eq(seen[i], 1, "sample %d seen %d times", i, seen[i]);
    for (int k = 0; k < 4; k++)
        cr_assert_leq(partial[k], 1);
}

static int by_keys(const void *a, const void *b) { return memcmp(a, b, sizeof(int) * BATCH); }

/* b's batches sorted, for comparing sets. */
static void sorted(Batches *b) { qsort(b->key, (size_t)b->n, sizeof b->key[0], by_keys); }

Test(bucketed, batches_are_one_bucket_and_the_same_on_any_topology)
{
    const char *urls[] = {make_shards()};
    ShardReaderSettings s;
    reader_settings(&s, urls);
    ShardReader *r;
    ShardError err;
    static Batches one, four;
    cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
    cr_assert_eq(shard_reader_buckets(r, NULL, NULL, 0), 4);
    take(r, &one, -1);
    shard_reader_free(&r);
    check_epoch(&one);
    for (int c = 0; c < 4; c++) {
        ShardReaderSettings q = s;
        q.rank = c / 2, q.world_size = 2, q.worker = c % 2, q.num_workers = 2;
        cr_assert_eq(shard_reader_open(&r, &q, &err), 0, "%s", err.message);
        take(r, &four, -1);
        shard_reader_free(&r);
    }
    check_epoch(&four);
    sorted(&one);
    sorted(&four);
    cr_assert_eq(one.n, four.n);
    cr_assert_eq(memcmp(one.key, four.key, sizeof(int) * BATCH * (size_t)one.n), 0);
}

Test(bucketed, an_elastic_resume_onto_3x1_repeats_and_loses_nothing)
{
    const char *urls[] = {make_shards()};
    ShardReaderSettings s;
    reader_settings(&s, urls);
    ShardReader *r;
    ShardError err;
    static Batches got;
    static char states[4][SHARD_READER_STATE_MAX], job[SHARD_READER_STATE_MAX];
    const char *each[4];
    for (int c = 0; c < 4; c++) {
        ShardReaderSettings q = s;
        q.rank = c / 2, q.world_size = 2, q.worker = c % 2, q.num_workers = 2;
        cr_assert_eq(shard_reader_open(&r, &q, &err), 0, "%s", err.message);
        take(r, &got, 1 + c);
        cr_assert_eq(shard_reader_state(r, states[c], sizeof states[c]), 0);
        each[c] = states[c];
        shard_reader_free(&r);
    }
    cr_assert_eq(shard_reader_state_merge(each, 4, job, sizeof job, &err), 0, "%s", err.message);
    for (int rank = 0; rank < 3; rank++) {
        ShardReaderSettings q = s;
        q.rank = rank, q.world_size = 3;
        cr_assert_eq(shard_reader_open(&r, &q, &err), 0, "%s", err.message);
        cr_assert_eq(shard_reader_restore(r, job), 0, "%s", shard_reader_error(r));
        take(r, &got, -1);
        shard_reader_free(&r);
    }
    check_epoch(&got);
}

Test(bucketed, equal_mode_gives_every_rank_as_many_batches)
{
    const char *urls[] = {make_shards()};
    ShardReaderSettings s;
    reader_settings(&s, urls);
    s.mode = SHARD_MODE_EQUAL;
    s.world_size = 3;
    ShardError err;
    int64_t counted[3];
    for (int rank = 0; rank < 3; rank++) {
        ShardReader *r;
        static Batches b;
        b.n = 0;
        s.rank = rank;
        cr_assert_eq(shard_reader_open(&r, &s, &err), 0, "%s", err.message);
        counted[rank] = shard_reader_rank_batches(r, -1, BATCH, 0);
        take(r, &b, -1);
        cr_assert_eq(b.n, counted[rank], "rank %d: %d batches, %lld counted", rank, b.n,
                     (long long)counted[rank]);
        shard_reader_free(&r);
    }
    cr_assert(counted[0] > 0 && counted[0] == counted[1] && counted[1] == counted[2]);
}

Test(bucketed, the_loaders_batches_are_their_buckets_size)
{
    const char *urls[] = {make_shards()};
    ShardLoaderSettings s;
    tu_loader_settings(&s, urls);
    s.reader.aspect_buckets = BUCKETS;
    s.reader.shuffle_buffer = 0;
    s.batch_size = BATCH;
    s.transform.crop = SHARD_CROP_CENTER; /* cover */
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    int heights[4], widths[4];
    cr_assert_eq(shard_loader_buckets(l, heights, widths, NULL, 4), 4);
    const ShardBatch *b;
    size_t n = 0;
    while (shard_loader_next(l, &b) == 0) {
        cr_assert(b->bucket >= 0 && b->bucket < 4);
        cr_assert_eq(b->height, heights[b->bucket]);
        cr_assert_eq(b->width, widths[b->bucket]);
        cr_assert_eq(b->image_bytes, (size_t)b->height * (size_t)b->width * 3);
        for (size_t i = 0; i < b->size; i++) {
            int k = atoi(b->keys[i] + 1);
            cr_assert_eq(nearest(k), b->bucket);
            /* the red channel (NCHW, plane 0) carries the sample's colour */
            const unsigned char *img = (const unsigned char *)b->images + i * b->image_bytes;
            cr_assert_leq(abs(img[0] - ((k * 37) & 255)), 6, "sample %d", k);
        }
        n += b->size;
        shard_batch_release(l, b);
    }
    cr_assert_eq(n, NSAMPLES);
    uint64_t samples[4], sum = 0;
    shard_loader_buckets(l, NULL, NULL, samples, 4);
    for (int k = 0; k < 4; k++)
        sum += samples[k];
    cr_assert_eq(sum, NSAMPLES);
    shard_loader_free(&l);
}
