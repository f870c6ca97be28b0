/*
 * The URL switch (open.h): the one place that turns a URL into the source that reads it.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/url.h"
#include "remote/lane.h"
#include "remote/handle.h"
#include "remote/remotedef.h"
#include "remote/xfer.h"
#include "source/filesource.h"
#include "source/open.h"
#include "source/pipe.h"
#include "source/remotesource.h"

/* What the sources one thread reads share: for remote ones, the network lane that thread
 * drives (made when the first needs it). */
struct ShardSourceThread {
    _Atomic(ShardNetLane *) lane; /* read by shard_source_thread_abort, from another thread */
    atomic_int aborted;
    atomic_int child; /* the process group of the pipe: command being read, 0: none */
};

ShardSourceThread *shard_source_thread_new(void)
{
    return calloc(1, sizeof(ShardSourceThread));
}

void shard_source_thread_free(ShardSourceThread **pt)
{
    if (!pt || !*pt)
        return;
    shard_lane_put(atomic_load(&(*pt)->lane)); /* its transfers went with their sources */
    free(*pt);
    *pt = NULL;
}

void shard_source_thread_abort(ShardSourceThread *t)
{
    atomic_store(&t->aborted, 1);
    ShardNetLane *lane = atomic_load(&t->lane);
    if (lane)
        shard_lane_abort(lane);
    int child = atomic_load(&t->child);
    if (child > 0)
        kill(-child, SIGTERM); /* its output ends: the read blocked on it returns */
}

int shard_source_thread_child(ShardSourceThread *t, int group)
{
    if (!t)
        return 0;
    if (group > 0) {
        atomic_store(&t->child, group);
        return atomic_load(&t->aborted);
    }
    atomic_store(&t->child, 0);
    return 0;
}

/* The lane of the thread's remote sources; NULL (the network thread) without a thread, or
 * out of memory. */
static ShardNetLane *thread_lane(ShardSourceThread *t)
{
    if (t && !atomic_load(&t->lane)) {
        atomic_store(&t->lane, shard_lane_new());
        if (atomic_load(&t->aborted) && atomic_load(&t->lane)) /* stopped meanwhile */
            shard_lane_abort(atomic_load(&t->lane));
    }
    return t ? atomic_load(&t->lane) : NULL;
}

int shard_source_open_on(ShardSource **out, const char *url, ShardRemote *remote, int flags,
                         ShardSourceThread *thread, char *err)
{
    *out = NULL;
    if (shard_url_is_remote(url))
        return shard_source_remote(out, url, remote, flags, thread_lane(thread), err);
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

