/*
 * The URL switch (open.h): the one place that turns a URL into the source that reads it,
 * tells what kind of place a URL names, and lists a folder or a bucket's prefix.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/url.h"
#include "remote/handle.h"
#include "remote/store.h"
#include "source/filesource.h"
#include "source/open.h"
#include "source/pipe.h"
#include "source/remotesource.h"
#include "source/sourcethread.h"

int shard_source_open_on(ShardSource **out, const char *url, ShardRemote *remote, int flags,
                         ShardSourceThread *thread, char *err)
{
    *out = NULL;
    if (shard_url_is_remote(url))
        return shard_source_remote(out, url, remote, flags, shard_source_thread_lane(thread),
                                   err);
    int rc;
    if (shard_url_is_command(url))
        rc = shard_source_pipe(out, url, url + 5, thread, err);
    else if (shard_url_file_path(url))
        rc = shard_source_file(out, shard_url_file_path(url), flags, err);
    else if (shard_url_has_scheme(url))
        return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                          "%s: unsupported scheme '%.*s' (libshard reads paths, file:///PATH, "
                          "pipe:, http://, https://, gs:// and s3://)",
                          url, (int)(strstr(url, "://") - url), url);
    else
        rc = shard_source_file(out, url, flags, err);
    if (!rc && remote)
        (*out)->remote = shard_remote_ref(remote);
    return rc;
}

int shard_source_open(ShardSource **out, const char *url, ShardRemote *remote, int flags,
                      char *err)
{
    return shard_source_open_on(out, url, remote, flags, NULL, err);
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


unsigned shard_source_place(const char *url)
{
    if (shard_url_is_remote(url))
        return SHARD_PLACE_REMOTE | (shard_url_is_prefix(url) ? SHARD_PLACE_PREFIX : 0);
    if (shard_url_is_command(url))
        return SHARD_PLACE_COMMAND;
    return shard_source_local_path(url) ? SHARD_PLACE_LOCAL : 0;
}

const char *shard_source_local_path(const char *url)
{
    const char *p = shard_url_file_path(url);
    return p ? p : shard_url_has_scheme(url) || shard_url_is_command(url) ? NULL : url;
}

int shard_source_list(const char *url, ShardRemote *remote, ShardListFn fn, void *cookie,
                      char *err)
{
    unsigned place = shard_source_place(url);
    if (place & SHARD_PLACE_PREFIX) {
        ShardRemote *r = shard_remote_resolve(remote, err);
        if (!r)
            return SHARD_ERR_NOMEM;
        int rc = shard_object_list(r, url, fn, cookie, err);
        shard_remote_put(r);
        return rc;
    }
    const char *path = place & SHARD_PLACE_LOCAL ? shard_source_local_path(url) : NULL;
    return path ? shard_file_list(path, fn, cookie, err) : 1;
}
