#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>
#include <shard/shard.h>

#include "testshard.h"
#include "testutil.h"

static char *dir;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}
TestSuite(file, .init = setup, .fini = teardown, .timeout = 60);

typedef struct Seen {
    char key[64];
    size_t nfields;
    uint64_t size[4];
    unsigned char first[4];
    uint64_t offset[4];
} Seen;

static int read_all(const char *url, Seen *out, int max, int check_views)
{
    ShardFile *f;
    ShardError err;
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.map = check_views; /* views into the mapping only when asked for */
    cr_assert_eq(shard_file_open(&f, url, &fs, &err), 0, "%s", err.message);
    const ShardSampleView *v;
    int n = 0, rc;
    const unsigned char *prev = NULL;
    uint64_t prev_off = 0;
    while ((rc = shard_file_next(f, &v)) == 0) {
        cr_assert_lt(n, max);
        cr_assert_eq(v->index, (uint64_t)n);
        snprintf(out[n].key, sizeof out[n].key, "%s", v->key);
        out[n].nfields = v->nfields;
        for (size_t k = 0; k < v->nfields && k < 4; k++) {
            out[n].size[k] = v->fields[k].size;
            out[n].first[k] = v->fields[k].size ? v->fields[k].data[0] : 0;
            out[n].offset[k] = v->fields[k].offset;
            /* Zero copy: in a plain local tar, data pointers are as far apart as offsets. */
            if (check_views && prev)
                cr_assert_eq((uint64_t)(v->fields[k].data - prev), v->fields[k].offset - prev_off);
            prev = v->fields[k].data;
            prev_off = v->fields[k].offset;
        }
        n++;
    }
    cr_assert_eq(rc, SHARD_EOS, "%s", shard_file_error(f));
    cr_assert_eq(shard_file_next(f, &v), SHARD_EOS, "stays at the end");
    shard_file_free(&f);
    return n;
}

Test(file, sequential_tar_is_zero_copy_and_matches_the_index)
{
    char *path = tu_write_shard(dir, "a-%06d.tar", 40, 0);
    Seen s[64];
    cr_assert_eq(read_all(path, s, 64, 1), 40);
    cr_assert_str_eq(s[7].key, "d3/s00007");
    cr_assert_eq(s[7].nfields, 2);
    cr_assert_eq(s[7].size[1], 50 + (7 * 131) % 3000, "fields in tar order: cls, txt");
    cr_assert_eq(s[7].first[1], 'A' + 7);
    free(path);
}

/* A listing's read: the same samples, sizes and offsets as reading them whole, no data,
 * and (from a local .tar) far fewer bytes read than the shard holds. */
Test(file, headers_only_lists_without_reading_the_data)
{
    const char *names[] = {"h-%06d.tar", "i-%06d.tar.zst"};
    for (int z = 0; z < 2; z++) {
        char *path = tu_write_shard(dir, names[z], 60, 20000);
        Seen s[64];
        cr_assert_eq(read_all(path, s, 64, 0), 60);
        ShardFileSettings fs;
        shard_file_default_settings(&fs);
        fs.headers_only = 1;
        fs.load_index = 0;
        ShardFile *f;
        ShardError err;
        cr_assert_eq(shard_file_open(&f, path, &fs, &err), 0, "%s", err.message);
        const ShardSampleView *v;
        int n = 0, rc;
        while ((rc = shard_file_next(f, &v)) == 0) {
            cr_assert_str_eq(v->key, s[n].key);
            cr_assert_eq(v->nfields, s[n].nfields);
            for (size_t k = 0; k < v->nfields; k++) {
                cr_assert_null(v->fields[k].data);
                cr_assert_eq(v->fields[k].size, s[n].size[k]);
                cr_assert_eq(v->fields[k].offset, s[n].offset[k]);
            }
            n++;
        }
        cr_assert_eq(rc, SHARD_EOS, "%s", shard_file_error(f));
        cr_assert_eq(n, 60);
        shard_file_free(&f);
        /* an owned sample of a listing has no data either */
        cr_assert_eq(shard_file_open(&f, path, &fs, &err), 0, "%s", err.message);
        ShardItem *it;
        cr_assert_eq(shard_file_take(f, &it), 0, "%s", shard_file_error(f));
        const ShardSampleView *iv = shard_item_sample(it);
        cr_assert_str_eq(iv->key, s[0].key);
        cr_assert_null(iv->fields[0].data);
        cr_assert_eq(iv->fields[0].size, s[0].size[0]);
        shard_item_free(&it);
        shard_file_free(&f);
        free(path);
    }
}

