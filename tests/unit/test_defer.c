/* The loader's hook for a later decoder (load/defer.h), without a GPU: a stand-in taker
 * that leaves samples undecoded, in every mix a batch can have (none, some, all), with
 * skip_errors, and installed while the loader has made batches ahead. What the GPU's JPEG
 * stage relies on: the order and the batches are the same, every sample is asked once, the
 * taken ones' bytes come with the batch, and nothing waits for a decode that never comes. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

#include "decode/jpegkind.h"
#include "load/defer.h"
#include "testloader.h"

#define NSAMPLES 90

static char *dir, *manifest;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
    free(manifest);
    manifest = NULL;
}
TestSuite(defer, .init = setup, .fini = teardown, .timeout = 120);

/* NSAMPLES samples (jpg, cls = i % 5) in shards of 16; sample 13's jpg cut short when
 * damage. */
static const char *make_shards(int damage)
{
    return manifest = tu_jpeg_shards(dir, "d", NSAMPLES, damage, 0);
}

static void settings(ShardLoaderSettings *s, const char **urls)
{
    tu_loader_settings(s, urls);
    s->transform.fast = 0;
}

/* The stand-in: takes samples by a rule, counting what it was asked. */
typedef struct Taker {
    int every;         /* takes one sample in every (1: all; 0: none) */
    atomic_int asked, taken;
} Taker;

static int take(void *ctx, const unsigned char *data, size_t size)
{
    Taker *t = ctx;
    int n = atomic_fetch_add(&t->asked, 1), w, h;
    /* as the GPU's stage: a JPEG cut short stays with the CPU, which names what is wrong */
    int yes = t->every && n % t->every == 0 &&
              shard_jpeg_kind(data, size, 0, &w, &h) == SHARD_JPEG_GPU_OK;
    if (yes)
        atomic_fetch_add(&t->taken, 1);
    return yes ? 0 : 7; /* 0: taken; else the taker's reason, given back with the batch */
}

/* The keys of a whole epoch without a hook, and their number. */
static int plain_keys(const ShardLoaderSettings *s, char keys[][8])
{
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, s, &err), 0, "%s", err.message);
    const ShardBatch *b;
    int n = 0;
    while (shard_loader_next(l, &b) == 0) {
        for (size_t i = 0; i < b->size; i++)
            snprintf(keys[n++], 8, "%s", b->keys[i]);
        shard_batch_release(l, b);
    }
    shard_loader_free(&l);
    return n;
}

/* One batch against the taker's promises; *at: the epoch's position. */
static void check_batch(const ShardBatch *b, char keys[][8], int *at, size_t *taken)
{
    size_t g = 0;
    for (size_t i = 0; i < b->size; i++) {
        cr_assert_str_eq(b->keys[i], keys[*at + (int)i], "the order is the hook-less one");
        int k = atoi(b->keys[i] + 1);
        cr_assert_eq(b->labels[i], k % 5);
        int is_taken = g < b->gpu_count && b->gpu_index[g] == i;
        cr_assert(b->gpu_why || !b->gpu_count, "a batch the taker saw has its word");
        if (b->gpu_why)
            cr_assert_eq(b->gpu_why[i], is_taken ? 0 : 7, "sample %d: the taker's word", k);
        if (is_taken) {
            /* taken: its JPEG's bytes, exactly */
            unsigned long size;
            unsigned char *want = tu_sample_jpeg(k, &size);
            cr_assert_eq(b->gpu_size[g], size, "sample %d", k);
            cr_assert_eq(memcmp(b->gpu_data[g], want, size), 0, "sample %d's bytes", k);
            free(want);
            g++;
        } else { /* decoded here: the red channel carries the sample's colour */
            const unsigned char *img = (const unsigned char *)b->images + i * b->image_bytes;
            cr_assert_leq(abs(img[0] - ((k * 37) & 255)), 6, "sample %d decoded", k);
        }
    }
    cr_assert_eq(g, b->gpu_count, "gpu_index is in batch order, within the batch");
    *at += (int)b->size;
    *taken += g;
}

