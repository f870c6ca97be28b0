/* The batch loader's threads, from C: batches in the reader's order whatever the decode
 * timing, labels, keys and raw fields, buffers held and released from another thread,
 * epochs and resume with batches still held, decode errors in both policies, and the
 * allocator hook. Run under ThreadSanitizer in CI. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
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
TestSuite(loader, .init = setup, .fini = teardown, .timeout = 120);

#define NSAMPLES 90

/* NSAMPLES samples (jpg, cls = i % 5, json on even ones; sample 13's jpg is damaged when
 * damage) in shards of 16, with a manifest. */
static const char *make_shards(int damage)
{
    return manifest = tu_jpeg_shards(dir, "l", NSAMPLES, damage, 1);
}

static void settings(ShardLoaderSettings *s, const char **urls) { tu_loader_settings(s, urls); }

/* The sample numbers of the reader alone, in its order, for the same settings. */
static int reader_order(const ShardLoaderSettings *s, int *out)
{
    ShardReaderSettings rs = s->reader;
    rs.batch_size = s->batch_size;
    rs.drop_last = s->drop_last;
    ShardReader *r;
    ShardError err;
    cr_assert_eq(shard_reader_open(&r, &rs, &err), 0, "%s", err.message);
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf;
    int n = 0;
    while (shard_reader_next(r, &key, &url, &f, &nf) == 0)
        out[n++] = atoi(key + 1);
    shard_reader_free(&r);
    return n;
}

/* Checks a batch against the reader's order from *at, and moves *at past it. */
static void check_batch(const ShardBatch *b, const int *order, int *at, size_t image_bytes)
{
    cr_assert_eq(b->image_bytes, image_bytes);
    const ShardBatchField *json = NULL;
    for (size_t k = 0; k < b->nfields; k++)
        if (!strcmp(b->fields[k].name, "json"))
            json = &b->fields[k];
    for (size_t i = 0; i < b->size; i++) {
        int k = order[(*at)++];
        /* with raw_fields "*", a batch has the fields its samples have */
        cr_assert(json || k % 2, "sample %d has a json field, the batch has none", k);
        cr_assert_eq(atoi(b->keys[i] + 1), k, "batch %llu sample %zu", (unsigned long long)b->index, i);
        cr_assert_eq(b->labels[i], k % 5);
        cr_assert(!json || json->present[i] == (k % 2 == 0));
        if (k % 2 == 0) {
            char want[32];
            int n = snprintf(want, sizeof want, "{\"i\": %d}", k);
            cr_assert_eq(json->offsets[i + 1] - json->offsets[i], (uint64_t)n);
            cr_assert_eq(memcmp(json->data + json->offsets[i], want, (size_t)n), 0);
        }
        /* the red channel (NCHW, plane 0) carries the sample's colour */
        const unsigned char *img = (const unsigned char *)b->images + i * b->image_bytes;
        int want = (k * 37) & 255;
        cr_assert_leq(abs(img[0] - want), 6, "sample %d: red %d, want %d", k, img[0], want);
    }
}

Test(loader, batches_come_in_the_readers_order)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    int order[NSAMPLES];
    cr_assert_eq(reader_order(&s, order), NSAMPLES);
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    cr_assert_eq(shard_loader_epoch_batches(l), 12);
    for (int pass = 0; pass < 2; pass++) { /* epoch 0, then epoch 0 again */
        int at = 0, batches = 0;
        const ShardBatch *b;
        int rc;
        while ((rc = shard_loader_next(l, &b)) == 0) {
            cr_assert_eq(b->epoch, 0);
            check_batch(b, order, &at, shard_transform_output_size(&s.transform));
            shard_batch_release(l, b);
            batches++;
        }
        cr_assert_eq(rc, SHARD_EOS, "%s", shard_loader_error(l));
        cr_assert_eq(at, NSAMPLES);
        cr_assert_eq(batches, 12, "the last one short");
        cr_assert_eq(shard_loader_set_epoch(l, 0), 0); /* the same epoch again */
    }
    shard_loader_free(&l);
    cr_assert_null(l);
}

typedef struct Release {
    ShardLoader *l;
    const ShardBatch *b;
} Release;

static void *release_later(void *arg)
{
    Release *r = arg;
    shard_batch_release(r->l, r->b);
    return NULL;
}

