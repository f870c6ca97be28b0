/* The pack plan (shard/pack.h): the library writes, byte for byte, what shardpack wrote
 * before the plan moved into the library (tests/cli/pack_golden.json, same input as
 * tests/cli/test_pack_golden.py), its shards cut by the writer's own rule, its keys, and
 * parts that partition the shards. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <shard/shard.h>

#include "testutil.h"

static char *dir;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}
TestSuite(pack, .init = setup, .fini = teardown, .timeout = 60);

/* The golden input's files (test_pack_golden.py's _names()), in creation order. */
static char names[54][48];
static size_t nnames;

static void make_names(void)
{
    nnames = 0;
    for (int i = 0; i < 25; i++)
        snprintf(names[nnames++], 48, "cat/img_%03d.jpg", i);
    snprintf(names[nnames++], 48, "cat/img_000.png");
    snprintf(names[nnames++], 48, "cat/a b.JPG");
    snprintf(names[nnames++], 48, "cat/a_b.jpg");
    for (int i = 0; i < 10; i++)
        snprintf(names[nnames++], 48, "dog/sub/x_%02d.jpeg", i);
    snprintf(names[nnames++], 48, "dog/y.v2.jpg");
    for (int i = 0; i < 15; i++)
        snprintf(names[nnames++], 48, "zebra/z%02d.png", i);
}

static size_t file_size(size_t n) { return 200 + (n * 7919) % 30000; }

/* Writes the golden input under dir/src, as the Python test does. */
static void make_input(void)
{
    make_names();
    for (size_t n = 0; n < nnames; n++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/src/%s", dir, names[n]);
        for (char *p = path + strlen(dir) + 1; (p = strchr(p + 1, '/'));) {
            *p = 0;
            mkdir(path, 0755);
            *p = '/';
        }
        int png = strstr(names[n], ".png") != NULL;
        const unsigned char *head = png ? (const unsigned char *)"\x89PNG\r\n\x1a\n"
                                        : (const unsigned char *)"\xff\xd8\xff\xe0";
        size_t hl = png ? 8 : 4, size = file_size(n);
        unsigned char *b = malloc(size);
        memcpy(b, head, hl);
        for (size_t k = 0; k < size - hl; k++)
            b[hl + k] = (unsigned char)((n * 31 + k * 7) & 255);
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f, "%s", path);
        fwrite(b, 1, size, f);
        fclose(f);
        free(b);
    }
}

static int by_rel(const void *a, const void *b) { return strcmp(a, b); }

/* The inputs as shardpack's folder scan gives them: sorted by relative path, labelled by
 * class folder. */
static void add_inputs(ShardPackPlan *p)
{
    static const char *classes[] = {"cat", "dog", "zebra"};
    char sorted[54][48];
    memcpy(sorted, names, sizeof sorted);
    qsort(sorted, nnames, sizeof *sorted, by_rel);
    for (size_t i = 0; i < nnames; i++) {
        size_t n = 0;
        while (strcmp(names[n], sorted[i]))
            n++;
        char path[4096];
        snprintf(path, sizeof path, "%s/src/%s", dir, sorted[i]);
        int label = sorted[i][0] == 'c' ? 0 : sorted[i][0] == 'd' ? 1 : 2;
        ShardPackInput in = {path, sorted[i], NULL, label, classes[label], NULL, file_size(n)};
        cr_assert_eq(shard_pack_plan_add(p, &in), 0);
    }
    cr_assert_eq(shard_pack_plan_set_classes(p, classes, 3), 0);
}

/* The golden input's plan under settings s, built. */
static ShardPackPlan *built_plan(const ShardPackSettings *s)
{
    ShardPackPlan *p;
    ShardError err;
    cr_assert_eq(shard_pack_plan_new(&p, s, &err), 0, "%s", err.message);
    add_inputs(p);
    cr_assert_eq(shard_pack_plan_build(p, &err), 0, "%s", err.message);
    return p;
}

