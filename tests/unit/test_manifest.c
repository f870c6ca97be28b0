#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <shard/manifest.h>

#include "testutil.h"

static char *dir;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}
TestSuite(manifest, .init = setup, .fini = teardown, .timeout = 30);

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fclose(f);
}

static ShardManifest *sample_manifest(const char *sub, int first, int n)
{
    ShardManifest *m;
    cr_assert_eq(shard_manifest_new(&m, "train"), 0);
    const char *classes[] = {"cat", "dog"};
    cr_assert_eq(shard_manifest_set_classes(m, classes, 2), 0);
    cr_assert_eq(shard_manifest_set_options(m, "{\"maxcount\": 10, \"compression\": \"none\"}"), 0);
    for (int i = first; i < first + n; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s/%s/train-%06d.tar", dir, sub, i);
        touch(name);
        ShardFileInfo info = {name, 10 + (uint64_t)i, 1000 + (uint64_t)i, 1000 + (uint64_t)i, "", ""};
        memset(info.md5, 'a', 32);
        memset(info.sha256, 'b', 64);
        cr_assert_eq(shard_manifest_add(m, &info), 0);
    }
    return m;
}

Test(manifest, round_trip_with_relative_urls)
{
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/shards", dir);
    mkdir(sub, 0755);
    ShardManifest *m = sample_manifest("shards", 0, 3);
    char *path = tu_path(dir, "train.json");
    ShardError err;
    cr_assert_eq(shard_manifest_write(m, path, &err), 0, "%s", err.message);
    size_t n = 0;
    char *text = (char *)tu_read(path, &n);
    text[n] = 0;
    cr_assert(strstr(text, "\"__kind__\": \"wids-shard-index-v1\""), "%s", text);
    cr_assert(strstr(text, "\"wids_version\": 1"));
    cr_assert(strstr(text, "\"url\": \"shards/train-000001.tar\""), "%s", text);
    cr_assert_eq(text[n - 1], '\n');
    free(text);

    ShardManifest *r;
    cr_assert_eq(shard_manifest_read(&r, path, &err), 0, "%s", err.message);
    cr_assert_eq(shard_manifest_count(r), 3);
    cr_assert_eq(shard_manifest_samples(r), 10 + 11 + 12);
    char expect[4096];
    snprintf(expect, sizeof expect, "%s/shards/train-000002.tar", dir);
    cr_assert_str_eq(shard_manifest_shard(r, 2)->url, expect, "resolved against the manifest");
    cr_assert_eq(shard_manifest_shard(r, 2)->filesize, 1002);
    cr_assert_eq(shard_manifest_class_count(r), 2);
    cr_assert_str_eq(shard_manifest_class(r, 1), "dog");
    cr_assert_null(shard_manifest_class(r, 2));
    cr_assert_str_eq(shard_manifest_options(r), "{\"maxcount\":10,\"compression\":\"none\"}");
    cr_assert_null(shard_manifest_shard(r, 3));

    /* Written again from what was read: the same bytes. */
    char *path2 = tu_path(dir, "again.json");
    cr_assert_eq(shard_manifest_write(r, path2, &err), 0);
    size_t n1 = 0, n2 = 0;
    unsigned char *a = tu_read(path, &n1), *b = tu_read(path2, &n2);
    cr_assert(n1 == n2 && !memcmp(a, b, n1));
    free(a);
    free(b);
    free(path);
    free(path2);
    shard_manifest_free(&m);
    shard_manifest_free(&r);
    cr_assert_null(r);
}

Test(manifest, read_errors_say_where)
{
    char *path = tu_path(dir, "bad.json");
    FILE *f = fopen(path, "w");
    fputs("{\n  \"shardlist\": [\n    {\"url\": \"a.tar\", \"nsamples\": 3,}\n  ]\n}\n", f);
    fclose(f);
    ShardManifest *m = (ShardManifest *)1;
    ShardError err;
    cr_assert_eq(shard_manifest_read(&m, path, &err), SHARD_ERR_FORMAT);
    cr_assert_null(m);
    cr_assert(strstr(err.message, "bad.json") && strstr(err.message, "line 3"), "%s", err.message);

    f = fopen(path, "w");
    fputs("{\"shardlist\": [{\"url\": \"a.tar\"}]}", f);
    fclose(f);
    cr_assert_eq(shard_manifest_read(&m, path, &err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err.message, "shardlist[0]"), "%s", err.message);

    f = fopen(path, "w");
    fputs("{\"shardlist\": [{\"url\": \"a.tar\", \"nsamples\": 1, \"md5sum\": \"xyz\"}]}", f);
    fclose(f);
    cr_assert_eq(shard_manifest_read(&m, path, &err), SHARD_ERR_FORMAT);

    char *missing = tu_path(dir, "missing.json");
    cr_assert_eq(shard_manifest_read(&m, missing, &err), SHARD_ERR_NOT_FOUND);
    cr_assert(strstr(err.message, "missing.json"), "%s", err.message);
    free(missing);

    /* A plain wids index (no libshard fields) is accepted. */
    f = fopen(path, "w");
    fputs("{\"__kind__\": \"wids-shard-index-v1\", \"wids_version\": 1, \"shardlist\": "
          "[{\"url\": \"http://host/a.tar\", \"nsamples\": 5}]}",
          f);
    fclose(f);
    cr_assert_eq(shard_manifest_read(&m, path, &err), 0, "%s", err.message);
    cr_assert_str_eq(shard_manifest_shard(m, 0)->url, "http://host/a.tar");
    shard_manifest_free(&m);
    free(path);
}

Test(manifest, join_parts)
{
    ShardManifest *a = sample_manifest(".", 2, 2), *b = sample_manifest(".", 0, 2);
    const ShardManifest *parts[] = {a, b};
    ShardManifest *j;
    ShardError err;
    cr_assert_eq(shard_manifest_join(&j, parts, 2, &err), 0, "%s", err.message);
    cr_assert_eq(shard_manifest_count(j), 4);
    for (size_t i = 0; i < 4; i++) {
        char expect[4096];
        snprintf(expect, sizeof expect, "%s/./train-%06zu.tar", dir, i);
        cr_assert_str_eq(shard_manifest_shard(j, i)->url, expect);
    }
    shard_manifest_free(&j);

    const ShardManifest *dup[] = {a, a};
    cr_assert_eq(shard_manifest_join(&j, dup, 2, &err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err.message, "more than one part"), "%s", err.message);

    const char *other[] = {"cat"};
    shard_manifest_set_classes(b, other, 1);
    cr_assert_eq(shard_manifest_join(&j, parts, 2, &err), SHARD_ERR_FORMAT);
    cr_assert(strstr(err.message, "part 1"), "%s", err.message);
    shard_manifest_free(&a);
    shard_manifest_free(&b);
}

Test(manifest, options_must_be_an_object)
{
    ShardManifest *m;
    cr_assert_eq(shard_manifest_new(&m, NULL), 0);
    cr_assert_eq(shard_manifest_set_options(m, "[1]"), SHARD_ERR_FORMAT);
    cr_assert_eq(shard_manifest_set_options(m, "{"), SHARD_ERR_FORMAT);
    cr_assert_str_eq(shard_manifest_options(m), "{}");
    shard_manifest_free(&m);
}
