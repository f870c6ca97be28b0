/* Stores (libshard/src/remote/store.h): a URL resolves to its store once; read-only stores
 * refuse every change by the URL's name; a folder's operations follow no link; what a store
 * can do is told by its scheme alone. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shard/shard.h>

#include "base/error.h"
#include "remote/hf.h"
#include "remote/store.h"
#include "sink/sink.h"
#include "testutil.h"

static char *dir;
static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}
TestSuite(store, .init = setup, .fini = teardown, .timeout = 60);

static int count_fn(void *cookie, const char *url, uint64_t size)
{
    (void)url, (void)size;
    ++*(int *)cookie;
    return 0;
}

Test(store, read_only_stores_refuse_every_change_naming_the_url)
{
    const char *urls[] = {"http://127.0.0.1:9/d/a.tar", "https://example.com/d/a.tar",
                          "pipe:cat /dev/null"};
    for (size_t i = 0; i < sizeof urls / sizeof *urls; i++) {
        char err[SHARD_ERROR_MAX] = "";
        ShardStore *st;
        cr_assert_eq(shard_store_open(&st, urls[i], NULL, err), 0, "%s", err);
        cr_assert_eq(shard_store_can(urls[i]) & SHARD_STORE_WRITE, 0u);
        cr_assert_eq(shard_store_remove(st, urls[i], err), SHARD_ERR_UNSUPPORTED, "%s", urls[i]);
        cr_assert(strstr(err, urls[i]) && strstr(err, "removed"), "%s", err);
        cr_assert_eq(shard_store_room(st, urls[i], err), SHARD_ERR_UNSUPPORTED, "%s", urls[i]);
        cr_assert(strstr(err, urls[i]), "%s", err);
        cr_assert_eq(shard_sink_put(urls[i], "x", 1, NULL, err), SHARD_ERR_UNSUPPORTED, "%s", urls[i]);
        cr_assert(strstr(err, urls[i]), "%s", err);
        int n = 0;
        int rc = shard_store_list(st, urls[i], count_fn, &n, err);
        cr_assert(rc != 0 && n == 0, "%s listed", urls[i]);
        shard_store_free(&st);
        cr_assert_null(st);
    }
    char err[SHARD_ERROR_MAX];
    ShardStore *st = (ShardStore *)1;
    cr_assert_eq(shard_store_open(&st, "ftp://host/a.tar", NULL, err), SHARD_ERR_UNSUPPORTED);
    cr_assert_null(st);
    cr_assert(strstr(err, "ftp://host/a.tar") && strstr(err, "'ftp'"), "%s", err);
}

Test(store, what_a_store_can_do_is_its_schemes)
{
    cr_assert_eq(shard_store_can("gs://b/p/") & (SHARD_STORE_WRITE | SHARD_STORE_LIST |
                                                 SHARD_STORE_COSTLY | SHARD_STORE_PREFIX),
                 SHARD_STORE_WRITE | SHARD_STORE_LIST | SHARD_STORE_COSTLY | SHARD_STORE_PREFIX);
    cr_assert_eq(shard_store_can("s3://b/p/a.tar") & SHARD_STORE_PREFIX, 0u, "an object, not a prefix");
    cr_assert_eq(shard_store_can("/data/a.tar") & (SHARD_STORE_COSTLY | SHARD_STORE_PRIVATE),
                 SHARD_STORE_PRIVATE);
    cr_assert_eq(shard_store_can("pipe:cat x") & SHARD_STORE_BESIDE, 0u, "a command has no siblings");
    cr_assert_eq(shard_store_can("http://h/a.tar") & SHARD_STORE_BESIDE, SHARD_STORE_BESIDE);
    cr_assert_eq(shard_store_can("ftp://h/a.tar"), 0u);
    const char *path;
    cr_assert_eq(shard_store_bytes("file:///data/a.tar", &path) & SHARD_STORE_FILES, SHARD_STORE_FILES);
    cr_assert_str_eq(path, "/data/a.tar");
    shard_store_bytes("s3://b/a.tar", &path);
    cr_assert_null(path);
}

Test(store, a_folder_follows_no_link)
{
    char err[SHARD_ERROR_MAX];
    ShardStore *st;
    cr_assert_eq(shard_store_open(&st, dir, NULL, err), 0, "%s", err);
    cr_assert_null(shard_store_remote(st), "a folder needs no network");
    char *file = tu_path(dir, "a.tar"), *link = tu_path(dir, "b.tar"), *sub = tu_path(dir, "sub");
    char *sublink = tu_path(dir, "sublink");
    tu_write(file, "12345", 5);
    cr_assert_eq(symlink(file, link), 0);
    uint64_t size = 0;
    cr_assert_eq(shard_store_stat(st, file, &size, err), 0, "%s", err);
    cr_assert_eq(size, 5);
    cr_assert_eq(shard_store_stat(st, link, &size, err), SHARD_ERR_NOT_FOUND, "a link is no file of its own");
    cr_assert(strstr(err, link), "%s", err);
    /* room: a folder made, then kept; a link at its name refused and not followed */
    cr_assert_eq(shard_store_room(st, sub, err), 0, "%s", err);
    cr_assert_eq(shard_store_room(st, sub, err), 0, "%s", err);
    cr_assert_eq(symlink(sub, sublink), 0);
    cr_assert_eq(shard_store_room(st, sublink, err), SHARD_ERR_INVALID);
    cr_assert(strstr(err, sublink) && strstr(err, "not a folder"), "%s", err);
    int fd = 7;
    cr_assert_eq(shard_store_hold(st, sublink, &fd, err), SHARD_ERR_INVALID);
    cr_assert_eq(fd, -1);
    cr_assert_eq(shard_store_hold(st, sub, &fd, err), 0, "%s", err);
    cr_assert(fd >= 0);
    close(fd);
    char *none = tu_path(dir, "none");
    cr_assert_eq(shard_store_hold(st, none, &fd, err), 0, "no folder: nothing held");
    cr_assert_eq(fd, -1);
    /* list: the files, hidden ones left out; a missing folder lists nothing (1) */
    char *hidden = tu_path(dir, ".hidden");
    tu_write(hidden, "", 0);
    int n = 0;
    cr_assert_eq(shard_store_list(st, dir, count_fn, &n, err), 0, "%s", err);
    cr_assert_eq(n, 4, "a.tar, b.tar, sub, sublink: %d", n);
    cr_assert_eq(shard_store_list(st, none, count_fn, &n, err), 1);
    /* remove: the link goes, its target stays; a missing name is no error; a folder is refused */
    cr_assert_eq(shard_store_remove(st, link, err), 0, "%s", err);
    struct stat sb;
    cr_assert_eq(lstat(link, &sb), -1);
    cr_assert_eq(stat(file, &sb), 0, "the link's target is untouched");
    cr_assert_eq(shard_store_remove(st, link, err), 0, "a missing name is no error: %s", err);
    cr_assert_eq(shard_store_remove(st, sub, err), SHARD_ERR_INVALID);
    cr_assert(strstr(err, sub), "%s", err);
    shard_store_tidy(st, sub);
    cr_assert_eq(lstat(sub, &sb), -1, "an empty folder tidied away");
    shard_store_free(&st);
    free(file), free(link), free(sub), free(sublink), free(none), free(hidden);
}