static void sha256_hex(const char *path, char out[65])
{
    size_t size;
    unsigned char *b = tu_read(path, &size);
    cr_assert_not_null(b, "%s", path);
    unsigned char md[32];
    unsigned int len;
    EVP_Digest(b, size, md, &len, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", md[i]);
    free(b);
}

/* Packs the whole plan into dir/<name>/ and compares every file with the golden digests. */
static void pack_and_compare(const char *name, ShardPackSettings *s)
{
    char out[2048], pattern[4096];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    mkdir(out, 0755);
    snprintf(pattern, sizeof pattern, "%s/%s", out, s->pattern);
    s->pattern = pattern;
    s->sync = 0;
    ShardPackPlan *p = built_plan(s);
    ShardError err;
    char *mpath = shard_pack_manifest_path(s);
    ShardManifest *m;
    cr_assert_eq(shard_pack_manifest(&m, p, mpath), 0);
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    for (size_t j = hi; j-- > lo;) { /* any order: shards are independent */
        ShardFileInfo info;
        cr_assert_eq(shard_pack_write_shard(p, j, NULL, &info, &err), 0, "%s", err.message);
        cr_assert_not_null(info.url);
        free((char *)info.url);
    }
    for (size_t j = lo; j < hi; j++) { /* the manifest lists them in shard order */
        char url[4096];
        snprintf(url, sizeof url, pattern, (int)j);
        ShardFileInfo info;
        cr_assert_eq(shard_pack_write_shard(p, j, NULL, &info, &err), 0, "%s", err.message);
        cr_assert_str_eq(info.url, url);
        cr_assert_eq(shard_manifest_add(m, &info), 0);
        free((char *)info.url);
    }
    cr_assert_eq(shard_manifest_write(m, mpath, &err), 0, "%s", err.message);
    shard_manifest_free(&m);

    char *gpath = tu_path(getenv("SHARD_TESTS_DIR"), "cli/pack_golden.json");
    json_error_t je;
    json_t *golden = json_load_file(gpath, 0, &je);
    cr_assert_not_null(golden, "%s: %s", gpath, je.text);
    json_t *want = json_object_get(golden, name);
    cr_assert_not_null(want);
    cr_assert_eq((size_t)tu_count(out), json_object_size(want), "the same files");
    const char *file;
    json_t *digest;
    json_object_foreach(want, file, digest) {
        char path[4096], got[65];
        snprintf(path, sizeof path, "%s/%.1000s", out, file);
        sha256_hex(path, got);
        cr_assert_str_eq(got, json_string_value(digest), "%s differs", file);
    }
    json_decref(golden);
    free(gpath);
    free(mpath);
    shard_pack_plan_free(&p);
}

Test(pack, writes_what_shardpack_wrote_before)
{
    make_input();
    ShardPackSettings s;
    shard_pack_default_settings(&s);
    s.pattern = "a-%06d.tar";
    s.maxcount = 7;
    pack_and_compare("count", &s);

    shard_pack_default_settings(&s);
    s.pattern = "b-%06d.tar.zst";
    s.maxsize = 60 * 1024;
    s.frame_size = 16 * 1024;
    pack_and_compare("zstd-size", &s);

    shard_pack_default_settings(&s);
    s.pattern = "c-%06d.tar";
    s.shuffle = 1;
    s.shuffle_seed = 42;
    s.maxcount = 10;
    pack_and_compare("shuffle", &s);
}

Test(pack, keys_clashes_and_parts)
{
    make_input();
    ShardPackSettings s;
    shard_pack_default_settings(&s);
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/p-%%04d.tar", dir);
    s.pattern = pattern;
    s.maxcount = 5;
    ShardPackPlan *p = built_plan(&s);
    ShardError err;
    cr_assert_eq(shard_pack_plan_add(p, shard_pack_plan_input(p, 0)), SHARD_ERR_INVALID,
                 "a built plan takes no inputs");
    cr_assert_eq(shard_pack_plan_inputs(p), 54);
    /* sorted: "cat/a b.JPG" < "cat/a_b.jpg" < "cat/img_000.jpg" < "cat/img_000.png" */
    cr_assert_str_eq(shard_pack_plan_key(p, 0), "cat/a_b");
    cr_assert_str_eq(shard_pack_plan_key(p, 1), "cat/a_b_1");
    cr_assert_str_eq(shard_pack_plan_key(p, 2), "cat/img_000");
    cr_assert_str_eq(shard_pack_plan_key(p, 3), "cat/img_000_1");
    cr_assert_str_eq(shard_pack_plan_input(p, 0)->field, "jpg", "the extension, lower-cased");
    cr_assert_eq(shard_pack_plan_shards(p), 11);
    size_t first, end;
    shard_pack_plan_shard(p, 10, &first, &end);
    cr_assert_eq(first, 50);
    cr_assert_eq(end, 54);
    shard_pack_plan_free(&p);

    /* parts: contiguous shares that cover every shard once */
    size_t next = 0;
    for (uint64_t part = 0; part < 4; part++) {
        s.part = part;
        s.nparts = 4;
        p = built_plan(&s);
        size_t lo, hi;
        shard_pack_plan_part(p, &lo, &hi);
        cr_assert_eq(lo, next);
        next = hi;
        char *mp = shard_pack_manifest_path(&s);
        char want[64];
        snprintf(want, sizeof want, "/p.part-%llu-of-4.json", (unsigned long long)part);
        cr_assert(strstr(mp, want), "%s", mp);
        free(mp);
        shard_pack_plan_free(&p);
    }
    cr_assert_eq(next, 11);
    s.part = 4;
    cr_assert_eq(shard_pack_plan_new(&p, &s, &err), SHARD_ERR_INVALID);
    s.part = 0;
    s.nparts = 0;
    s.pattern = "no-conversion.tar";
    cr_assert_eq(shard_pack_plan_new(&p, &s, &err), SHARD_ERR_INVALID);
    cr_assert(strstr(err.message, "no-conversion.tar"), "%s", err.message);
}

static int count_written(void *cookie, size_t input, uint64_t bytes)
{
    (void)input, (void)bytes;
    ++*(int *)cookie;
    return 0;
}

Test(pack, cuts_shards_where_the_writer_does)
{
    make_input();
    /* One writer rotating on its own, fed the plan's samples in order, writes the same
     * shards as the plan: the rule exists once. */
    ShardPackSettings s;
    shard_pack_default_settings(&s);
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/q-%%03d.tar", dir);
    s.pattern = pattern;
    s.maxsize = 50000;
    s.maxcount = 9;
    s.sync = 0;
    ShardPackPlan *p = built_plan(&s);
    ShardError err;
    size_t nshards = shard_pack_plan_shards(p);
    cr_assert_gt(nshards, 6);
    int written = 0;
    ShardPackCallbacks cb = {.on_written = count_written, .cookie = &written};
    char (*plan_sha)[65] = calloc(nshards, 65);
    for (size_t j = 0; j < nshards; j++) {
        ShardFileInfo info;
        cr_assert_eq(shard_pack_write_shard(p, j, &cb, &info, &err), 0, "%s", err.message);
        sha256_hex(info.url, plan_sha[j]);
        free((char *)info.url);
    }
    cr_assert_eq(written, 54);

    /* the same samples through one rotating writer: read them back from the plan's shards */
    ShardWriterSettings ws;
    shard_writer_default_settings(&ws);
    char wpattern[4096];
    snprintf(wpattern, sizeof wpattern, "%s/w-%%03d.tar", dir);
    ws.pattern = wpattern;
    ws.maxsize = 50000;
    ws.maxcount = 9;
    ws.sync = 0;
    ShardWriter *w;
    cr_assert_eq(shard_writer_open(&w, &ws, &err), 0, "%s", err.message);
    for (size_t j = 0; j < nshards; j++) {
        char url[4096];
        snprintf(url, sizeof url, pattern, (int)j);
        ShardFile *f;
        cr_assert_eq(shard_file_open(&f, url, NULL, &err), 0, "%s", err.message);
        const ShardSampleView *v;
        while (shard_file_next(f, &v) == 0) {
            ShardField fields[4];
            for (size_t k = 0; k < v->nfields; k++)
                fields[k] = (ShardField){v->fields[k].name, v->fields[k].data, v->fields[k].size};
            ShardSample smp = {v->key, fields, v->nfields};
            cr_assert_eq(shard_writer_add(w, &smp), 0, "%s", shard_writer_error(w));
        }
        shard_file_free(&f);
    }
    cr_assert_eq(shard_writer_finish(w), 0);
    cr_assert_eq(shard_writer_count(w), nshards);
    for (size_t j = 0; j < nshards; j++) {
        char got[65];
        sha256_hex(shard_writer_shard(w, j)->url, got);
        cr_assert_str_eq(got, plan_sha[j], "shard %zu", j);
    }
    shard_writer_free(&w);
    free(plan_sha);
    shard_pack_plan_free(&p);
}

static int skip_all(void *cookie, size_t input, ShardPackBad reason, const char *what)
{
    (void)input, (void)what;
    ((int *)cookie)[reason]++;
    return reason != SHARD_PACK_UNDECODED; /* packed as they are, as shardpack packs them */
}

Test(pack, bad_inputs_fail_or_are_skipped)
{
    make_input();
    ShardPackSettings s;
    shard_pack_default_settings(&s);
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/r-%%03d.tar", dir);
    s.pattern = pattern;
    s.maxcount = 100;
    s.sync = 0;
    ShardPackPlan *p = built_plan(&s);
    ShardError err;
    /* one input gone, one changed size, one no longer an image, one replaced by a FIFO
     * (no writer will ever come: waiting on it would hang the pack) */
    char path[4096];
    snprintf(path, sizeof path, "%s/src/cat/img_005.jpg", dir);
    cr_assert_eq(unlink(path), 0);
    snprintf(path, sizeof path, "%s/src/dog/y.v2.jpg", dir);
    FILE *f = fopen(path, "ab");
    fputs("more", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/src/zebra/z03.png", dir);
    size_t size;
    unsigned char *b = tu_read(path, &size);
    b[0] = 'X';
    f = fopen(path, "wb");
    fwrite(b, 1, size, f);
    fclose(f);
    free(b);
    snprintf(path, sizeof path, "%s/src/dog/sub/x_03.jpeg", dir);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(mkfifo(path, 0644), 0);
    ShardFileInfo info;
    cr_assert_eq(shard_pack_write_shard(p, 0, NULL, &info, &err), SHARD_ERR_IO);
    cr_assert(strstr(err.message, "img_005.jpg: cannot read"), "%s", err.message);
    cr_assert_null(info.url);
    cr_assert_eq(tu_count(dir), 1, "nothing left but the input: %d", tu_count(dir));
    int seen[16] = {0};
    ShardPackCallbacks cb = {.on_bad = skip_all, .cookie = seen};
    cr_assert_eq(shard_pack_write_shard(p, 0, &cb, &info, &err), 0, "%s", err.message);
    cr_assert_eq(seen[SHARD_PACK_UNREADABLE], 1);
    cr_assert_eq(seen[SHARD_PACK_CHANGED], 2, "the grown file and the FIFO");
    cr_assert_eq(seen[SHARD_PACK_NOT_IMAGE], 1);
    cr_assert_eq(info.nsamples, 50);
    cr_assert_eq(seen[SHARD_PACK_UNDECODED], 50, "the inputs' made-up headers, packed and said");
    free((char *)info.url);
    shard_pack_plan_free(&p);
}

typedef struct Bad {
    int reasons[SHARD_PACK_IGNORED + 1];
    int leave_out;
} Bad;

static int collect_bad(void *cookie, const char *path, ShardPackBad reason, const char *what)
{
    Bad *b = cookie;
    cr_assert(path && *path && what && *what);
    cr_assert(reason > 0 && reason <= SHARD_PACK_IGNORED, "reason %d", (int)reason);
    b->reasons[reason]++;
    return b->leave_out;
}

/* The library's scan gives the inputs shardpack always planned from: sorted by relative
 * path, labelled by class folder, sized; bad ones named and left out or fatal. */
Test(pack, scan_finds_the_inputs_in_plan_order)
{
    make_input();
    char src[4096], path[4200];
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(path, sizeof path, "%s/cat/notes.txt", src);
    tu_write(path, "text", 4);
    ShardPackSettings s;
    shard_pack_default_settings(&s);
    s.pattern = "s-%06d.tar";
    s.maxcount = 7;
    ShardPackPlan *want = built_plan(&s), *got;
    ShardError err;
    cr_assert_eq(shard_pack_plan_new(&got, &s, &err), 0);
    uint64_t ignored = 0;
    cr_assert_eq(shard_pack_plan_scan(got, src, 0, NULL, &ignored, &err), 0, "%s", err.message);
    cr_assert_eq(ignored, 1);
    cr_assert_eq(shard_pack_plan_build(got, &err), 0, "%s", err.message);
    cr_assert_eq(shard_pack_plan_inputs(got), shard_pack_plan_inputs(want));
    cr_assert_eq(shard_pack_plan_shards(got), shard_pack_plan_shards(want));
    for (size_t i = 0; i < shard_pack_plan_inputs(want); i++) {
        const ShardPackInput *a = shard_pack_plan_input(got, i), *b = shard_pack_plan_input(want, i);
        cr_assert_str_eq(a->path, b->path);
        cr_assert_str_eq(a->rel, b->rel);
        cr_assert_eq(a->label, b->label);
        cr_assert_str_eq(a->class_name, b->class_name);
        cr_assert_eq(a->size, b->size);
        cr_assert_str_eq(shard_pack_plan_key(got, i), shard_pack_plan_key(want, i));
    }
    shard_pack_plan_free(&got);
    shard_pack_plan_free(&want);

    /* two bad inputs: both named, then left out or the scan fails naming the first */
    snprintf(path, sizeof path, "%s/dog/empty.jpg", src);
    tu_write(path, "", 0);
    snprintf(path, sizeof path, "%s/dog/\xff.jpg", src);
    tu_write(path, "\xff\xd8\xff\xe0", 4);
    for (int leave_out = 0; leave_out < 2; leave_out++) {
        Bad bad = {{0}, leave_out};
        ShardPackScanCallbacks cb = {collect_bad, &bad};
        cr_assert_eq(shard_pack_plan_new(&got, &s, &err), 0);
        int rc = shard_pack_plan_scan(got, src, 0, &cb, NULL, &err);
        cr_assert_eq(bad.reasons[SHARD_PACK_EMPTY], 1);
        cr_assert_eq(bad.reasons[SHARD_PACK_BAD_NAME], 1);
        cr_assert_eq(bad.reasons[SHARD_PACK_IGNORED], 1, "cat/notes.txt is told, to be named");
        if (leave_out) {
            cr_assert_eq(rc, 0, "%s", err.message);
            cr_assert_eq(shard_pack_plan_build(got, &err), 0);
            cr_assert_eq(shard_pack_plan_inputs(got), nnames);
        } else {
            cr_assert_eq(rc, SHARD_ERR_FORMAT);
            cr_assert(strstr(err.message, "dog/empty.jpg: zero-byte file"), "%s", err.message);
        }
        shard_pack_plan_free(&got);
    }

    /* an empty class folder: kept as a class when left out, else it fails the scan */
    snprintf(path, sizeof path, "%s/eel", src);
    cr_assert_eq(mkdir(path, 0777), 0);
    for (int keep = 0; keep < 2; keep++) {
        Bad bad = {{0}, keep};
        ShardPackScanCallbacks cb = {collect_bad, &bad};
        cr_assert_eq(shard_pack_plan_new(&got, &s, &err), 0);
        int rc = shard_pack_plan_scan(got, src, 0, &cb, NULL, &err);
        cr_assert_eq(bad.reasons[SHARD_PACK_EMPTY_CLASS], 1);
        if (keep)
            cr_assert_eq(rc, 0, "%s", err.message);
        else /* failed: the scan's error is its first bad input (dog/empty.jpg, above) */
            cr_assert_neq(rc, 0);
        shard_pack_plan_free(&got);
    }
}