Test(file, seek_by_index_tar_and_zst)
{
    const char *names[] = {"b-%06d.tar", "c-%06d.tar.zst"};
    for (int z = 0; z < 2; z++) {
        char *path = tu_write_shard(dir, names[z], 60, 2000);
        Seen s[64];
        cr_assert_eq(read_all(path, s, 64, 0), 60);
        ShardFile *f;
        ShardError err;
        cr_assert_eq(shard_file_open(&f, path, NULL, &err), 0, "%s", err.message);
        cr_assert_eq(shard_file_count(f), 60);
        cr_assert_str_eq(shard_file_compression(f), z ? "zstd" : "none");
        uint64_t order[] = {59, 0, 31, 30, 7, 58};
        for (size_t q = 0; q < 6; q++) {
            uint64_t i = order[q];
            cr_assert_eq(shard_file_seek(f, i), 0, "%s", shard_file_error(f));
            const ShardSampleView *v;
            cr_assert_eq(shard_file_next(f, &v), 0, "%s", shard_file_error(f));
            cr_assert_eq(v->index, i);
            cr_assert_str_eq(v->key, s[i].key);
            cr_assert_eq(v->nfields, s[i].nfields);
            for (size_t k = 0; k < v->nfields; k++) {
                cr_assert_eq(v->fields[k].size, s[i].size[k]);
                cr_assert_eq(v->fields[k].offset, s[i].offset[k]);
                cr_assert_eq(v->fields[k].data[0], s[i].first[k]);
            }
            if (i + 1 < 60) { /* reading on after a seek continues in order */
                cr_assert_eq(shard_file_next(f, &v), 0);
                cr_assert_str_eq(v->key, s[i + 1].key);
            }
        }
        cr_assert_eq(shard_file_seek(f, 60), SHARD_ERR_NOT_FOUND);
        shard_file_free(&f);
        free(path);
    }
}

Test(file, seek_needs_an_index)
{
    char *path = tu_write_shard(dir, "e-%06d.tar", 3, 0);
    char *idx = tu_path(dir, "e-000000.idx");
    cr_assert_eq(unlink(idx), 0);
    ShardFile *f;
    ShardError err;
    cr_assert_eq(shard_file_open(&f, path, NULL, &err), 0);
    cr_assert_eq(shard_file_count(f), -1);
    cr_assert_eq(shard_file_seek(f, 1), SHARD_ERR_UNSUPPORTED);
    cr_assert(strstr(shard_file_error(f), "shardcat index"), "%s", shard_file_error(f));
    shard_file_free(&f);
    uint64_t n = 0;
    cr_assert_eq(shard_index_build(path, NULL, &n, &err), 0, "%s", err.message);
    cr_assert_eq(n, 3);
    cr_assert_eq(shard_file_open(&f, path, NULL, &err), 0);
    cr_assert_eq(shard_file_seek(f, 2), 0);
    shard_file_free(&f);
    free(idx);
    free(path);
}