/* The Hub's CDN links are asked straight until the expiry their signature states. */
Test(store, a_signed_links_expiry_is_the_earlier_it_states)
{
    cr_assert_eq(shard_hf_link_until("https://cdn/x.tar?Expires=1700000000&Signature=a"),
                 1700000000);
    /* 2024-03-01T12:00:00Z plus an hour */
    cr_assert_eq(shard_hf_link_until("https://cdn/x?X-Amz-Date=20240301T120000Z&X-Amz-Expires="
                                     "3600&X-Amz-Signature=b"),
                 1709294400 + 3600);
    cr_assert_eq(shard_hf_link_until("https://cdn/x?X-Amz-Date=20240301T120000Z&X-Amz-Expires="
                                     "3600&Expires=1709294500"),
                 1709294500);
    /* none stated, or not a number: until refused */
    cr_assert_eq(shard_hf_link_until("https://cdn/x.tar"), INT64_MAX);
    cr_assert_eq(shard_hf_link_until("https://cdn/x?Expires=soon&NoExpires=1"), INT64_MAX);
    cr_assert_eq(shard_hf_link_until("https://cdn/x?X-Amz-Date=2024&X-Amz-Expires=60"), INT64_MAX);
    /* a parameter whose name ends in one is not it */
    cr_assert_eq(shard_hf_link_until("https://cdn/x?MyExpires=5"), INT64_MAX);
}
