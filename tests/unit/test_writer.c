#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <shard/shard.h>
#include <zstd.h>

#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(writer, .init = setup, .fini = teardown, .timeout = 60);

/* Sample i: a text field whose size varies, a cls, and for odd i a field with a dot. */
static void sample_data(int i, char *key, char *txt, char *cls, ShardField *f, size_t *nf)
{
    sprintf(key, "group%d/sample%04d", i % 3, i);
    int len = 100 + (i * 397) % 2000;
    for (int k = 0; k < len; k++)
        txt[k] = (char)('a' + (i + k) % 26);
    sprintf(cls, "%d", i % 7);
    size_t n = 0;
    f[n++] = (ShardField){"txt", txt, (size_t)len};
    f[n++] = (ShardField){"cls", cls, strlen(cls)};
    if (i % 2)
        f[n++] = (ShardField){"seg.txt", txt, 10};
    *nf = n;
}

static ShardWriter *open_writer(const char *name, uint64_t maxcount, uint64_t maxsize,
                                size_t frame_size)
{
    ShardWriterSettings s;
    shard_writer_default_settings(&s);
    char *pattern = tu_path(dir, name);
    s.pattern = pattern;
    s.maxcount = maxcount;
    s.maxsize = maxsize;
    s.sync = 0;
    if (frame_size)
        s.frame_size = frame_size;
    ShardWriter *w = NULL;
    ShardError err;
    int rc = shard_writer_open(&w, &s, &err);
    free(pattern);
    cr_assert_eq(rc, 0, "%s", err.message);
    return w;
}

static void write_samples(ShardWriter *w, int n)
{
    static char txt[4096];
    for (int i = 0; i < n; i++) {
        char key[64], cls[16];
        ShardField f[3];
        size_t nf;
        sample_data(i, key, txt, cls, f, &nf);
        ShardSample s = {key, f, nf};
        cr_assert_eq(shard_writer_add(w, &s), 0, "%s", shard_writer_error(w));
    }
    cr_assert_eq(shard_writer_finish(w), 0, "%s", shard_writer_error(w));
}

/* Reads a plain tar from memory with libarchive: names and contents in order. */
typedef struct Member {
    char name[256];
    size_t size;
    unsigned char *data;
} Member;

static int read_tar(const unsigned char *p, size_t n, Member *out, int max)
{
    struct archive *a = archive_read_new();
    archive_read_support_format_tar(a);
    cr_assert_eq(archive_read_open_memory(a, p, n), ARCHIVE_OK);
    struct archive_entry *e;
    int k = 0;
    int r;
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        cr_assert_lt(k, max);
        snprintf(out[k].name, sizeof out[k].name, "%s", archive_entry_pathname(e));
        out[k].size = (size_t)archive_entry_size(e);
        out[k].data = malloc(out[k].size + 1);
        cr_assert_eq(archive_read_data(a, out[k].data, out[k].size), (la_ssize_t)out[k].size);
        cr_assert_eq(archive_entry_mtime(e), 0);
        cr_assert_eq(archive_entry_uid(e), 0);
        cr_assert_eq(archive_entry_perm(e), 0644);
        k++;
    }
    cr_assert_eq(r, ARCHIVE_EOF, "%s", archive_error_string(a));
    archive_read_free(a);
    return k;
}

static void check_index(const char *idxpath, const unsigned char *tar, size_t tarsize,
                        uint64_t nsamples)
{
    size_t n;
    char *idx = (char *)tu_read(idxpath, &n);
    cr_assert_not_null(idx, "%s", idxpath);
    idx[n] = 0;
    char *save, *line = strtok_r(idx, "\n", &save);
    char head[64];
    snprintf(head, sizeof head, "v1.2 %llu", (unsigned long long)nsamples);
    cr_assert_str_eq(line, head);
    uint64_t lines = 0;
    while ((line = strtok_r(NULL, "\n", &save))) {
        lines++;
        char *s2, *tok = strtok_r(line, " ", &s2);
        char key[256] = "";
        while (tok) {
            char *field = tok;
            unsigned long long off = strtoull(strtok_r(NULL, " ", &s2), NULL, 10);
            unsigned long long size = strtoull(strtok_r(NULL, " ", &s2), NULL, 10);
            char *name = strtok_r(NULL, " ", &s2);
            cr_assert_not_null(name);
            cr_assert_eq(off % 512, 0, "data offsets are block aligned");
            cr_assert_leq(off + size, tarsize);
            /* The ustar header right before the data names this member. */
            cr_assert(!strncmp((const char *)tar + off - 512, name, 100), "%s", name);
            char expect_field[256];
            const char *dot = strchr(strrchr(name, '/') ? strrchr(name, '/') : name, '.');
            snprintf(expect_field, sizeof expect_field, "%s", dot + 1);
            cr_assert_str_eq(field, expect_field);
            if (!key[0])
                snprintf(key, sizeof key, "%.*s", (int)(dot - name), name);
            cr_assert(!strncmp(name, key, strlen(key)), "members of a line share a key");
            tok = strtok_r(NULL, " ", &s2);
        }
    }
    cr_assert_eq(lines, nsamples);
    free(idx);
}

