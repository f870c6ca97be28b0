/*
 * URLs (url.h): what a URL names, decided here and nowhere else, and the source that opens
 * it. A new kind of storage (http://, gs://, s3://) is one more case here and one more
 * source implementation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/text.h"
#include "remote/object.h"
#include "source/open.h"

int shard_url_is_command(const char *url) { return !strncmp(url, "pipe:", 5); }

int shard_url_is_remote(const char *url)
{
    return !strncmp(url, "http://", 7) || !strncmp(url, "https://", 8) ||
           !strncmp(url, "gs://", 5) || !strncmp(url, "s3://", 5);
}

static int has_scheme(const char *url)
{
    const char *p = strstr(url, "://");
    return p && p > url;
}

/* file:///PATH and file://localhost/PATH name the local PATH; NULL for anything else. */
static const char *file_path(const char *url)
{
    if (strncmp(url, "file://", 7))
        return NULL;
    const char *p = url + 7;
    if (!strncmp(p, "localhost/", 10))
        p += 9;
    return *p == '/' ? p : NULL;
}

int shard_url_has_siblings(const char *url)
{
    return !shard_url_is_command(url) &&
           (!has_scheme(url) || shard_url_is_remote(url) || file_path(url));
}

int shard_url_is_prefix(const char *url)
{
    size_t n = strlen(url);
    return shard_url_is_remote(url) && n && url[n - 1] == '/';
}

typedef struct Listing {
    ShardUrlFn fn;
    void *cookie;
} Listing;

static int list_one(void *cookie, const char *url, uint64_t size)
{
    Listing *l = cookie;
    (void)size;
    static const char *const shards[] = {".tar", ".tar.gz", ".tgz", ".tar.zst"};
    for (size_t i = 0; i < sizeof shards / sizeof *shards; i++)
        if (shard_ends_with(url, shards[i]))
            return l->fn(l->cookie, url);
    return 0; /* indexes, manifests and anything else beside the shards */
}

int shard_url_list(const char *url, ShardRemote *remote, ShardUrlFn fn, void *cookie, char *err)
{
    ShardRemote *r = remote ? shard_remote_ref(remote) : shard_remote_default(err);
    if (!r)
        return SHARD_ERR_NOMEM;
    Listing l = {fn, cookie};
    int rc = shard_object_list(r, url, list_one, &l, err);
    shard_remote_put(r);
    return rc;
}

int shard_url_is_absolute(const char *url)
{
    return url[0] == '/' || has_scheme(url) || shard_url_is_command(url);
}

char *shard_url_resolve(const char *base, const char *url)
{
    if (shard_url_is_absolute(url))
        return shard_strdup(url);
    char *dir = shard_dir_of(base);
    if (!dir || !strcmp(dir, ".")) {
        free(dir);
        return dir ? shard_strdup(url) : NULL;
    }
    size_t n = strlen(dir) + strlen(url) + 2;
    char *full = malloc(n);
    if (full)
        snprintf(full, n, "%s/%s", dir, url);
    free(dir);
    return full;
}

int shard_source_open(ShardSource **out, const char *url, ShardRemote *remote, int flags,
                      char *err)
{
    *out = NULL;
    if (shard_url_is_command(url))
        return shard_source_pipe(out, url, url + 5, err);
    if (shard_url_is_remote(url))
        return shard_source_remote(out, url, remote, flags, err);
    if (file_path(url))
        return shard_source_file(out, file_path(url), flags, err);
    if (has_scheme(url))
        return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                          "%s: unsupported scheme '%.*s' (libshard reads paths, file:///PATH, "
                          "pipe:, http://, https://, gs:// and s3://)",
                          url, (int)(strstr(url, "://") - url), url);
    return shard_source_file(out, url, flags, err);
}

int shard_source_each(const char *url, ShardRemote *remote, ShardBlockFn fn, void *cookie,
                      char *err)
{
    ShardSource *s;
    int rc = shard_source_open(&s, url, remote, SHARD_SOURCE_SEQUENTIAL, err);
    while (!rc) {
        const void *block;
        ssize_t k = shard_source_read(s, &block);
        if (k < 0)
            rc = shard_fail(err, (int)k, "%s", s->err);
        if (k <= 0)
            break;
        rc = fn(cookie, block, (size_t)k, err);
    }
    if (!rc && (rc = shard_source_finish(s)))
        shard_fail(err, rc, "%s", s->err);
    shard_source_put(s);
    return rc;
}

typedef struct Slurp {
    const char *url;
    ShardBuf *out;
    size_t max;
} Slurp;

static int slurp_block(void *cookie, const void *block, size_t n, char *err)
{
    Slurp *sl = cookie;
    if (sl->out->len + n > sl->max)
        return shard_fail(err, SHARD_ERR_FORMAT, "%s: larger than %zu bytes", sl->url, sl->max);
    if (shard_buf_append(sl->out, block, n))
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", sl->url);
    return 0;
}

int shard_source_slurp(const char *url, ShardRemote *remote, ShardBuf *out, size_t max,
                       char *err)
{
    out->len = 0;
    Slurp sl = {url, out, max};
    int rc = shard_source_each(url, remote, slurp_block, &sl, err);
    if (!rc && shard_buf_reserve(out, 1))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    if (!rc)
        out->data[out->len] = 0;
    return rc;
}

