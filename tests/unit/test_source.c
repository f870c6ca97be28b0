/* Sources (libshard/src/source.h): the memory source driving the tar reader, sources that
 * hand out a few bytes at a time, random access across zstd frames without a mapping, the
 * file and pipe sources' errors, owned items outliving their shard, and the index parser's
 * bounds. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

#include "base/error.h"
#include "source/memory.h"
#include "source/open.h"
#include "tar/idx.h"
#include "tar/item.h"
#include "tar/shardfile.h"
#include "testshard.h"
#include "testutil.h"

static char *dir;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}
TestSuite(source, .init = setup, .fini = teardown, .timeout = 60);

/* A digest of every sample f yields, in order: keys, field names and bytes. */
static uint64_t digest(ShardFile *f, int *count)
{
    uint64_t h = 1469598103934665603ull;
    const ShardSampleView *v;
    int rc;
    *count = 0;
    while ((rc = shard_file_next(f, &v)) == 0) {
        for (const char *p = v->key; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        for (size_t k = 0; k < v->nfields; k++) {
            for (const char *p = v->fields[k].name; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ull;
            for (uint64_t i = 0; i < v->fields[k].size; i++)
                h = (h ^ v->fields[k].data[i]) * 1099511628211ull;
        }
        (*count)++;
    }
    cr_assert_eq(rc, SHARD_EOS, "%s", shard_file_error(f));
    return h;
}

static uint64_t digest_url(const char *url, int *count)
{
    ShardFile *f;
    ShardError err;
    cr_assert_eq(shard_file_open(&f, url, NULL, &err), 0, "%s", err.message);
    uint64_t h = digest(f, count);
    shard_file_free(&f);
    return h;
}

Test(source, memory_source_drives_the_tar_reader)
{
    const char *names[] = {"m-%06d.tar", "n-%06d.tar.zst"};
    for (int z = 0; z < 2; z++) {
        char *path = tu_write_shard(dir, names[z], 50, 3000);
        int n1, n2;
        uint64_t want = digest_url(path, &n1);
        size_t size;
        unsigned char *bytes = tu_read(path, &size);
        ShardFile *f;
        ShardError err;
        cr_assert_eq(shard_file_open_memory(&f, bytes, size, "in-memory", NULL, &err), 0, "%s",
                     err.message);
        cr_assert_str_eq(shard_file_compression(f), z ? "zstd" : "none");
        cr_assert_eq(shard_file_size(f), (int64_t)size);
        cr_assert_eq(shard_file_count(f), -1, "a buffer has no index beside it");
        cr_assert_eq(digest(f, &n2), want);
        cr_assert_eq(n1, 50);
        cr_assert_eq(n2, 50);
        shard_file_free(&f);

        /* With an index named, a memory shard seeks like a local one. */
        ShardFileSettings s;
        shard_file_default_settings(&s);
        char *ip = shard_index_path(path);
        s.index = ip;
        cr_assert_eq(shard_file_open_memory(&f, bytes, size, NULL, &s, &err), 0, "%s", err.message);
        cr_assert_eq(shard_file_seek(f, 33), 0, "%s", shard_file_error(f));
        const ShardSampleView *v;
        cr_assert_eq(shard_file_next(f, &v), 0, "%s", shard_file_error(f));
        cr_assert_str_eq(v->key, "d1/s00033");
        cr_assert_str_eq(v->url, "memory");
        shard_file_free(&f);
        free(ip);
        free(bytes);
        free(path);
    }
}

Test(source, a_garbage_buffer_is_a_clear_error)
{
    unsigned char junk[1500];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 37 + 11);
    ShardFile *f;
    ShardError err;
    cr_assert_eq(shard_file_open_memory(&f, junk, sizeof junk, "junk.tar", NULL, &err),
                 SHARD_ERR_FORMAT);
    cr_assert_null(f);
    cr_assert(strstr(err.message, "junk.tar: offset 0: not a tar archive"), "%s", err.message);
    cr_assert_eq(shard_file_open_memory(&f, junk, 0, "empty.tar", NULL, &err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err.message, "empty.tar"), "%s", err.message);
}

/* A source over a buffer that hands out at most `step` bytes per read, never a mapping,
 * with random access through read_at only: how a network stream looks to the readers. */
typedef struct Trickle {
    const unsigned char *data;
    size_t size, pos, step;
    unsigned reads_at;
    size_t fail_at; /* fault injection: a read that reaches this offset fails (0: none) */
} Trickle;

static ssize_t trickle_read(ShardSource *s, const void **block)
{
    Trickle *t = s->impl;
    if (t->fail_at && t->pos + t->step >= t->fail_at)
        return shard_fail(s->err, SHARD_ERR_IO, "%s: offset %llu: read failed: injected", s->url,
                          (unsigned long long)t->pos);
    size_t n = t->size - t->pos < t->step ? t->size - t->pos : t->step;
    *block = t->data + t->pos;
    t->pos += n;
    t->step = t->step % 7 + 1; /* 1..7 bytes, varying */
    return (ssize_t)n;
}

static int trickle_read_at(ShardSource *s, uint64_t off, void *buf, size_t n)
{
    Trickle *t = s->impl;
    t->reads_at++;
    if (t->fail_at && off + n >= t->fail_at)
        return shard_fail(s->err, SHARD_ERR_IO, "%s: offset %llu: read failed: injected", s->url,
                          (unsigned long long)off);
    memcpy(buf, t->data + off, n);
    return 0;
}

static const ShardSourceOps trickle_ops = {
    .kind = "trickle",
    .read = trickle_read,
    .read_at = trickle_read_at,
};

static ShardSource *trickle(Trickle *t, const char *name)
{
    ShardSource *s = shard_source_new(&trickle_ops, name);
    cr_assert_not_null(s);
    s->impl = t;
    s->size = (int64_t)t->size;
    return s;
}

Test(source, short_reads_give_the_same_samples)
{
    const char *names[] = {"t-%06d.tar", "u-%06d.tar.zst"};
    for (int z = 0; z < 2; z++) {
        char *path = tu_write_shard(dir, names[z], 40, 2500);
        int n1, n2;
        uint64_t want = digest_url(path, &n1);
        size_t size;
        unsigned char *bytes = tu_read(path, &size);
        Trickle t = {bytes, size, 0, 1, 0, 0};
        ShardFileSettings s;
        shard_file_default_settings(&s);
        s.load_index = 0;
        ShardFile *f;
        ShardError err;
        cr_assert_eq(shard_file_open_source(&f, trickle(&t, path), &s, &err), 0, "%s", err.message);
        cr_assert_eq(digest(f, &n2), want);
        cr_assert_eq(n2, 40);
        cr_assert_eq(t.pos, size, "the whole stream was read");
        /* Owned items copy what no hold keeps: they outlive the shard and the buffer's
         * contents. */
        shard_file_free(&f);
        t.pos = 0;
        cr_assert_eq(shard_file_open_source(&f, trickle(&t, path), &s, &err), 0, "%s", err.message);
        ShardItem *it;
        cr_assert_eq(shard_file_take(f, &it), 0, "%s", shard_file_error(f));
        shard_file_free(&f);
        memset(bytes, 0, size);
        const ShardSampleView *v = shard_item_sample(it);
        cr_assert_str_eq(v->key, "d0/s00000");
        cr_assert_eq(v->nfields, 2);
        cr_assert_eq(v->fields[1].size, 50);
        cr_assert_eq(memcmp(v->fields[1].data, "ABCDEFGHIJ", 10), 0);
        shard_item_free(&it);
        cr_assert_null(it);
        free(bytes);
        free(path);
    }
}

/* The keys of f's samples until its end or its first error, which *rc receives. */
static int keys_until_error(ShardFile *f, char keys[][16], int max, int *rc)
{
    const ShardSampleView *v;
    int n = 0;
    while (n < max && (*rc = shard_file_next(f, &v)) == 0)
        snprintf(keys[n++], 16, "%s", v->key + 3);
    return n;
}

Test(source, an_injected_read_failure_is_an_error_after_whole_samples_only)
{
    const char *names[] = {"f-%06d.tar", "g-%06d.tar.zst"};
    for (int z = 0; z < 2; z++) {
        char *path = tu_write_shard(dir, names[z], 40, 2500);
        size_t size;
        unsigned char *bytes = tu_read(path, &size);
        char all[64][16];
        int rc;
        ShardFile *f;
        ShardError err;
        cr_assert_eq(shard_file_open(&f, path, NULL, &err), 0, "%s", err.message);
        int n = keys_until_error(f, all, 64, &rc);
        shard_file_free(&f);
        cr_assert_eq(n, 40);
        /* a failure at a sweep of offsets: before it, a prefix of the samples, each whole;
         * then an error naming the shard and the offset */
        for (size_t at = 700; at < size; at += size / 23) {
            Trickle t = {bytes, size, 0, 1, 0, at};
            ShardFileSettings s;
            shard_file_default_settings(&s);
            s.load_index = 0;
            int orc = shard_file_open_source(&f, trickle(&t, path), &s, &err);
            if (orc) { /* failed before the first header */
                cr_assert(strstr(err.message, "injected"), "%s", err.message);
                continue;
            }
            char got[64][16];
            int k = keys_until_error(f, got, 64, &rc);
            cr_assert_lt(k, 40, "the failure at %zu went unnoticed", at);
            cr_assert_neq(rc, SHARD_EOS, "at %zu: the end instead of the error", at);
            for (int i = 0; i < k; i++)
                cr_assert_str_eq(got[i], all[i], "at %zu: sample %d", at, i);
            cr_assert(strstr(shard_file_error(f), "injected") &&
                          strstr(shard_file_error(f), names[z][0] == 'f' ? "f-000000" : "g-000000"),
                      "%s", shard_file_error(f));
            shard_file_free(&f);
        }
        free(bytes);
        free(path);
    }
}

Test(source, read_at_across_frames_without_a_mapping)
{
    /* frames of 1 KiB, members up to 3 KiB: most members span several frames */
    char *path = tu_write_shard(dir, "z-%06d.tar.zst", 60, 1024);
    ShardFile *ref;
    ShardError err;
    cr_assert_eq(shard_file_open(&ref, path, NULL, &err), 0, "%s", err.message);
    size_t size;
    unsigned char *bytes = tu_read(path, &size);
    Trickle t = {bytes, size, 0, 1, 0, 0};
    ShardFileSettings s;
    shard_file_default_settings(&s);
    char *ip = shard_index_path(path);
    s.index = ip;
    ShardFile *f;
    cr_assert_eq(shard_file_open_source(&f, trickle(&t, path), &s, &err), 0, "%s", err.message);
    cr_assert_eq(shard_file_count(f), 60);
    /* the index was proven at open (the first and last samples' frames read): 17 first */
    uint64_t order[] = {17, 0, 59, 16, 42, 3, 58};
    for (size_t q = 0; q < sizeof order / sizeof *order; q++) {
        const ShardSampleView *a, *b;
        cr_assert_eq(shard_file_seek(ref, order[q]), 0);
        cr_assert_eq(shard_file_next(ref, &a), 0, "%s", shard_file_error(ref));
        cr_assert_eq(shard_file_seek(f, order[q]), 0, "%s", shard_file_error(f));
        unsigned before = t.reads_at;
        cr_assert_eq(shard_file_next(f, &b), 0, "%s", shard_file_error(f));
        cr_assert_gt(t.reads_at, before, "frames are read through read_at");
        cr_assert_str_eq(a->key, b->key);
        cr_assert_eq(a->nfields, b->nfields);
        for (size_t k = 0; k < a->nfields; k++) {
            cr_assert_eq(a->fields[k].size, b->fields[k].size);
            cr_assert_eq(a->fields[k].offset, b->fields[k].offset);
            cr_assert_eq(memcmp(a->fields[k].data, b->fields[k].data, a->fields[k].size), 0);
        }
    }
    shard_file_free(&f);
    shard_file_free(&ref);
    free(ip);
    free(bytes);
    free(path);
}

Test(source, file_and_pipe_errors_name_the_url)
{
    ShardSource *s;
    char err[SHARD_ERROR_MAX];
    char *missing = tu_path(dir, "nope.tar");
    cr_assert_eq(shard_source_open(&s, missing, NULL, 0, err), SHARD_ERR_NOT_FOUND);
    cr_assert(strstr(err, missing) && strstr(err, "cannot open"), "%s", err);
    cr_assert_eq(shard_source_open(&s, dir, NULL, 0, err), SHARD_ERR_IO);
    cr_assert(strstr(err, "not a regular file"), "%s", err);

    cr_assert_eq(shard_source_open(&s, "pipe:printf abc; exit 3", NULL, 0, err), 0, "%s", err);
    cr_assert_eq(s->size, -1);
    cr_assert(!shard_source_seekable(s));
    const void *block;
    char got[8] = {0};
    size_t n = 0;
    ssize_t k;
    while ((k = shard_source_read(s, &block)) > 0) {
        memcpy(got + n, block, (size_t)k);
        n += (size_t)k;
    }
    cr_assert_eq(k, 0);
    cr_assert_str_eq(got, "abc");
    cr_assert_eq(shard_source_finish(s), SHARD_ERR_IO, "the command's status is checked");
    cr_assert(strstr(s->err, "pipe:printf abc; exit 3: the command failed (status 3)"), "%s",
              s->err);
    char buf[4];
    cr_assert_eq(shard_source_read_at(s, 0, buf, 2), SHARD_ERR_UNSUPPORTED);
    shard_source_put(s);
    free(missing);
}

Test(source, read_at_checks_the_range)
{
    char data[100] = {0};
    ShardSource *s;
    char err[SHARD_ERROR_MAX];
    cr_assert_eq(shard_source_memory(&s, data, sizeof data, "buf", err), 0);
    char out[16];
    cr_assert_eq(shard_source_read_at(s, 90, out, 10), 0);
    cr_assert_eq(shard_source_read_at(s, 91, out, 10), SHARD_ERR_FORMAT);
    cr_assert(strstr(s->err, "buf: bytes 91..101 lie past the end"), "%s", s->err);
    cr_assert_eq(shard_source_read_at(s, UINT64_MAX - 2, out, 10), SHARD_ERR_FORMAT);
    shard_source_put(s);
}

static int parse_text(const char *text, ShardIndex *idx, char *err)
{
    char *copy = strdup(text);
    return shard_index_parse(idx, copy, strlen(text), "x.idx", NULL, err);
}

Test(source, index_counts_are_checked_before_they_size_anything)
{
    ShardIndex idx;
    char err[SHARD_ERROR_MAX];
    /* (n + 1) * 8 and n * 3 + 16 wrap around for these: refused before any allocation */
    const char *lies[] = {"v1.2 2305843009213693951\njpg 512 10 a.jpg\n",
                          "v1.1 6148914691236517205\njpg 512 10\n",
                          "v1.2 18446744073709551615\n", /* no u64 */
                          "v1.2 1000\njpg 512 10 a.jpg\n"};
    for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
        cr_assert_eq(parse_text(lies[i], &idx, err), SHARD_ERR_FORMAT, "%s", lies[i]);
        cr_assert(strstr(err, "x.idx: line 1: "), "%s", err);
    }
    cr_assert_eq(parse_text("v1.2 2\njpg 512 10 a.jpg\n", &idx, err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err, "x.idx: line 3: the header promises 2 samples, the file ends after 1"),
              "%s", err);
    cr_assert_eq(parse_text("v1.2 1\njpg 512 10 a.jpg cls 1536 1 a.cls\n", &idx, err), 0, "%s", err);
    cr_assert_eq(idx.nsamples, 1);
    cr_assert_eq(idx.nentries, 2);
    shard_index_clear(&idx);
    cr_assert_eq(shard_index_header_count("v1.2 77\n", 8), 77);
    cr_assert_eq(shard_index_header_count("v9 77\n", 6), -1);
}