Test(loader, held_buffers_block_and_release_from_another_thread)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    int order[NSAMPLES];
    reader_order(&s, order);
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    const ShardBatch *held[3];
    int at = 0;
    size_t ib = shard_transform_output_size(&s.transform);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(shard_loader_next(l, &held[i]), 0, "%s", shard_loader_error(l));
        check_batch(held[i], order, &at, ib);
    }
    const ShardBatch *b;
    cr_assert_eq(shard_loader_next(l, &b), SHARD_ERR_STATE, "every buffer is held");
    cr_assert(strstr(shard_loader_error(l), "all 3 batch buffers are held"));
    pthread_t t[3];
    Release rel[3];
    for (int i = 0; i < 3; i++) {
        rel[i] = (Release){l, held[i]};
        pthread_create(&t[i], NULL, release_later, &rel[i]);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    int rc;
    while ((rc = shard_loader_next(l, &b)) == 0) {
        check_batch(b, order, &at, ib);
        shard_batch_release(l, b);
    }
    cr_assert_eq(rc, SHARD_EOS);
    cr_assert_eq(at, NSAMPLES);
    shard_loader_free(&l);
}

Test(loader, restore_and_epochs_with_batches_held)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    int order[NSAMPLES];
    reader_order(&s, order);
    size_t ib = shard_transform_output_size(&s.transform);
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    const ShardBatch *a, *b;
    int at = 0;
    cr_assert_eq(shard_loader_next(l, &a), 0);
    check_batch(a, order, &at, ib);
    cr_assert_eq(shard_loader_next(l, &b), 0);
    check_batch(b, order, &at, ib);
    char state[SHARD_READER_STATE_MAX];
    cr_assert_eq(shard_loader_state(l, state, sizeof state), 0);
    cr_assert(!strncmp(state, "v4:0:3:mode=exact,", 18) && strstr(state, ";left=16-90;"), "%s", state);
    /* a new epoch while one batch is held: it stays valid until released */
    cr_assert_eq(shard_loader_set_epoch(l, 5), 0);
    unsigned char first = ((const unsigned char *)a->images)[0];
    const ShardBatch *c;
    cr_assert_eq(shard_loader_next(l, &c), 0);
    cr_assert_eq(c->epoch, 5);
    cr_assert_eq(((const unsigned char *)a->images)[0], first);
    shard_batch_release(l, a);
    shard_batch_release(l, c);
    /* back to where the state was taken, with b still held */
    cr_assert_eq(shard_loader_restore(l, state), 0, "%s", shard_loader_error(l));
    int rc;
    while ((rc = shard_loader_next(l, &c)) == 0) {
        check_batch(c, order, &at, ib);
        shard_batch_release(l, c);
    }
    cr_assert_eq(rc, SHARD_EOS);
    cr_assert_eq(at, NSAMPLES);
    shard_batch_release(l, b);
    shard_loader_free(&l);
}

Test(loader, a_refused_restore_is_reported_not_waited_on)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    const ShardBatch *b;
    cr_assert_eq(shard_loader_next(l, &b), 0);
    shard_batch_release(l, b);
    cr_assert_eq(shard_loader_restore(l, "nonsense"), SHARD_ERR_INVALID);
    cr_assert_eq(shard_loader_next(l, &b), 0, "a malformed state changes nothing");
    shard_batch_release(l, b);
    char state[SHARD_READER_STATE_MAX], other[SHARD_READER_STATE_MAX];
    cr_assert_eq(shard_loader_state(l, state, sizeof state), 0);
    snprintf(other, sizeof other, "v4:0:99:%s", strchr(strchr(state + 3, ':') + 1, ':') + 1);
    cr_assert_eq(shard_loader_restore(l, other), SHARD_ERR_INVALID, "another seed, edited in");
    cr_assert_eq(shard_loader_next(l, &b), SHARD_ERR_INVALID, "no producer runs: said, not awaited");
    cr_assert(strstr(shard_loader_error(l), "does not match its checksum"), "%s",
              shard_loader_error(l));
    cr_assert_eq(shard_loader_set_epoch(l, 1), 0);
    cr_assert_eq(shard_loader_next(l, &b), 0, "%s", shard_loader_error(l));
    cr_assert_eq(b->epoch, 1);
    shard_batch_release(l, b);
    shard_loader_free(&l);
}