Test(writer, tar_rotation_members_and_index)
{
    ShardWriter *w = open_writer("t-%04d.tar", 10, 0, 0);
    write_samples(w, 25);
    cr_assert_eq(shard_writer_count(w), 3);
    uint64_t counts[3] = {10, 10, 5};
    int global = 0;
    for (size_t i = 0; i < 3; i++) {
        const ShardFileInfo *info = shard_writer_shard(w, i);
        cr_assert_eq(info->nsamples, counts[i]);
        cr_assert_str_eq(info->md5, "", "MD5 only on request");
        cr_assert_eq(strlen(info->sha256), 64);
        char name[32];
        snprintf(name, sizeof name, "t-%04zu.tar", i);
        char *path = tu_path(dir, name);
        cr_assert_str_eq(info->url, path);
        size_t n;
        unsigned char *tar = tu_read(path, &n);
        cr_assert_eq(n, info->filesize);
        cr_assert_eq(n, info->tarsize);
        cr_assert_eq(n % 512, 0);
        Member m[64];
        int k = read_tar(tar, n, m, 64);
        /* Members of each sample sorted by field name, samples in order. */
        int j = 0;
        for (uint64_t s = 0; s < counts[i]; s++, global++) {
            char key[64], txt[4096], cls[16];
            ShardField f[3];
            size_t nf;
            sample_data(global, key, txt, cls, f, &nf);
            char expect[128];
            snprintf(expect, sizeof expect, "%s.cls", key);
            cr_assert_str_eq(m[j].name, expect);
            cr_assert_eq(m[j].size, strlen(cls));
            j++;
            if (nf == 3) {
                snprintf(expect, sizeof expect, "%s.seg.txt", key);
                cr_assert_str_eq(m[j++].name, expect);
            }
            snprintf(expect, sizeof expect, "%s.txt", key);
            cr_assert_str_eq(m[j].name, expect);
            cr_assert_eq(memcmp(m[j].data, txt, m[j].size), 0);
            j++;
        }
        cr_assert_eq(j, k);
        snprintf(name, sizeof name, "t-%04zu.idx", i);
        char *idx = tu_path(dir, name);
        check_index(idx, tar, n, counts[i]);
        for (int q = 0; q < k; q++)
            free(m[q].data);
        free(tar);
        free(path);
        free(idx);
    }
    shard_writer_free(&w);
    cr_assert_null(w);
}

