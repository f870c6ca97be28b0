/*
 * Indexes made on demand (indexcache.h). A cached index is named HASH(url)-HASH(size,
 * version).idx: a changed shard gets a new name (its old index is removed when the new one
 * is made). Processes indexing one shard at once (DataLoader workers opening their readers
 * together) take turns on a lock file beside the index: the first makes it, the others wait
 * and find it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/buf.h"
#include "base/dirs.h"
#include "base/error.h"
#include "base/text.h"
#include "catalog/indexcache.h"
#include "remote/handle.h"
#include "remote/store.h"
#include "shard/verify.h"
#include "source/open.h"
#include "tar/idx.h"
#include "tar/idxbuild.h"
#include "tar/shardfile.h"

char *shard_index_cache_dir(const char *dir, const ShardRemote *remote)
{
    char *p = NULL;
    const char *base;
    if (dir && *dir)
        return strdup(dir);
    if (remote && shard_remote_cache_dir(remote)) {
        if (asprintf(&p, "%s/index", shard_remote_cache_dir(remote)) < 0)
            p = NULL;
    } else if ((base = getenv("XDG_CACHE_HOME")) && *base == '/') {
        if (asprintf(&p, "%s/libshard/index", base) < 0)
            p = NULL;
    } else if ((base = getenv("HOME")) && *base == '/') {
        if (asprintf(&p, "%s/.cache/libshard/index", base) < 0)
            p = NULL;
    } else { /* no home: a folder of this user's own, never one every user shares */
        if (asprintf(&p, "/tmp/libshard-index-%lu", (unsigned long)geteuid()) < 0)
            p = NULL;
    }
    return p;
}

/* hex of the first n bytes of text's SHA-256 into out (2n + 1 bytes) */
static int hash_hex(const char *text, size_t len, int n, char *out)
{
    unsigned char md[32];
    unsigned int k = 0;
    if (!EVP_Digest(text, len, md, &k, EVP_sha256(), NULL))
        return SHARD_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* Removes the files of other versions of the shard whose name starts with prefix: those
 * not starting with keep (its version's "URLHEX-VERHEX."). */
static void remove_stale(const char *dir, const char *prefix, const char *keep)
{
    int fd = shard_dir_open(dir); /* names removed relative to it: never through a link */
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (fd >= 0 && !d)
        close(fd);
    if (!d)
        return;
    size_t n = strlen(prefix);
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, n) && strncmp(e->d_name, keep, strlen(keep)))
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

/* Whether the columns at path are there, a plain file of their own, for count samples
 * (their header line says so; the lines are checked where they are read). */
static int cached_columns(const char *path, uint64_t count)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    char head[96];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1
                    ? pread(fd, head, sizeof head - 1, 0)
                    : -1;
    close(fd);
    unsigned long long c;
    if (n <= 0)
        return 0;
    head[n] = 0;
    return sscanf(head, "libshard-cols 1 %llu ", &c) == 1 && c == count;
}

/* The count a cached index's first line promises, or -1 (missing, damaged, or not a plain
 * file of its own: a link or a FIFO at its name is not read, and the index is made anew). */
static int64_t cached_count(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    char head[64];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1
                    ? pread(fd, head, sizeof head, 0)
                    : -1;
    close(fd);
    return n < 0 ? -1 : shard_index_header_count(head, (size_t)n);
}

/* The lock of the shard whose URL hashes to urlhex: its descriptor, held (exclusive); -1
 * when it cannot be had (the index is then made without it). */
static int lock_shard(const char *dir, const char *urlhex)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/.%s.lock", dir, urlhex) >= (int)sizeof p)
        return -1;
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600); /* never
                                                                                 written */
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        return -1;
    int rc;
    while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    if (rc) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The files of the shard's other versions (named URLHEX-...), removed; key's version kept. */
static void remove_older(const char *dir, const char *urlhex, const char *key)
{
    char prefix[40], keep[64];
    snprintf(prefix, sizeof prefix, "%s-", urlhex);
    const char *base = shard_base_name(key), *dot = strrchr(base, '.');
    snprintf(keep, sizeof keep, "%.*s.", dot ? (int)(dot - base) : (int)strlen(base), base);
    remove_stale(dir, prefix, keep);
}

/* The shard's identity for keying: a local path made absolute (one file named two ways is
 * one shard), a remote URL as given. */
static char *identity(const char *url)
{
    char *real = shard_store_identity(url);
    return real ? real : strdup(url);
}

/* The cache's name for src's file of kind ext (dir/HASH(url)-HASH(size, version).EXT,
 * malloc'd into *key) and the hex of its URL's hash (33 bytes): 0, or SHARD_ERR_NOMEM. */
static int cache_key(const char *dir, const char *url, const ShardSource *src, const char *ext,
                     char *urlhex, char **key)
{
    char *id = identity(url), verhex[17];
    *key = NULL;
    if (id && !hash_hex(id, strlen(id), 16, urlhex)) {
        char *v = NULL;
        if (asprintf(&v, "%lld\n%s", (long long)src->size, src->version) >= 0 &&
            !hash_hex(v, strlen(v), 8, verhex) &&
            asprintf(key, "%s/%s-%s.%s", dir, urlhex, verhex, ext) < 0)
            *key = NULL;
        free(v);
    }
    free(id);
    return *key ? 0 : SHARD_ERR_NOMEM;
}

