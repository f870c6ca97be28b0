/* Allocation failures, dav1d's way: the reader and the loader run again and again, the
 * N-th allocation of libshard failing in run N, until a run meets no failure. Every run must
 * end in an error code or in success: no crash, no hang, and (under ASan) no leak or double
 * free on the failure paths. malloc, calloc, realloc, strdup and strndup are wrapped at
 * link time (-Wl,--wrap), so the library's calls (a static link) come here; libarchive's
 * and libc's own do not. Runs with the one-process harness of unit/tsan. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

#include "testjpeg.h"
#include "testshard.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static atomic_long calls, fail_at = -1;
static char last_error[SHARD_ERROR_MAX]; /* the failed run's message */

static int failing(void)
{
    long at = atomic_load(&fail_at);
    return at >= 0 && atomic_fetch_add(&calls, 1) == at;
}

void *__wrap_malloc(size_t n) { return failing() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return failing() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return failing() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return failing() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return failing() ? NULL : __real_strndup(s, n); }

static char *dir;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}
TestSuite(allocfail, .init = setup, .fini = teardown, .timeout = 600);

/* Runs fn with the n-th allocation failing, for n = 0, 1, ... until a run meets none;
 * returns how many allocation points were tried. */
static long sweep(int (*fn)(const char *), const char *arg)
{
    for (long n = 0;; n++) {
        atomic_store(&calls, 0);
        atomic_store(&fail_at, n);
        int rc = fn(arg);
        long made = atomic_load(&calls);
        atomic_store(&fail_at, -1);
        cr_assert(rc == 0 || rc < 0, "run %ld: %d", n, rc);
        if (rc) { /* a message that says something: set, printable */
            cr_assert(last_error[0], "run %ld: error %d without a message", n, rc);
            for (const char *p = last_error; *p; p++)
                cr_assert((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f,
                          "run %ld: a message with byte %#x: %s", n, (unsigned char)*p, last_error);
        }
        if (made <= n) { /* the failure was never reached: the whole run succeeded */
            cr_assert_eq(rc, 0, "run %ld failed without an injected failure", n);
            return n;
        }
    }
}

static int read_all(const char *manifest)
{
    const char *urls[] = {manifest};
    ShardReaderSettings s;
    shard_reader_default_settings(&s);
    s.urls = urls;
    s.nurls = 1;
    s.seed = 1;
    s.have_seed = 1;
    s.rank = 0;
    s.world_size = 1;
    s.streams = 2;
    s.queue_depth = 4;
    s.shuffle_buffer = 8;
    ShardReader *r;
    ShardError err;
    memset(&err, 0x7f, sizeof err); /* what an unset message would show */
    err.message[sizeof err.message - 1] = 0;
    int rc = shard_reader_open(&r, &s, &err);
    if (rc) {
        snprintf(last_error, sizeof last_error, "%s", err.message);
        return rc;
    }
    const char *key, *url;
    const ShardFieldView *f;
    size_t nf;
    while ((rc = shard_reader_next(r, &key, &url, &f, &nf)) == 0)
        ;
    snprintf(last_error, sizeof last_error, "%s", shard_reader_error(r));
    shard_reader_free(&r);
    return rc == SHARD_EOS ? 0 : rc;
}

static int load_all(const char *manifest)
{
    const char *urls[] = {manifest};
    ShardLoaderSettings s;
    shard_loader_default_settings(&s);
    s.reader.urls = urls;
    s.reader.nurls = 1;
    s.reader.seed = 1;
    s.reader.have_seed = 1;
    s.reader.rank = 0;
    s.reader.world_size = 1;
    s.reader.streams = 2;
    s.reader.queue_depth = 4;
    s.batch_size = 4;
    s.threads = 2;
    s.transform.width = 16;
    s.transform.height = 16;
    ShardLoader *l;
    ShardError err;
    memset(&err, 0x7f, sizeof err);
    err.message[sizeof err.message - 1] = 0;
    int rc = shard_loader_open(&l, &s, &err);
    if (rc) {
        snprintf(last_error, sizeof last_error, "%s", err.message);
        return rc;
    }
    const ShardBatch *b;
    while ((rc = shard_loader_next(l, &b)) == 0)
        shard_batch_release(l, b);
    snprintf(last_error, sizeof last_error, "%s", shard_loader_error(l));
    shard_loader_free(&l);
    return rc == SHARD_EOS ? 0 : rc;
}

static void coloured(int x, int y, int w, int h, int seed, unsigned char rgb[3])
{
    rgb[0] = (unsigned char)(x * 255 / w);
    rgb[1] = (unsigned char)(y * 255 / h);
    rgb[2] = (unsigned char)(seed * 37);
}

/* 24 samples (jpg, cls) in shards of 5, with a manifest. */
static char *make_shards(void)
{
    TuSet t;
    tu_set_open(&t, dir, "a", ".tar", 5);
    for (int i = 0; i < 24; i++) {
        char key[16], cls[8];
        snprintf(key, sizeof key, "k%03d", i);
        snprintf(cls, sizeof cls, "%d", i % 3);
        unsigned long size;
        unsigned char *img = tu_jpeg(20 + i % 5, 18, coloured, i, &size);
        ShardField f[] = {{"jpg", img, size}, {"cls", cls, strlen(cls)}};
        tu_set_add(&t, key, f, 2);
        free(img);
    }
    return tu_set_finish(&t);
}

Test(allocfail, the_reader_survives_every_failed_allocation)
{
    char *m = make_shards();
    long points = sweep(read_all, m);
    cr_assert_gt(points, 50, "only %ld allocations: is the wrapping in place?", points);
    printf("allocfail: reader: %ld allocation points, each failed once\n", points);
    free(m);
}

Test(allocfail, the_loader_survives_every_failed_allocation)
{
    char *m = make_shards();
    long points = sweep(load_all, m);
    cr_assert_gt(points, 50, "only %ld allocations: is the wrapping in place?", points);
    printf("allocfail: loader: %ld allocation points, each failed once\n", points);
    free(m);
}