Test(file, pipe_source)
{
    char *path = tu_write_shard(dir, "p-%06d.tar.zst", 12, 0);
    char url[8192];
    snprintf(url, sizeof url, "pipe:cat '%s'", path);
    Seen s[16];
    cr_assert_eq(read_all(url, s, 16, 0), 12);
    snprintf(url, sizeof url, "pipe:cat '%s'; exit 3", path);
    ShardFile *f;
    ShardError err;
    cr_assert_eq(shard_file_open(&f, url, NULL, &err), 0);
    const ShardSampleView *v;
    int rc;
    while ((rc = shard_file_next(f, &v)) == 0)
        ;
    cr_assert_eq(rc, SHARD_ERR_IO, "a failing command is an error, not a short shard");
    cr_assert(strstr(shard_file_error(f), "status 3"), "%s", shard_file_error(f));
    shard_file_free(&f);
    free(path);
}

/* A raw tar with the members in the given order. */
static char *raw_tar(const char *name, const char *const *members, int n)
{
    char *path = tu_path(dir, name);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    cr_assert_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    for (int i = 0; i < n; i++) {
        archive_entry_clear(e);
        archive_entry_set_pathname(e, members[i]);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, 3);
        archive_write_header(a, e);
        archive_write_data(a, "abc", 3);
    }
    archive_entry_free(e);
    archive_write_free(a);
    return path;
}

static int read_until_error(const char *path, char *msg, size_t msgsize)
{
    ShardFile *f;
    ShardError err;
    cr_assert_eq(shard_file_open(&f, path, NULL, &err), 0, "%s", err.message);
    const ShardSampleView *v;
    int rc;
    while ((rc = shard_file_next(f, &v)) == 0)
        ;
    snprintf(msg, msgsize, "%s", shard_file_error(f));
    shard_file_free(&f);
    return rc;
}

Test(file, grouping_rules)
{
    char msg[SHARD_ERROR_MAX];
    const char *split[] = {"a/x.jpg", "b/y.jpg", "a/x.cls"};
    char *p = raw_tar("split.tar", split, 3);
    cr_assert_eq(read_until_error(p, msg, sizeof msg), SHARD_ERR_FORMAT);
    cr_assert(strstr(msg, "appears again") && strstr(msg, "a/x.cls") && strstr(msg, "offset 2048"),
              "%s", msg);
    free(p);

    const char *twice[] = {"k.jpg", "k.JPG"};
    p = raw_tar("twice.tar", twice, 2);
    cr_assert_eq(read_until_error(p, msg, sizeof msg), SHARD_ERR_FORMAT);
    cr_assert(strstr(msg, "twice"), "%s", msg);
    free(p);

    /* Skipped as WebDataset skips them: no dot, hidden, __meta__; ./ is not in the key. */
    const char *skips[] = {"README", ".hidden.txt", "__meta__.json", "./k.TXT", "./k.cls"};
    p = raw_tar("skips.tar", skips, 5);
    ShardFile *f;
    ShardError err;
    cr_assert_eq(shard_file_open(&f, p, NULL, &err), 0);
    const ShardSampleView *v;
    cr_assert_eq(shard_file_next(f, &v), 0, "%s", shard_file_error(f));
    cr_assert_str_eq(v->key, "k");
    cr_assert_eq(v->nfields, 2);
    cr_assert_str_eq(v->fields[0].name, "txt", "lower-cased");
    cr_assert_str_eq(v->fields[0].member, "./k.TXT");
    cr_assert_eq(shard_file_next(f, &v), SHARD_EOS);
    shard_file_free(&f);
    free(p);
}

typedef struct Skips {
    int n, codes[8];
    char why[8][96];
} Skips;

static void on_skip_text(void *cookie, const char *member, uint64_t offset, const char *why)
{
    Skips *s = cookie;
    (void)member, (void)offset;
    snprintf(s->why[s->n++ & 7], 96, "%s", why);
}

static void on_skip_code(void *cookie, const char *member, uint64_t offset, ShardSkipReason reason,
                         const char *why)
{
    Skips *s = cookie;
    (void)member, (void)offset;
    s->codes[s->n & 7] = (int)reason;
    snprintf(s->why[s->n++ & 7], 96, "%s", why);
}

