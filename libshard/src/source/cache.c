/*
 * The local cache of remote shards (cache.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/buf.h"
#include "base/dirs.h"
#include "base/error.h"
#include "remote/handle.h"
#include "sink/sink.h"
#include "source/cache.h"
#include "source/filesource.h"

struct ShardCacheFill {
    ShardRemote *r;
    ShardSink *sink; /* the copy, under a temporary name until whole */
};

/* DIR/HASH-BASENAME: the hash keeps URLs apart, the name keeps the folder readable. */
static char *cache_path(const ShardRemote *r, const char *url)
{
    unsigned char md[32];
    unsigned int n = 0;
    if (!EVP_Digest(url, strlen(url), md, &n, EVP_sha256(), NULL))
        return NULL;
    size_t end = strcspn(url, "?#"); /* a signed URL's query is no file's name */
    const char *base = url + end;
    while (base > url && base[-1] != '/')
        base--;
    int blen = (int)(url + end - base) < 80 ? (int)(url + end - base) : 80;
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    size_t len = strlen(shard_remote_cache_dir(r)) + (size_t)blen + 40;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s/%s-%.*s", shard_remote_cache_dir(r), hex, blen, base);
    return p;
}

int shard_cache_open(ShardRemote *r, const char *url, ShardSource **out, char *err)
{
    *out = NULL;
    int bad = shard_private_dir(shard_remote_cache_dir(r), "the shard cache (cache_dir)", err);
    if (bad)
        return bad;
    char *path = cache_path(r, url);
    if (!path)
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    int rc = SHARD_ERR_NOT_FOUND;
    if (access(path, R_OK) == 0) {
        ShardSource *s;
        char msg[SHARD_ERROR_MAX];
        if (shard_source_file(&s, path, SHARD_SOURCE_SEQUENTIAL, msg) == 0) {
            utimensat(AT_FDCWD, path, NULL, 0); /* a use, for eviction */
            free(s->url); /* messages name the shard, not the cache file */
            if (!(s->url = strdup(url))) {
                shard_source_put(s);
                free(path);
                return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
            }
            shard_remote_count(r, SHARD_REMOTE_CACHE_HITS, 1);
            shard_remote_count(r, SHARD_REMOTE_CACHE_BYTES, (uint64_t)s->size);
            *out = s;
            rc = 0;
        }
    }
    free(path);
    return rc;
}

ShardCacheFill *shard_cache_fill_begin(ShardRemote *r, const char *url)
{
    shard_remote_count(r, SHARD_REMOTE_CACHE_MISSES, 1);
    char err[SHARD_ERROR_MAX];
    if (shard_private_dir(shard_remote_cache_dir(r), "the shard cache (cache_dir)", err))
        return NULL; /* shard_cache_open said why */
    char *path = cache_path(r, url);
    ShardCacheFill *f = path ? calloc(1, sizeof *f) : NULL;
    ShardSinkSettings ks = {0}; /* a copy: not worth an fsync */
    if (f && shard_sink_open(&f->sink, path, &ks, err) != 0) {
        free(f);
        f = NULL;
    }
    free(path);
    if (f)
        f->r = shard_remote_ref(r);
    return f;
}

void shard_cache_fill_write(ShardCacheFill **pf, const void *p, size_t n)
{
    char err[SHARD_ERROR_MAX];
    if (*pf && shard_sink_write((*pf)->sink, p, n, err) != 0)
        shard_cache_fill_abort(pf);
}

typedef struct Entry {
    char *name; /* in the cache's folder */
    struct timespec used;
    uint64_t size;
} Entry;

static int older(const void *a, const void *b)
{
    const Entry *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return (x->used.tv_nsec > y->used.tv_nsec) - (x->used.tv_nsec < y->used.tv_nsec);
}

/* Deletes the least recently used shards until the folder fits its limit. */
static void trim(const ShardRemote *r)
{
    const char *dir = shard_remote_cache_dir(r);
    uint64_t limit = shard_remote_cache_limit(r);
    if (!limit) {
        struct statvfs v;
        if (statvfs(dir, &v) != 0)
            return;
        limit = (uint64_t)v.f_bavail * v.f_frsize / 10;
    }
    char lock[4096];
    snprintf(lock, sizeof lock, "%s/.lock", dir);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lfd < 0)
        return;
    flock(lfd, LOCK_EX);
    shard_sink_sweep(dir, NULL); /* copies a killed process was making */
    int fd = shard_dir_open(dir); /* entries named relative to it: never through a link */
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (fd >= 0 && !d)
        close(fd);
    Entry *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (shard_array_grow(&v, &cap, n + 1, sizeof *v, 64))
            break;
        v[n++] = (Entry){strdup(e->d_name), st.st_mtim, (uint64_t)st.st_size};
        total += (uint64_t)st.st_size;
    }
    qsort(v, n, sizeof *v, older);
    for (size_t i = 0; d && i < n && total > limit; i++)
        if (v[i].name && unlinkat(dirfd(d), v[i].name, 0) == 0)
            total -= v[i].size;
    if (d)
        closedir(d);
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    flock(lfd, LOCK_UN);
    close(lfd);
}

void shard_cache_fill_commit(ShardCacheFill **pf, uint64_t size)
{
    ShardCacheFill *f = *pf;
    if (!f)
        return;
    char err[SHARD_ERROR_MAX];
    if (shard_sink_size(f->sink) != size || shard_sink_commit(&f->sink, NULL, NULL, err) != 0) {
        shard_cache_fill_abort(pf);
        return;
    }
    *pf = NULL;
    trim(f->r);
    shard_remote_put(f->r);
    free(f);
}

void shard_cache_fill_abort(ShardCacheFill **pf)
{
    ShardCacheFill *f = *pf;
    if (!f)
        return;
    *pf = NULL;
    shard_sink_abort(&f->sink);
    shard_remote_put(f->r);
    free(f);
}