static void epoch_with(int every)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    static char keys[NSAMPLES][8];
    cr_assert_eq(plain_keys(&s, keys), NSAMPLES);
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    Taker t = {.every = every};
    shard_loader_defer_from_here(l, &(ShardDefer){take, &t});
    const ShardBatch *b;
    int at = 0, rc;
    size_t taken = 0;
    while ((rc = shard_loader_next(l, &b)) == 0) {
        cr_assert_not_null(b->gpu_why, "every batch made after the hook");
        check_batch(b, keys, &at, &taken);
        shard_batch_release(l, b);
    }
    cr_assert_eq(rc, SHARD_EOS, "%s", shard_loader_error(l));
    cr_assert_eq(at, NSAMPLES);
    /* asked once per sample: the batches made before the hook were made again, not kept;
     * the producer goes on into the next epoch meanwhile (at most its slots' worth) */
    int asked = atomic_load(&t.asked), ahead = (int)((s.batches + 1) * s.batch_size);
    cr_assert(asked >= NSAMPLES && asked <= NSAMPLES + ahead, "asked %d", asked);
    cr_assert_leq(taken, (size_t)atomic_load(&t.taken));
    shard_loader_defer(l, NULL);
    shard_loader_free(&l);
}

Test(defer, none_taken) { epoch_with(0); }
Test(defer, some_taken_every_batch_mixed) { epoch_with(3); }
Test(defer, all_taken_no_batch_waits_for_the_cpu) { epoch_with(1); }

Test(defer, set_mid_epoch_the_order_goes_on_where_it_stood)
{
    const char *urls[] = {make_shards(0)};
    ShardLoaderSettings s;
    settings(&s, urls);
    static char keys[NSAMPLES][8];
    cr_assert_eq(plain_keys(&s, keys), NSAMPLES);
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    const ShardBatch *b, *held;
    int at = 0;
    size_t taken = 0;
    cr_assert_eq(shard_loader_next(l, &b), 0);
    check_batch(b, keys, &at, &taken);
    shard_batch_release(l, b);
    cr_assert_eq(shard_loader_next(l, &held), 0); /* held across the change */
    check_batch(held, keys, &at, &taken);
    Taker t = {.every = 2};
    shard_loader_defer_from_here(l, &(ShardDefer){take, &t});
    int rc;
    while ((rc = shard_loader_next(l, &b)) == 0) {
        check_batch(b, keys, &at, &taken);
        shard_batch_release(l, b);
    }
    cr_assert_eq(rc, SHARD_EOS, "%s", shard_loader_error(l));
    cr_assert_eq(at, NSAMPLES);
    int asked = atomic_load(&t.asked), ahead = (int)((s.batches + 1) * s.batch_size);
    cr_assert(asked >= NSAMPLES - 16 && asked <= NSAMPLES - 16 + ahead,
              "the rest, each once (and what the producer read ahead): %d", asked);
    cr_assert_str_eq(held->keys[0], keys[8], "a held batch stays as it was");
    shard_batch_release(l, held);
    shard_loader_free(&l);
}

Test(defer, a_skipped_samples_place_filled_from_a_taken_one_is_taken_too)
{
    const char *urls[] = {make_shards(1)};
    ShardLoaderSettings s;
    settings(&s, urls);
    s.reader.skip_errors = 1;
    ShardLoader *l;
    ShardError err;
    cr_assert_eq(shard_loader_open(&l, &s, &err), 0, "%s", err.message);
    /* the damaged sample stays on the CPU (a JPEG with no end is not taken), the others
     * all go to the taker: the repeat in its place must be a taken one */
    Taker t = {.every = 1};
    shard_loader_defer_from_here(l, &(ShardDefer){take, &t});
    const ShardBatch *b;
    int rc, repeats = 0;
    size_t n = 0;
    while ((rc = shard_loader_next(l, &b)) == 0) {
        for (size_t i = 0; i < b->size; i++) {
            if (!b->repeats[i])
                continue;
            repeats++;
            int taken = 0;
            for (size_t g = 0; g < b->gpu_count; g++)
                taken |= b->gpu_index[g] == i;
            cr_assert(taken, "the repeat of %s is left for the taker, as its source is",
                      b->keys[i]);
        }
        n += b->size;
        shard_batch_release(l, b);
    }
    cr_assert_eq(rc, SHARD_EOS, "%s", shard_loader_error(l));
    cr_assert_eq(n, NSAMPLES);
    cr_assert_eq(repeats, 1);
    cr_assert_eq(shard_loader_skipped(l), 1);
    shard_loader_free(&l);
}