/* The shard at url opened for its version (not from a shard cache: the object's own). */
static int open_versioned(ShardSource **src, const char *url, ShardRemote *remote, char *err)
{
    if (shard_store_can(url) && !(shard_store_can(url) & SHARD_STORE_BESIDE))
        return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                          "%s: a pipe's output cannot be indexed and kept (it has no version)",
                          url);
    int rc = shard_source_open(src, url, remote, SHARD_SOURCE_SEQUENTIAL | SHARD_SOURCE_SPARSE,
                               err);
    if (rc)
        return rc;
    ShardSource *s = *src;
    if (shard_source_size(s) < 0 || (!s->version[0] && s->ops->stat && s->ops->stat(s))) {
        rc = shard_fail(err, SHARD_ERR_IO, "%s", s->err[0] ? s->err : "cannot stat");
        shard_source_put(s);
        *src = NULL;
    }
    return rc;
}

int shard_index_cached(const char *dir, const char *url, ShardRemote *remote, char **path,
                       uint64_t *count, int *built, char *err)
{
    *path = NULL;
    *count = 0;
    *built = 0;
    ShardSource *src;
    int rc = open_versioned(&src, url, remote, err);
    if (rc)
        return rc;
    char *key = NULL, urlhex[33];
    if (cache_key(dir, url, src, "idx", urlhex, &key)) {
        shard_source_put(src);
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    }
    int64_t c = cached_count(key);
    if (c >= 0) {
        shard_source_put(src);
        *path = key;
        *count = (uint64_t)c;
        return 0;
    }
    if ((rc = shard_private_dir(dir, "index cache", err))) {
        shard_source_put(src);
        free(key);
        return rc;
    }
    int lock = lock_shard(dir, urlhex);
    if (lock >= 0 && (c = cached_count(key)) >= 0) { /* made while this one waited */
        close(lock);
        shard_source_put(src);
        *path = key;
        *count = (uint64_t)c;
        return 0;
    }
    ShardFileSettings fs;
    shard_index_scan_settings(&fs);
    fs.remote = remote;
    ShardFile *f;
    ShardError e;
    ShardBuf lines = {0};
    uint64_t n = 0;
    if ((rc = shard_file_open_source(&f, src, &fs, &e))) /* takes src */
        shard_fail(err, rc, "%s", e.message);
    else {
        rc = shard_index_scan(f, url, &lines, &n, err);
        shard_file_free(&f);
    }
    struct stat st; /* a link or a FIFO planted at the name in our own folder: not ours, gone */
    if (!rc && lstat(key, &st) == 0 && !S_ISREG(st.st_mode))
        unlink(key);
    if (!rc && !(rc = shard_index_put(key, n, &lines, NULL, err)))
        remove_older(dir, urlhex, key);
    if (lock >= 0)
        close(lock);
    shard_buf_free(&lines);
    if (rc) {
        free(key);
        return rc;
    }
    *path = key;
    *count = n;
    *built = 1;
    return 0;
}

int shard_columns_cached(const char *dir, const char *url, const char *index, uint64_t count,
                         ShardRemote *remote, char **path, int *built, char *err)
{
    *path = NULL;
    *built = 0;
    char *key = NULL, urlhex[33];
    int rc = 0;
    size_t dn = strlen(dir), in = index ? strlen(index) : 0;
    if (in > dn + 38 && !strncmp(index, dir, dn) && index[dn] == '/' &&
        !strcmp(index + in - 4, ".idx")) {
        /* beside an index the cache keeps: named as it is, for the version it was made of */
        if (asprintf(&key, "%.*s.cols", (int)(in - 4), index) < 0)
            key = NULL;
        snprintf(urlhex, sizeof urlhex, "%.32s", index + dn + 1);
    } else {
        ShardSource *src;
        if ((rc = open_versioned(&src, url, remote, err)))
            return rc;
        if (cache_key(dir, url, src, "cols", urlhex, &key))
            key = NULL;
        shard_source_put(src);
    }
    if (!key)
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    if (cached_columns(key, count)) {
        *path = key;
        return 0;
    }
    if ((rc = shard_private_dir(dir, "index cache", err))) {
        free(key);
        return rc;
    }
    int lock = lock_shard(dir, urlhex);
    if (!(lock >= 0 && cached_columns(key, count))) { /* not made while this one waited */
        struct stat st; /* a link or a FIFO planted at the name: not ours, gone */
        if (lstat(key, &st) == 0 && !S_ISREG(st.st_mode))
            unlink(key);
        ShardError e;
        /* a header that does not parse gets "-": the planner refuses or skips it, by the
         * reading's own settings */
        if ((rc = shard_geometry_build(url, index, key, remote, 1, NULL, &e)))
            shard_fail(err, rc, "%s", e.message);
        else
            *built = 1;
        if (!rc)
            remove_older(dir, urlhex, key);
    }
    if (lock >= 0)
        close(lock);
    if (rc) {
        free(key);
        return rc;
    }
    *path = key;
    return 0;
}
