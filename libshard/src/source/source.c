/*
 * Sources (source.h): the calls every reader makes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/error.h"
#include "remote/handle.h"
#include "source/source.h"

static void source_release(ShardHold *h)
{
    ShardSource *s = (ShardSource *)h; /* the hold is the source's first member */
    if (s->ops->close)
        s->ops->close(s);
    shard_remote_put(s->remote);
    free(s->url);
    free(s);
}

ShardSource *shard_source_new(const ShardSourceOps *ops, const char *url)
{
    ShardSource *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->url = strdup(url);
    if (!s->url) {
        free(s);
        return NULL;
    }
    atomic_init(&s->hold.refs, 1);
    s->hold.release = source_release;
    s->ops = ops;
    s->size = -1;
    return s;
}

/* A mapped source's stream is its mapping, handed out as one block (so that libarchive
 * gives member data as pointers into it), skipped by moving pos. */
ssize_t shard_source_read(ShardSource *s, const void **block)
{
    ssize_t n;
    if (s->map) {
        n = (ssize_t)((uint64_t)s->size - s->pos);
        *block = s->map + s->pos;
    } else {
        double t = shard_seconds();
        n = s->ops->read(s, block);
        s->cost.read_seconds += shard_seconds() - t;
    }
    if (n > 0) {
        s->pos += (uint64_t)n;
        s->cost.read_bytes += (uint64_t)n;
    }
    return n;
}

int64_t shard_source_skip(ShardSource *s, int64_t n)
{
    if (n <= 0)
        return 0;
    int64_t k;
    if (s->map)
        k = (uint64_t)n < (uint64_t)s->size - s->pos ? n : (int64_t)((uint64_t)s->size - s->pos);
    else if (s->ops->skip) {
        double t = shard_seconds();
        k = s->ops->skip(s, n);
        s->cost.read_seconds += shard_seconds() - t;
    } else {
        k = 0;
    }
    if (k > 0)
        s->pos += (uint64_t)k;
    return k;
}

/* Whether n bytes at off lie within the object; else SHARD_ERR_FORMAT with a message. */
static int in_range(ShardSource *s, uint64_t off, uint64_t n)
{
    if (s->size < 0 || (off <= (uint64_t)s->size && n <= (uint64_t)s->size - off))
        return 0;
    return shard_fail(s->err, SHARD_ERR_FORMAT,
                      "%s: bytes %llu..%llu lie past the end of the object (%lld bytes)", s->url,
                      (unsigned long long)off, (unsigned long long)(off + n), (long long)s->size);
}

int shard_source_read_at(ShardSource *s, uint64_t off, void *buf, size_t n)
{
    if (!shard_source_seekable(s))
        return shard_fail(s->err, SHARD_ERR_UNSUPPORTED, "%s: no random access (a stream)",
                          s->url);
    int rc = in_range(s, off, n);
    if (rc || !n)
        return rc;
    if (s->map) {
        memcpy(buf, s->map + off, n);
        return 0;
    }
    double t = shard_seconds();
    rc = s->ops->read_at(s, off, buf, n);
    s->cost.read_seconds += shard_seconds() - t;
    s->cost.read_bytes += rc ? 0 : n;
    return rc;
}

const unsigned char *shard_source_view(ShardSource *s, uint64_t off, size_t n, ShardBuf *tmp)
{
    if (s->map)
        return in_range(s, off, n) ? NULL : s->map + off;
    tmp->len = 0;
    if (shard_buf_reserve(tmp, n ? n : 1)) {
        shard_fail(s->err, SHARD_ERR_NOMEM, "%s: out of memory", s->url);
        return NULL;
    }
    if (shard_source_read_at(s, off, tmp->data, n))
        return NULL;
    tmp->len = n;
    return tmp->data;
}

ShardHold *shard_source_hold(ShardSource *s, const void *p, uint64_t n)
{
    const unsigned char *q = p;
    if (s->map) /* the mapping lives as long as the source: hold the source */
        return q >= s->map && n <= (uint64_t)s->size &&
                       (uint64_t)(q - s->map) <= (uint64_t)s->size - n
                   ? shard_hold_ref(&s->hold)
                   : NULL;
    return s->ops->hold ? s->ops->hold(s, p, n) : NULL;
}

int64_t shard_source_size(ShardSource *s)
{
    if (s->size < 0 && s->ops->stat && s->ops->stat(s))
        return -1;
    return s->size;
}

int shard_source_finish(ShardSource *s)
{
    return s->ops->finish ? s->ops->finish(s) : 0;
}