Test(file, skipped_members_are_reported_with_a_reason_code)
{
    char *path = tu_path(dir, "kinds.tar");
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    cr_assert_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    const struct {
        const char *name;
        int type;
    } m[] = {{"d", AE_IFDIR}, {"l.jpg", AE_IFLNK}, {"fifo.jpg", AE_IFIFO}, {"README", AE_IFREG},
             {"k.txt", AE_IFREG}};
    for (size_t i = 0; i < 5; i++) {
        archive_entry_clear(e);
        archive_entry_set_pathname(e, m[i].name);
        archive_entry_set_filetype(e, (unsigned)m[i].type);
        archive_entry_set_perm(e, 0644);
        if (m[i].type == AE_IFLNK)
            archive_entry_set_symlink(e, "k.txt");
        archive_entry_set_size(e, m[i].type == AE_IFREG ? 3 : 0);
        archive_write_header(a, e);
        if (m[i].type == AE_IFREG)
            archive_write_data(a, "abc", 3);
    }
    archive_entry_free(e);
    archive_write_free(a);
    ShardFileSettings s;
    shard_file_default_settings(&s);
    Skips old = {0}, coded = {0};
    for (int pass = 0; pass < 2; pass++) {
        s.on_skip = on_skip_text; /* on_skip_reason takes over when set */
        s.on_skip_reason = pass ? on_skip_code : NULL;
        s.cookie = pass ? &coded : &old;
        ShardFile *f;
        ShardError err;
        cr_assert_eq(shard_file_open(&f, path, &s, &err), 0, "%s", err.message);
        const ShardSampleView *v;
        cr_assert_eq(shard_file_next(f, &v), 0, "%s", shard_file_error(f));
        cr_assert_str_eq(v->key, "k");
        cr_assert_eq(shard_file_next(f, &v), SHARD_EOS);
        shard_file_free(&f);
    }
    cr_assert_eq(old.n, 4);
    cr_assert_eq(coded.n, 4);
    const int want[] = {SHARD_SKIP_FOLDER, SHARD_SKIP_SYMLINK, SHARD_SKIP_SPECIAL, SHARD_SKIP_NOT_FIELD};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(coded.codes[i], want[i], "member %d", i);
        cr_assert_str_eq(coded.why[i], old.why[i], "the same text beside the code");
    }
    cr_assert_str_eq(old.why[0], "a folder");
    free(path);
}

Test(file, missing_and_truncated)
{
    ShardFile *f = (ShardFile *)1;
    ShardError err;
    char *missing = tu_path(dir, "nope.tar");
    cr_assert_eq(shard_file_open(&f, missing, NULL, &err), SHARD_ERR_NOT_FOUND);
    cr_assert_null(f);
    cr_assert(strstr(err.message, "nope.tar"), "%s", err.message);
    free(missing);

    char *path = tu_write_shard(dir, "t-%06d.tar", 20, 0);
    size_t n;
    unsigned char *bytes = tu_read(path, &n);
    char *cut = tu_path(dir, "cut.tar");
    FILE *o = fopen(cut, "wb");
    fwrite(bytes, 1, n / 2 + 100, o);
    fclose(o);
    char msg[SHARD_ERROR_MAX];
    int rc = read_until_error(cut, msg, sizeof msg);
    cr_assert_eq(rc, SHARD_ERR_FORMAT, "%d: %s", rc, msg);
    cr_assert(strstr(msg, "cut.tar: offset ") && strstr(msg, "member '"), "%s", msg);
    free(bytes);
    free(cut);
    free(path);
}

/* A compressed shard whose stream stops before the first tar header: "ends" when its bytes
 * run out (at the file's size), "breaks" when they are there but do not decompress. */
