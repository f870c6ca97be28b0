/*
 * The URL switch (open.h): the one place that turns a URL into the source that reads it,
 * by how its store's bytes travel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
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
    const char *path;
    unsigned can = shard_store_bytes(url, &path); /* asked once */
    int rc;
    if (path)
        rc = shard_source_file(out, path, flags, err);
    else if (can & SHARD_STORE_COMMAND)
        rc = shard_source_pipe(out, url, url + 5, thread, err);
    else if (can)
        return shard_source_remote(out, url, remote, flags, shard_source_thread_lane(thread),
                                   err);
    else
        return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                          "%s: unsupported scheme '%.*s' (libshard reads paths, file:///PATH, "
                          "pipe:, http://, https://, gs:// and s3://)",
                          url, (int)(strstr(url, "://") - url), url);
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