Test(loader, a_corrupt_image_fails_or_is_skipped)
{
    const char *urls[] = {make_shards(1)};
    ShardLoaderSettings s;
    settings(&s, urls);
    s.transform.fast = 0; /* a full decode meets the damage */
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    const ShardBatch *b;
    int rc;
    while ((rc = shard_loader_next(l, &b)) == 0)
        shard_batch_release(l, b);
    cr_assert_eq(rc, SHARD_ERR_DECODE);
    cr_assert(strstr(shard_loader_error(l), "sample 'k0013'"), "%s", shard_loader_error(l));
    cr_assert(strstr(shard_loader_error(l), "l-0000.tar"), "%s", shard_loader_error(l));
    shard_loader_free(&l);

    s.reader.skip_errors = 1;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    size_t n = 0, repeats = 0;
    while ((rc = shard_loader_next(l, &b)) == 0) {
        for (size_t i = 0; i < b->size; i++) {
            cr_assert_str_neq(b->keys[i], "k0013");
            if (!b->repeats[i])
                continue;
            /* the skipped sample's place: a marked repeat of another of its batch */
            repeats++;
            size_t j = 0;
            while (j < b->size && (j == i || b->repeats[j] || strcmp(b->keys[j], b->keys[i])))
                j++;
            cr_assert_lt(j, b->size, "repeat of %s is no sample of its batch", b->keys[i]);
            cr_assert_eq(memcmp((char *)b->images + i * b->image_bytes,
                                (char *)b->images + j * b->image_bytes, b->image_bytes), 0);
        }
        n += b->size;
        shard_batch_release(l, b);
    }
    cr_assert_eq(rc, SHARD_EOS);
    cr_assert_eq(n, NSAMPLES, "the batch keeps its size");
    cr_assert_eq(repeats, 1);
    cr_assert_eq(shard_loader_skipped(l), 1);
    cr_assert_eq(shard_loader_skipped_batches(l), 0);
    shard_loader_free(&l);
}

/* An allocator that counts its blocks and remembers where they are. */
typedef struct Counting {
    atomic_int live, allocs;
    pthread_mutex_t lock;
    const void *blocks[256];
    size_t sizes[256];
    int n;
} Counting;

static void *counting_alloc(void *cookie, size_t size, size_t align)
{
    Counting *c = cookie;
    void *p = aligned_alloc(align, (size + align - 1) / align * align);
    pthread_mutex_lock(&c->lock);
    if (c->n < 256) {
        c->blocks[c->n] = p;
        c->sizes[c->n++] = size;
    }
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_add(&c->live, 1);
    atomic_fetch_add(&c->allocs, 1);
    return p;
}

static void counting_free(void *cookie, void *p, size_t size)
{
    Counting *c = cookie;
    (void)size;
    if (p)
        atomic_fetch_sub(&c->live, 1);
    free(p);
}

static int from(Counting *c, const void *p)
{
    pthread_mutex_lock(&c->lock);
    int found = 0;
    for (int i = 0; i < c->n && !found; i++)
        found = (const char *)p >= (const char *)c->blocks[i] &&
                (const char *)p < (const char *)c->blocks[i] + c->sizes[i];
    pthread_mutex_unlock(&c->lock);
    return found;
}

/* Images and labels (what a device copy reads) come from the settings' allocator, once per
 * buffer; keys and raw fields, which grow with the samples, never do: with pinned memory
 * each growth would be a driver call on the loader's thread. */
Test(loader, images_and_labels_come_from_the_allocator_and_nothing_else)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    Counting c = {0};
    pthread_mutex_init(&c.lock, NULL);
    ShardAllocator a = {&c, counting_alloc, counting_free};
    s.allocator = &a;
    s.raw_fields = "jpg;json";
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    const ShardBatch *b;
    int batches = 0;
    while (shard_loader_next(l, &b) == 0) {
        cr_assert(from(&c, b->images));
        cr_assert(from(&c, b->labels));
        cr_assert(!from(&c, b->keys));
        cr_assert(!from(&c, b->keys[0]));
        cr_assert_gt(b->nfields, 0);
        for (size_t k = 0; k < b->nfields; k++) {
            cr_assert(!from(&c, b->fields[k].data), "raw field %s", b->fields[k].name);
            cr_assert(!from(&c, b->fields[k].offsets));
            cr_assert(!from(&c, b->fields[k].present));
        }
        shard_batch_release(l, b);
        batches++;
    }
    cr_assert_eq(batches, 12);
    size_t buffers = s.batches;
    cr_assert_eq((size_t)atomic_load(&c.allocs), 2 * buffers,
                 "images and labels of %zu buffers, once",
                 buffers);
    shard_loader_free(&l);
    cr_assert_eq(atomic_load(&c.live), 0, "every block given back");
    pthread_mutex_destroy(&c.lock);
    cr_assert_not_null(shard_default_allocator());
}