Test(file, compressed_stream_ends_or_breaks_before_the_first_header)
{
    static const unsigned char gz[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    unsigned char bad[2010];
    memcpy(bad, gz, sizeof gz);
    memset(bad + sizeof gz, 0xff, sizeof bad - sizeof gz);
    char *cut = tu_path(dir, "cut.tar.gz"), *broken = tu_path(dir, "broken.tar.gz");
    tu_write(cut, gz, sizeof gz);
    tu_write(broken, bad, sizeof bad);
    ShardFile *f;
    ShardError err;
    cr_assert_eq(shard_file_open(&f, cut, NULL, &err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err.message, "cut.tar.gz: offset 10: the compressed stream ends before"),
              "%s", err.message);
    cr_assert_eq(shard_file_open(&f, broken, NULL, &err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err.message, "broken.tar.gz: offset 0: the compressed stream breaks before"),
              "%s", err.message);
    free(cut);
    free(broken);
}

Test(file, urls_expand)
{
    char **u;
    size_t n;
    ShardError err;
    cr_assert_eq(shard_urls_expand("a-{008..011}.tar", &u, &n, &err), 0);
    cr_assert_eq(n, 4);
    cr_assert_str_eq(u[0], "a-008.tar");
    cr_assert_str_eq(u[3], "a-011.tar");
    shard_urls_free(u, n);
    cr_assert_eq(shard_urls_expand("{x,y}/p-{1..2}.tar", &u, &n, &err), 0);
    cr_assert_eq(n, 4);
    cr_assert_str_eq(u[1], "x/p-2.tar");
    cr_assert_str_eq(u[2], "y/p-1.tar");
    shard_urls_free(u, n);
    cr_assert_eq(shard_urls_expand("plain.tar", &u, &n, &err), 0);
    cr_assert_eq(n, 1);
    shard_urls_free(u, n);
    cr_assert_eq(shard_urls_expand("a-{3..1}.tar", &u, &n, &err), SHARD_ERR_FORMAT);
    cr_assert_eq(shard_urls_expand("a-{1..2.tar", &u, &n, &err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err.message, "unmatched"), "%s", err.message);
    cr_assert_eq(shard_urls_expand("a-{1..x}.tar", &u, &n, &err), SHARD_ERR_FORMAT);
}

/* The raw bytes of a file and of a pipe, in reads of any size; a pipe whose command fails is
 * an error at its end, and a missing file one at open. */
static void stream_equals(const char *url, const unsigned char *want, size_t n)
{
    ShardStream *s;
    ShardError err;
    cr_assert_eq(shard_stream_open(&s, url, NULL, &err), 0, "%s", err.message);
    unsigned char buf[4096];
    size_t got = 0, step = 1;
    int64_t k;
    while ((k = shard_stream_read(s, buf, step)) > 0) {
        cr_assert_leq((size_t)k, step);
        cr_assert_leq(got + (size_t)k, n);
        cr_assert_eq(memcmp(buf, want + got, (size_t)k), 0, "bytes differ at %zu", got);
        got += (size_t)k;
        step = step * 3 % 4093 + 1;
    }
    cr_assert_eq(k, 0, "%s", shard_stream_error(s));
    cr_assert_eq(got, n);
    cr_assert_eq(shard_stream_tell(s), n);
    cr_assert_eq(shard_stream_read(s, buf, sizeof buf), 0, "stays at the end");
    shard_stream_free(&s);
    cr_assert_null(s);
}

Test(file, stream_gives_a_files_and_a_pipes_bytes)
{
    size_t n = 100000;
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 7 + i / 251);
    char path[4096], url[4200];
    snprintf(path, sizeof path, "%s/raw.bin", dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(data, 1, n, f) == n);
    fclose(f);
    stream_equals(path, data, n);
    snprintf(url, sizeof url, "file://%s", path);
    stream_equals(url, data, n);
    snprintf(url, sizeof url, "pipe:cat '%s'", path);
    stream_equals(url, data, n);

    ShardStream *s;
    ShardError err;
    snprintf(url, sizeof url, "pipe:cat '%s'; exit 3", path);
    cr_assert_eq(shard_stream_open(&s, url, NULL, &err), 0, "%s", err.message);
    unsigned char buf[8192];
    int64_t k;
    while ((k = shard_stream_read(s, buf, sizeof buf)) > 0)
        ;
    cr_assert_lt(k, 0, "a failed command is an error at the end");
    cr_assert(strstr(shard_stream_error(s), "exit") || strstr(shard_stream_error(s), "status"),
              "%s", shard_stream_error(s));
    shard_stream_free(&s);
    snprintf(path, sizeof path, "%s/missing.bin", dir);
    cr_assert_eq(shard_stream_open(&s, path, NULL, &err), SHARD_ERR_NOT_FOUND);
    cr_assert(strstr(err.message, "missing.bin"), "%s", err.message);
    cr_assert_null(s);
    shard_stream_free(&s);
    free(data);
}