Test(source, a_lying_index_beside_a_shard_is_an_error_not_an_overflow)
{
    char *path = tu_write_shard(dir, "i-%06d.tar", 5, 0);
    char *ip = shard_index_path(path);
    FILE *f = fopen(ip, "w");
    fputs("v1.2 2305843009213693951\ntxt 512 10 d0/s00000.txt\n", f);
    fclose(f);
    ShardFile *sf;
    ShardError err;
    cr_assert_eq(shard_file_open(&sf, path, NULL, &err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err.message, ip) && strstr(err.message, "promises"), "%s", err.message);
    /* offsets past the end of the shard (as of a shard cut short): the members before the
     * one listed are read as the index is proven, and the first is one it leaves out */
    f = fopen(ip, "w");
    fputs("v1.2 1\ntxt 99999999488 10 d0/s00000.txt\n", f);
    fclose(f);
    cr_assert_eq(shard_file_open(&sf, path, NULL, &err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err.message, path) && strstr(err.message, "offset 0") &&
                  strstr(err.message, "the index leaves it out"),
              "%s", err.message);
    free(ip);
    free(path);
}

/* Bytes read from a local shard to its end, headers only or whole. */
static uint64_t bytes_read(const char *url, int headers_only)
{
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.headers_only = headers_only;
    fs.load_index = 0;
    ShardFile *f;
    ShardError err;
    cr_assert_eq(shard_file_open(&f, url, &fs, &err), 0, "%s", err.message);
    const ShardSampleView *v;
    int rc, n = 0;
    while ((rc = shard_file_next(f, &v)) == 0)
        n++;
    cr_assert_eq(rc, SHARD_EOS, "%s", shard_file_error(f));
    cr_assert_eq(n, 40);
    ShardReadCost c;
    shard_file_cost(f, &c);
    shard_file_free(&f);
    return c.read_bytes;
}