Test(loader, stage_statistics_agree_and_add_up)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    const ShardBatch *b;
    while (shard_loader_next(l, &b) == 0) {
        ShardLoaderStats mid; /* read while the threads run */
        shard_loader_stats(l, &mid);
        cr_assert_leq(mid.stages[SHARD_STAGE_DELIVER].items, NSAMPLES);
        shard_batch_release(l, b);
    }
    ShardLoaderStats st;
    shard_loader_stats(l, &st);
    static const char *names[] = {"list",  "fetch",  "decompress", "parse",  "shuffle",
                                  "batch", "decode", "upload",     "deliver"};
    cr_assert_eq(st.stages[SHARD_STAGE_DELIVER].items, NSAMPLES);
    cr_assert_str_eq(st.stages[SHARD_STAGE_LIST].name, "list");
    cr_assert_eq(st.stages[SHARD_STAGE_LIST].items, (NSAMPLES + 15) / 16, "the shards of 16");
    cr_assert_gt(st.stages[SHARD_STAGE_LIST].seconds, 0);
    cr_assert_eq(st.stages[SHARD_STAGE_UPLOAD].threads, 0, "no upload without an uploader");
    uint64_t before = UINT64_MAX;
    for (int i = SHARD_STAGE_FETCH; i < SHARD_STAGES; i++) {
        const ShardStageStats *g = &st.stages[i];
        cr_assert_str_eq(g->name, names[i]);
        if (i == SHARD_STAGE_UPLOAD)
            continue;
        /* up to what is already read ahead into the next epoch */
        cr_assert(g->items >= NSAMPLES && g->items <= before, "%s: %llu samples", g->name,
                  (unsigned long long)g->items);
        before = g->items;
        double sum = g->busy_seconds + g->wait_input_seconds + g->wait_output_seconds;
        cr_assert(sum <= g->seconds * 1.1 + 0.05 && sum >= g->seconds * 0.9 - 0.05,
                  "%s: busy %.3f + waits %.3f + %.3f against %.3f", g->name, g->busy_seconds,
                  g->wait_input_seconds, g->wait_output_seconds, g->seconds);
    }
    /* a plain tar: bytes read as stored are the members and more (headers), none unpacked */
    cr_assert_geq(st.stages[SHARD_STAGE_FETCH].bytes, st.stages[SHARD_STAGE_PARSE].bytes);
    cr_assert_eq(st.stages[SHARD_STAGE_DECOMPRESS].bytes, 0);
    cr_assert_eq(st.stages[SHARD_STAGE_DECOMPRESS].busy_seconds, 0);
    cr_assert_eq(st.stages[SHARD_STAGE_DECODE].threads, 3);
    cr_assert(st.bottleneck >= SHARD_STAGE_FETCH && st.bottleneck < SHARD_STAGES &&
              st.bottleneck != SHARD_STAGE_UPLOAD);
    cr_assert(!strncmp(st.verdict, names[st.bottleneck], strlen(names[st.bottleneck])), "%s",
              st.verdict);
    shard_loader_free(&l);
}

/* Spans from every thread, written when the loader is freed: a decode span per sample. */
Test(loader, a_trace_has_every_stages_spans)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    char path[4096];
    snprintf(path, sizeof path, "%s/trace.json", dir);
    s.trace_path = path;
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    const ShardBatch *b;
    while (shard_loader_next(l, &b) == 0)
        shard_batch_release(l, b);
    shard_loader_free(&l);
    FILE *f = fopen(path, "r");
    cr_assert(f, "no trace at %s", path);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    int decode = 0;
    for (const char *p = text; (p = strstr(p, "\"name\": \"decode\"")); p++)
        decode++;
    cr_assert_geq(decode, NSAMPLES); /* and those read ahead into the next epoch */
    const char *stages[] = {"list", "fetch", "parse", "shuffle", "batch", "deliver"};
    for (int i = 0; i < 6; i++) {
        char want[64];
        snprintf(want, sizeof want, "\"name\": \"%s\", \"cat\": \"libshard\", \"ph\": \"X\"",
                 stages[i]);
        cr_assert(strstr(text, want), "no %s span", stages[i]);
    }
    cr_assert(strstr(text, "\"traceEvents\"") && strstr(text, "\"dropped_spans\": 0"));
    ShardLoaderSettings none;
    settings(&none, urls);
    cr_assert_eq(shard_loader_open(&l, &none, &err), 0, "%s", err.message);
    cr_assert_eq(shard_loader_trace_write(l, path, &err), SHARD_ERR_STATE);
    shard_loader_free(&l);
}

