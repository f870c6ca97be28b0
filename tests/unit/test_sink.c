/* Local sinks (libshard/src/sink/sink.h): an object appears whole at commit and not before,
 * with the digests of its bytes; an abort leaves nothing; URLs a sink cannot write are
 * refused by name; a sweep removes a killed writer's temporaries and never a live one's. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <shard/shard.h>

#include "base/error.h"
#include "base/keyset.h"
#include "sink/sink.h"
#include "testutil.h"

static char *dir;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}
TestSuite(sink, .init = setup, .fini = teardown, .timeout = 60);

/* The hex digest coreutils' tool (sha256sum, md5sum) gives for path. */
static void tool_digest(const char *tool, const char *path, char *out, size_t n)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "%s '%s'", tool, path);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    cr_assert(fscanf(p, "%64s", out) == 1);
    out[n] = 0;
    pclose(p);
}

/* The one name in dir other than those given, or "" */
static void only_other(const char *except, char *out)
{
    out[0] = 0;
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && (!except || strcmp(e->d_name, except)))
            snprintf(out, 256, "%s", e->d_name), n++;
    closedir(d);
    cr_assert_leq(n, 1);
}

Test(sink, commit_makes_it_appear_whole_with_its_digests)
{
    char *path = tu_path(dir, "a.bin"), err[SHARD_ERROR_MAX], tmp[256];
    ShardSinkSettings s = {.sync = 1, .md5 = 1, .sha256 = 1};
    ShardSink *k;
    cr_assert_eq(shard_sink_open(&k, path, &s, err), 0, "%s", err);
    size_t total = 0;
    unsigned char buf[7001];
    for (int i = 0; total < (3u << 20) + 5; i++) { /* odd sizes across the 1 MiB buffers */
        size_t n = 1 + (size_t)(i * 7919) % sizeof buf;
        for (size_t j = 0; j < n; j++)
            buf[j] = (unsigned char)(total + j * 31);
        cr_assert_eq(shard_sink_write(k, buf, n, err), 0, "%s", err);
        total += n;
    }
    cr_assert_eq(shard_sink_size(k), total);
    struct stat st;
    cr_assert_neq(stat(path, &st), 0, "nothing under the final name before the commit");
    only_other(NULL, tmp);
    cr_assert(tmp[0] == '.' && strstr(tmp, "a.bin.tmp-"), "one hidden temporary: %s", tmp);
    char md5[33], sha[65], want[65];
    cr_assert_eq(shard_sink_commit(&k, md5, sha, err), 0, "%s", err);
    cr_assert_null(k);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq((size_t)st.st_size, total);
    only_other("a.bin", tmp);
    cr_assert_str_empty(tmp, "the temporary is gone: %s", tmp);
    tool_digest("sha256sum", path, want, 64);
    cr_assert_str_eq(sha, want);
    tool_digest("md5sum", path, want, 32);
    cr_assert_str_eq(md5, want);
    free(path);
}

Test(sink, abort_leaves_nothing)
{
    char *path = tu_path(dir, "b.bin"), err[SHARD_ERROR_MAX];
    ShardSink *k;
    cr_assert_eq(shard_sink_open(&k, path, NULL, err), 0, "%s", err);
    cr_assert_eq(shard_sink_write(k, "hello", 5, err), 0);
    shard_sink_abort(&k);
    cr_assert_null(k);
    shard_sink_abort(&k); /* NULL: nothing */
    cr_assert_eq(tu_count(dir), 0);
    free(path);
}

Test(sink, put_replaces_and_file_urls_are_paths)
{
    char *path = tu_path(dir, "c.txt"), err[SHARD_ERROR_MAX], url[4200];
    tu_write(path, "old", 3);
    snprintf(url, sizeof url, "file://%s", path);
    cr_assert_eq(shard_sink_put(url, "new text", 8, NULL, err), 0, "%s", err);
    size_t n;
    unsigned char *got = tu_read(path, &n);
    cr_assert(n == 8 && !memcmp(got, "new text", 8));
    free(got);
    cr_assert_eq(shard_sink_remove(path, NULL, err), 0, "%s", err);
    cr_assert_eq(shard_sink_remove(path, NULL, err), 0, "a missing file is no error: %s", err);
    free(path);
}

Test(sink, urls_it_cannot_write_are_refused_by_name)
{
    char err[SHARD_ERROR_MAX];
    ShardSink *k = (ShardSink *)1;
    cr_assert_eq(shard_sink_open(&k, "http://example.com/a.tar", NULL, err), SHARD_ERR_UNSUPPORTED);
    cr_assert_null(k);
    cr_assert(strstr(err, "http://example.com/a.tar") && strstr(err, "not plain HTTP"), "%s", err);
    cr_assert_eq(shard_sink_check("ftp://host/a.tar", err), SHARD_ERR_UNSUPPORTED);
    cr_assert(strstr(err, "ftp://host/a.tar"), "%s", err);
    /* a folder under a file cannot be made: said, naming both */
    char *file = tu_path(dir, "a-file");
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fclose(f);
    char *path = tu_path(dir, "a-file/sub/d.tar");
    cr_assert_neq(shard_sink_open(&k, path, NULL, err), 0);
    cr_assert(strstr(err, path) && strstr(err, "Not a directory"), "%s", err);
    free(path);
    free(file);
}

Test(sink, a_missing_output_folder_is_made_as_mkdir_p)
{
    char err[SHARD_ERROR_MAX];
    ShardSink *k;
    char *path = tu_path(dir, "no/such/folder/d.tar");
    cr_assert_eq(shard_sink_open(&k, path, NULL, err), 0, "%s", err);
    cr_assert_eq(shard_sink_write(k, "abc", 3, err), 0, "%s", err);
    char md5[33], sha[65];
    cr_assert_eq(shard_sink_commit(&k, md5, sha, err), 0, "%s", err);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_size, 3);
    free(path);
}

Test(sink, a_sweep_removes_a_killed_writers_temporary_not_a_live_ones)
{
    char *path = tu_path(dir, "e.tar"), *dead = tu_path(dir, ".e.tar.tmp-00000000deadbeef");
    char *other = tu_path(dir, ".f.tar.tmp-00000000deadbeef"), err[SHARD_ERROR_MAX], live[256];
    tu_write(dead, "x", 1);  /* nobody holds it: its writer was killed */
    tu_write(other, "y", 1); /* a name not swept */
    ShardSink *k;
    cr_assert_eq(shard_sink_open(&k, path, NULL, err), 0, "%s", err);
    ShardKeySet names = {.owns = 0};
    cr_assert_geq(shard_keyset_insert(&names, (char *)"e.tar"), 0);
    shard_sink_sweep(dir, &names);
    struct stat st;
    cr_assert_neq(stat(dead, &st), 0, "the killed writer's temporary is gone");
    cr_assert_eq(stat(other, &st), 0, "another name's is not touched");
    only_other(".f.tar.tmp-00000000deadbeef", live);
    cr_assert(strstr(live, ".e.tar.tmp-"), "the live writer's is kept: %s", live);
    cr_assert_eq(shard_sink_write(k, "z", 1, err), 0);
    cr_assert_eq(shard_sink_commit(&k, NULL, NULL, err), 0, "%s", err);
    shard_sink_sweep(dir, NULL); /* every name */
    cr_assert_neq(stat(other, &st), 0);
    cr_assert_eq(stat(path, &st), 0);
    shard_keyset_free(&names);
    free(path);
    free(dead);
    free(other);
}