/* A listing seeks over member data as bsdtar does: 40 samples of 128 KiB fields leave most
 * of a 5 MiB shard unread, where reading them whole reads it all (the control). */
Test(source, a_listing_seeks_over_member_data)
{
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "l.tar");
    ShardWriterSettings ws;
    shard_writer_default_settings(&ws);
    ws.pattern = path;
    ws.sync = 0;
    ws.maxcount = 0;
    ws.maxsize = 0;
    ShardWriter *w;
    ShardError err;
    cr_assert_eq(shard_writer_open(&w, &ws, &err), 0, "%s", err.message);
    static unsigned char big[128 << 10];
    for (int i = 0; i < 40; i++) {
        char key[16];
        snprintf(key, sizeof key, "s%03d", i);
        memset(big, i, sizeof big);
        ShardField f[] = {{"bin", big, sizeof big}, {"cls", "1", 1}};
        ShardSample smp = {key, f, 2};
        cr_assert_eq(shard_writer_add(w, &smp), 0, "%s", shard_writer_error(w));
    }
    cr_assert_eq(shard_writer_finish(w), 0);
    shard_writer_free(&w);
    size_t size;
    free(tu_read(path, &size));
    uint64_t whole = bytes_read(path, 0), listed = bytes_read(path, 1);
    cr_assert_geq(whole, size - 1024, "the control reads the shard (%llu of %llu)",
                  (unsigned long long)whole, (unsigned long long)size);
    cr_assert_lt(listed, size / 4, "a listing read %llu of %llu bytes", (unsigned long long)listed,
                 (unsigned long long)size);
    free(path);
    tu_rmtree(dir);
    free(dir);
}