/* The producer goes on into the next epoch by itself: what set_epoch(e + 1) then hands out
 * equals a loader opened at e + 1, batch numbers from 0; any other epoch restarts. */
static uint64_t batch_digest(const ShardBatch *b)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = b->images;
    for (size_t i = 0; i < b->size * b->image_bytes; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    for (size_t i = 0; i < b->size; i++)
        for (const char *k = b->keys[i]; *k; k++)
            h = (h ^ (unsigned char)*k) * 1099511628211ull;
    return h;
}

static size_t epoch_digests(ShardLoader *l, uint64_t *out)
{
    const ShardBatch *b;
    size_t n = 0;
    while (shard_loader_next(l, &b) == 0) {
        cr_assert_eq(b->index, n, "batch %zu says %llu", n, (unsigned long long)b->index);
        out[n++] = batch_digest(b);
        shard_batch_release(l, b);
    }
    return n;
}

Test(loader, the_next_epoch_is_read_ahead_and_equals_a_fresh_one)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    ShardLoader *l, *fresh;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    uint64_t a[64], b[64];
    size_t na = epoch_digests(l, a);
    cr_assert_gt(na, 5);
    for (uint64_t e = 1; e <= 3; e++) {
        cr_assert_eq(shard_loader_set_epoch(l, e), 0);
        na = epoch_digests(l, a);
        ShardLoaderSettings f = s;
        f.reader.epoch = e;
        cr_assert_eq(shard_loader_open(&fresh, &f, &err), 0, "%s", err.message);
        size_t nb = epoch_digests(fresh, b);
        shard_loader_free(&fresh);
        cr_assert_eq(na, nb);
        cr_assert_arr_eq(a, b, na * sizeof *a, "epoch %llu differs from a fresh loader's",
                         (unsigned long long)e);
    }
    /* another epoch than the next: a restart, the same batches as fresh */
    cr_assert_eq(shard_loader_set_epoch(l, 7), 0);
    na = epoch_digests(l, a);
    ShardLoaderSettings f = s;
    f.reader.epoch = 7;
    cr_assert_eq(shard_loader_open(&fresh, &f, &err), 0, "%s", err.message);
    cr_assert_eq(epoch_digests(fresh, b), na);
    cr_assert_arr_eq(a, b, na * sizeof *a);
    shard_loader_free(&fresh);
    shard_loader_free(&l);
}

/* A sample decoded alone with the batch's seed for it is the batch's image: what shardcat
 * bench's ceiling decodes to do the very same work, crops and all. */
Test(loader, a_batchs_seeds_redo_its_images)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    s.raw_fields = "jpg";
    s.transform.crop = SHARD_CROP_RANDOM_RESIZED; /* seeds matter */
    s.transform.flip = 1;
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    const ShardBatch *b;
    size_t n = 0, same = 0;
    unsigned char *out = malloc(shard_transform_output_size(&s.transform));
    while (shard_loader_next(l, &b) == 0) {
        const ShardBatchField *jpg = &b->fields[0];
        cr_assert_str_eq(jpg->name, "jpg");
        for (size_t i = 0; i < b->size; i++, n++) {
            char msg[256];
            cr_assert_eq(shard_decode_transform(jpg->data + jpg->offsets[i],
                                                jpg->offsets[i + 1] - jpg->offsets[i],
                                                &s.transform, b->seeds[i], out, msg, sizeof msg),
                         0, "%s", msg);
            same += !memcmp(out, (const unsigned char *)b->images + i * b->image_bytes,
                            b->image_bytes);
        }
        shard_batch_release(l, b);
    }
    cr_assert_eq(n, NSAMPLES);
    cr_assert_eq(same, n, "%zu of %zu images redone alike", same, n);
    free(out);
    shard_loader_free(&l);
}