Test(writer, maxsize_rotation)
{
    /* Each sample counts 512 per field plus data rounded to 512. */
    static char txt[4096];
    char key[64], cls[16];
    ShardField f[3];
    size_t nf;
    sample_data(0, key, txt, cls, f, &nf);
    ShardSample s0 = {key, f, nf};
    uint64_t one = shard_writer_sample_size(&s0);
    cr_assert_eq(one, 512 + 512 + 512 + 512, "txt of 100 bytes + cls: %llu", (unsigned long long)one);

    ShardWriter *w = open_writer("m-%d.tar", 0, 4 * 2048 + 100, 0);
    for (int i = 0; i < 9; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ShardField g[2] = {{"a", "x", 1}, {"b", "y", 1}};
        ShardSample s = {key, g, 2};
        cr_assert_eq(shard_writer_sample_size(&s), 2048);
        cr_assert_eq(shard_writer_add(w, &s), 0, "%s", shard_writer_error(w));
    }
    cr_assert_eq(shard_writer_finish(w), 0);
    cr_assert_eq(shard_writer_count(w), 3);
    cr_assert_eq(shard_writer_shard(w, 0)->nsamples, 4);
    cr_assert_eq(shard_writer_shard(w, 1)->nsamples, 4);
    cr_assert_eq(shard_writer_shard(w, 2)->nsamples, 1);
    shard_writer_free(&w);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

Test(writer, zstd_frames_and_seek_table)
{
    ShardWriter *w = open_writer("z-%03d.tar.zst", 0, 0, 5000);
    write_samples(w, 30);
    ShardWriter *p = open_writer("z-%03d.tar", 0, 0, 0);
    write_samples(p, 30);
    const ShardFileInfo *zi = shard_writer_shard(w, 0), *pi = shard_writer_shard(p, 0);
    size_t zn, pn;
    unsigned char *z = tu_read(zi->url, &zn);
    unsigned char *plain = tu_read(pi->url, &pn);
    cr_assert_eq(zi->filesize, zn);
    cr_assert_eq(zi->tarsize, pn, "tarsize is that of the uncompressed tar");

    /* The whole file decompresses (the seek table is a skippable frame) to the plain tar. */
    unsigned char *out = malloc(pn + 1);
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    ZSTD_inBuffer in = {z, zn, 0};
    ZSTD_outBuffer ob = {out, pn + 1, 0};
    while (in.pos < in.size) {
        size_t r = ZSTD_decompressStream(dctx, &ob, &in);
        cr_assert(!ZSTD_isError(r), "%s", ZSTD_getErrorName(r));
    }
    cr_assert_eq(ob.pos, pn);
    cr_assert_eq(memcmp(out, plain, pn), 0);

    /* Seek table: footer, entries, sums. */
    const unsigned char *foot = z + zn - 9;
    cr_assert_eq(le32(foot + 5), 0x8F92EAB1u);
    cr_assert_eq(foot[4], 0x80);
    uint32_t nframes = le32(foot);
    cr_assert_gt(nframes, 3, "frame_size 5000 over ~40 KB gives several frames");
    size_t table = 8 + 12 * (size_t)nframes + 9;
    const unsigned char *t = z + zn - table;
    cr_assert_eq(le32(t), 0x184D2A5Eu);
    cr_assert_eq(le32(t + 4), 12 * nframes + 9);
    size_t coff = 0, doff = 0;
    Member m[128];
    int k = read_tar(plain, pn, m, 128);
    for (uint32_t i = 0; i < nframes; i++) {
        const unsigned char *e = t + 8 + 12 * i;
        uint32_t cs = le32(e), ds = le32(e + 4), ck = le32(e + 8);
        /* Each frame decompresses on its own to its slice of the tar. */
        size_t r = ZSTD_decompress(out, pn, z + coff, cs);
        cr_assert(!ZSTD_isError(r), "frame %u: %s", i, ZSTD_getErrorName(r));
        cr_assert_eq(r, ds);
        cr_assert_eq(memcmp(out, plain + doff, ds), 0);
        cr_assert_eq(ck, le32(z + coff + cs - 4), "seek table checksum = frame checksum");
        cr_assert_eq(ZSTD_getFrameContentSize(z + coff, cs), ds);
        coff += cs;
        doff += ds;
        /* A frame ends on a sample boundary: the next header starts a new key. */
        if (i + 1 < nframes && doff + 1024 < pn) {
            const char *next = (const char *)plain + doff;
            int found = 0;
            for (int q = 1; q < k; q++) {
                if (!strcmp(m[q].name, next)) {
                    const char *a = m[q - 1].name, *b = m[q].name;
                    size_t la = strcspn(strrchr(a, '/'), "."), lb = strcspn(strrchr(b, '/'), ".");
                    size_t ka = (size_t)(strrchr(a, '/') - a) + la, kb = (size_t)(strrchr(b, '/') - b) + lb;
                    cr_assert(ka != kb || strncmp(a, b, ka), "frame %u splits sample %s", i, b);
                    found = 1;
                }
            }
            cr_assert(found, "frame %u does not end at a member header", i);
        }
    }
    /* Whatever follows the last sample is the tar's end: zero blocks only. */
    cr_assert_eq(coff + table, zn);
    cr_assert_eq(doff, pn);
    for (int q = 0; q < k; q++)
        free(m[q].data);
    ZSTD_freeDCtx(dctx);
    free(out);
    free(z);
    free(plain);
    shard_writer_free(&w);
    shard_writer_free(&p);
}

Test(writer, reproducible)
{
    ShardWriter *a = open_writer("a-%d.tar.zst", 7, 0, 3000);
    write_samples(a, 20);
    ShardWriter *b = open_writer("b-%d.tar.zst", 7, 0, 3000);
    write_samples(b, 20);
    cr_assert_eq(shard_writer_count(a), shard_writer_count(b));
    for (size_t i = 0; i < shard_writer_count(a); i++) {
        size_t na = 0, nb = 0;
        unsigned char *x = tu_read(shard_writer_shard(a, i)->url, &na);
        unsigned char *y = tu_read(shard_writer_shard(b, i)->url, &nb);
        cr_assert_eq(na, nb);
        cr_assert_eq(memcmp(x, y, na), 0);
        cr_assert_str_eq(shard_writer_shard(a, i)->sha256, shard_writer_shard(b, i)->sha256);
        free(x);
        free(y);
    }
    shard_writer_free(&a);
    shard_writer_free(&b);
}

Test(writer, unfinished_shard_leaves_nothing)
{
    ShardWriter *w = open_writer("u-%d.tar.zst", 5, 0, 1000);
    static char txt[4096];
    for (int i = 0; i < 7; i++) {
        char key[64], cls[16];
        ShardField f[3];
        size_t nf;
        sample_data(i, key, txt, cls, f, &nf);
        ShardSample s = {key, f, nf};
        cr_assert_eq(shard_writer_add(w, &s), 0);
    }
    /* Shard 0 is complete (with its index and columns); shard 1 is in progress under a
     * hidden name. */
    cr_assert_eq(shard_writer_count(w), 1);
    cr_assert_eq(tu_count(dir), 4);
    shard_writer_free(&w);
    cr_assert_eq(tu_count(dir), 3, "only u-0.tar.zst, u-0.idx and u-0.cols remain");
    char *p0 = tu_path(dir, "u-0.tar.zst"), *p1 = tu_path(dir, "u-1.tar.zst");
    cr_assert_eq(access(p0, F_OK), 0);
    cr_assert_neq(access(p1, F_OK), 0);
    free(p0);
    free(p1);
}

Test(writer, bad_samples_are_refused_and_writer_goes_on)
{
    ShardWriter *w = open_writer("v-%d.tar", 0, 0, 0);
    ShardField ok = {"txt", "x", 1};
    ShardField twice[2] = {{"txt", "x", 1}, {"txt", "y", 1}};
    ShardField slash = {"a/b", "x", 1};
    ShardField space = {"a b", "x", 1};
    struct {
        const char *key;
        ShardField *f;
        size_t n;
    } bad[] = {
        {"has.dot", &ok, 1}, {"a b", &ok, 1}, {"", &ok, 1},   {"../up", &ok, 1},
        {"k", twice, 2},     {"k", &slash, 1}, {"k", &space, 1}, {"k", &ok, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ShardSample s = {bad[i].key, bad[i].f, bad[i].n};
        cr_assert_eq(shard_writer_add(w, &s), SHARD_ERR_INVALID, "case %zu", i);
        cr_assert_neq(shard_writer_error(w)[0], 0);
    }
    ShardSample s = {"fine", &ok, 1};
    cr_assert_eq(shard_writer_add(w, &s), 0, "%s", shard_writer_error(w));
    cr_assert_eq(shard_writer_finish(w), 0);
    cr_assert_eq(shard_writer_shard(w, 0)->nsamples, 1);
    cr_assert_eq(shard_writer_add(w, &s), SHARD_ERR_STATE);
    shard_writer_free(&w);
}

Test(writer, settings_are_checked)
{
    ShardWriterSettings s;
    shard_writer_default_settings(&s);
    ShardWriter *w = (ShardWriter *)1;
    ShardError err;
    cr_assert_eq(shard_writer_open(&w, &s, &err), SHARD_ERR_INVALID);
    cr_assert_null(w);
    const char *bad[] = {"out.tar", "out-%s.tar", "out-%d-%d.tar", "out-%f.tar"};
    for (size_t i = 0; i < 4; i++) {
        s.pattern = bad[i];
        cr_assert_eq(shard_writer_open(&w, &s, &err), SHARD_ERR_INVALID, "%s", bad[i]);
        cr_assert(strstr(err.message, bad[i]), "%s", err.message);
    }
    s.pattern = "x-%06d.tar.zst";
    s.level = 23;
    cr_assert_eq(shard_writer_open(&w, &s, &err), SHARD_ERR_INVALID);
    s.level = 3;
    s.pattern = "100%%-%llu.tar";
    cr_assert_eq(shard_writer_open(&w, &s, &err), SHARD_ERR_INVALID, "ll is not accepted");
    s.pattern = "100%%-%u.tar";
    cr_assert_eq(shard_writer_open(&w, &s, &err), 0, "%s", err.message);
    shard_writer_free(&w);
    shard_writer_free(&w); /* NULL is fine */
    shard_writer_free(NULL);
}

Test(writer, a_missing_folder_is_made_and_one_that_cannot_be_is_named)
{
    ShardWriterSettings s;
    shard_writer_default_settings(&s);
    char *pattern = tu_path(dir, "new/deeper/x-%d.tar");
    s.pattern = pattern;
    ShardWriter *w;
    ShardError err;
    cr_assert_eq(shard_writer_open(&w, &s, &err), 0);
    ShardField f = {"txt", "x", 1};
    ShardSample smp = {"k", &f, 1};
    cr_assert_eq(shard_writer_add(w, &smp), 0, "%s", shard_writer_error(w));
    cr_assert_eq(shard_writer_finish(w), 0, "%s", shard_writer_error(w));
    cr_assert_eq(shard_writer_count(w), 1);
    shard_writer_free(&w);
    free(pattern);
    /* a folder under a file cannot be made */
    char *file = tu_path(dir, "plain-file");
    FILE *fp = fopen(file, "w");
    cr_assert_not_null(fp);
    fclose(fp);
    pattern = tu_path(dir, "plain-file/x-%d.tar");
    s.pattern = pattern;
    cr_assert_eq(shard_writer_open(&w, &s, &err), 0);
    cr_assert_neq(shard_writer_add(w, &smp), 0);
    cr_assert(strstr(shard_writer_error(w), "plain-file/x-0.tar"), "%s", shard_writer_error(w));
    cr_assert_eq(shard_writer_add(w, &smp), SHARD_ERR_STATE);
    shard_writer_free(&w);
    free(pattern);
    free(file);
}

/* Small fixed shards in formats/golden: the writer must keep producing exactly these
 * bytes. SHARD_UPDATE_GOLDEN=1 rewrites them (after a deliberate format change). */
Test(writer, golden_files)
{
    const char *golden = getenv("SHARD_GOLDEN_DIR");
    if (!golden)
        cr_skip_test("SHARD_GOLDEN_DIR is not set (meson test sets it)");
    int update = getenv("SHARD_UPDATE_GOLDEN") && !strcmp(getenv("SHARD_UPDATE_GOLDEN"), "1");
    const char *out = update ? golden : dir;
    const char *patterns[] = {"golden-%06d.tar", "golden-%06d.tar.zst"};
    for (int z = 0; z < 2; z++) {
        ShardWriterSettings s;
        shard_writer_default_settings(&s);
        char *pattern = tu_path(out, patterns[z]);
        s.pattern = pattern;
        s.frame_size = 1; /* one frame per sample */
        s.sync = 0;
        s.checksums = SHARD_DIGEST_MD5 | SHARD_DIGEST_SHA256; /* the manifest in its full form */
        ShardWriter *w;
        ShardError err;
        cr_assert_eq(shard_writer_open(&w, &s, &err), 0);
        ShardField f0[] = {{"txt", "hello\n", 6}, {"cls", "0", 1}};
        ShardField f1[] = {{"json", "{\"a\":1}", 7}, {"cls", "1", 1}, {"txt", "world\n", 6}};
        ShardSample s0 = {"sample0", f0, 2}, s1 = {"dir/sample1", f1, 3};
        cr_assert_eq(shard_writer_add(w, &s0), 0);
        cr_assert_eq(shard_writer_add(w, &s1), 0);
        cr_assert_eq(shard_writer_finish(w), 0);
        if (z == 0) {
            ShardManifest *m;
            cr_assert_eq(shard_manifest_new(&m, "golden"), 0);
            const char *classes[] = {"zero", "one"};
            shard_manifest_set_classes(m, classes, 2);
            shard_manifest_set_options(m, "{\"maxcount\":100000}");
            shard_manifest_add(m, shard_writer_shard(w, 0));
            char *mp = tu_path(out, "golden.json");
            cr_assert_eq(shard_manifest_write(m, mp, &err), 0, "%s", err.message);
            free(mp);
            shard_manifest_free(&m);
        }
        shard_writer_free(&w);
        free(pattern);
    }
    if (update)
        return;
    const char *files[] = {"golden-000000.tar", "golden-000000.tar.zst", "golden-000000.idx",
                           "golden.json"};
    for (int i = 0; i < 4; i++) {
        char *a = tu_path(dir, files[i]), *b = tu_path(golden, files[i]);
        size_t na = 0, nb = 0;
        unsigned char *x = tu_read(a, &na), *y = tu_read(b, &nb);
        cr_assert_not_null(y, "%s missing: run with SHARD_UPDATE_GOLDEN=1 once", b);
        cr_assert(na == nb && !memcmp(x, y, na), "%s differs from the golden file", files[i]);
        free(x);
        free(y);
        free(a);
        free(b);
    }
}

static void hex_digest(const EVP_MD *md, const unsigned char *p, size_t n, char *out)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    cr_assert(EVP_Digest(p, n, d, &len, md, NULL));
    for (unsigned i = 0; i < len; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

/* Each digest is computed when asked for, and only then; large enough for several of the
 * writer's buffers to be hashed in turn. */
Test(writer, digests_as_asked)
{
    const int which[] = {0, SHARD_DIGEST_SHA256, SHARD_DIGEST_MD5, SHARD_DIGEST_MD5 | SHARD_DIGEST_SHA256};
    for (int k = 0; k < 4; k++) {
        ShardWriterSettings s;
        shard_writer_default_settings(&s);
        char name[32];
        snprintf(name, sizeof name, "d%d-%%d.tar", k);
        char *pattern = tu_path(dir, name);
        s.pattern = pattern;
        s.checksums = which[k];
        s.sync = k & 1; /* the writeback hints on and off */
        ShardWriter *w = NULL;
        ShardError err;
        cr_assert_eq(shard_writer_open(&w, &s, &err), 0, "%s", err.message);
        static unsigned char big[3 << 20];
        for (size_t i = 0; i < sizeof big; i++)
            big[i] = (unsigned char)(i * 2654435761u >> 13);
        for (int i = 0; i < 4; i++) {
            char key[16];
            snprintf(key, sizeof key, "s%d", i);
            big[0] = (unsigned char)i;
            ShardField f = {"bin", big, sizeof big};
            ShardSample smp = {key, &f, 1};
            cr_assert_eq(shard_writer_add(w, &smp), 0, "%s", shard_writer_error(w));
        }
        cr_assert_eq(shard_writer_finish(w), 0, "%s", shard_writer_error(w));
        const ShardFileInfo *info = shard_writer_shard(w, 0);
        size_t n;
        unsigned char *data = tu_read(info->url, &n);
        char md5[33] = "", sha[65] = "";
        if (which[k] & SHARD_DIGEST_MD5)
            hex_digest(EVP_md5(), data, n, md5);
        if (which[k] & SHARD_DIGEST_SHA256)
            hex_digest(EVP_sha256(), data, n, sha);
        cr_assert_str_eq(info->md5, md5, "case %d", k);
        cr_assert_str_eq(info->sha256, sha, "case %d", k);
        free(data);
        shard_writer_free(&w);
        free(pattern);
    }
}

Test(writer, digest_names)
{
    int b = -1;
    cr_assert_eq(shard_digests_parse("sha256", &b), 0);
    cr_assert_eq(b, SHARD_DIGEST_SHA256);
    cr_assert_eq(shard_digests_parse("md5", &b), 0);
    cr_assert_eq(b, SHARD_DIGEST_MD5);
    cr_assert_eq(shard_digests_parse("sha256,md5", &b), 0);
    cr_assert_eq(b, SHARD_DIGEST_MD5 | SHARD_DIGEST_SHA256);
    cr_assert_eq(shard_digests_parse("none", &b), 0);
    cr_assert_eq(b, 0);
    const char *bad[] = {"", "md5,", ",md5", "crc32", "sha256,,md5", "SHA256", "none,md5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert_eq(shard_digests_parse(bad[i], &b), SHARD_ERR_INVALID, "%s", bad[i]);
}