/* members: each regular file its own sample, named as stored, none split, checked or
 * remembered (WebDataset's tar_file_iterator groups after); a control reads the same tar
 * grouped and refuses it. */
Test(file, members_one_by_one_as_stored)
{
    const char *names[] = {"a/x.jpg", "b/y.jpg", "a/x.jpg", "README", ".hidden.txt", "./k.TXT"};
    char *p = raw_tar("members.tar", names, 6);
    char msg[SHARD_ERROR_MAX];
    cr_assert_eq(read_until_error(p, msg, sizeof msg), SHARD_ERR_FORMAT, "grouped: refused");
    ShardFileSettings s;
    shard_file_default_settings(&s);
    s.members = 1;
    ShardFile *f;
    ShardError err;
    cr_assert_eq(shard_file_open(&f, p, &s, &err), 0, "%s", err.message);
    const ShardSampleView *v;
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(shard_file_next(f, &v), 0, "%s", shard_file_error(f));
        cr_assert_eq(v->nfields, 1);
        cr_assert_str_eq(v->key, names[i]);
        cr_assert_str_eq(v->fields[0].member, names[i]);
        cr_assert_str_eq(v->fields[0].name, "");
        cr_assert_eq(v->fields[0].size, 3);
        cr_assert_eq(memcmp(v->fields[0].data, "abc", 3), 0);
    }
    cr_assert_eq(shard_file_next(f, &v), SHARD_EOS);
    shard_file_free(&f);
    free(p);
}

/* A stream read as a shard from its start takes the stream's source over (a pipe's command
 * runs once); a stream read from is refused, naming it. */
Test(file, a_stream_read_as_a_shard)
{
    const char *names[] = {"s.jpg", "s.cls", "t.jpg"};
    char *p = raw_tar("stream.tar", names, 3);
    char url[4200];
    snprintf(url, sizeof url, "pipe:cat '%s'", p);
    ShardStream *st;
    ShardError err;
    cr_assert_eq(shard_stream_open(&st, url, NULL, &err), 0, "%s", err.message);
    ShardFile *f;
    cr_assert_eq(shard_file_open_stream(&f, &st, NULL, &err), 0, "%s", err.message);
    cr_assert_null(st, "taken over");
    const ShardSampleView *v;
    cr_assert_eq(shard_file_next(f, &v), 0, "%s", shard_file_error(f));
    cr_assert_str_eq(v->key, "s");
    cr_assert_eq(v->nfields, 2);
    cr_assert_eq(shard_file_next(f, &v), 0);
    cr_assert_str_eq(v->key, "t");
    cr_assert_eq(shard_file_next(f, &v), SHARD_EOS);
    shard_file_free(&f);

    cr_assert_eq(shard_stream_open(&st, p, NULL, &err), 0, "%s", err.message);
    unsigned char b[10];
    cr_assert_eq(shard_stream_read(st, b, sizeof b), 10);
    cr_assert_eq(shard_file_open_stream(&f, &st, NULL, &err), SHARD_ERR_INVALID);
    cr_assert_null(f);
    cr_assert_null(st, "taken over on failure too");
    cr_assert(strstr(err.message, "stream.tar") && strstr(err.message, "read from"), "%s",
              err.message);
    free(p);
}
