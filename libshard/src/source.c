/*
 * Sources (source.h): the calls every reader makes, and the memory source.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"

static void source_release(ShardHold *h)
{
    ShardSource *s = (ShardSource *)h; /* the hold is the source's first member */
    if (s->ops->close)
        s->ops->close(s);
    free(s->url);
    free(s);
}

ShardSource *shard_source_new(const ShardSourceOps *ops, const char *url)
{
    ShardSource *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->url = shard_strdup(url);
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

ssize_t shard_source_read(ShardSource *s, const void **block)
{
    ssize_t n = s->ops->read(s, block);
    if (n > 0)
        s->pos += (uint64_t)n;
    return n;
}

int64_t shard_source_skip(ShardSource *s, int64_t n)
{
    if (!s->ops->skip || n <= 0)
        return 0;
    int64_t k = s->ops->skip(s, n);
    if (k > 0)
        s->pos += (uint64_t)k;
    return k;
}

int shard_source_read_at(ShardSource *s, uint64_t off, void *buf, size_t n)
{
    if (!s->ops->read_at)
        return shard_fail(s->err, SHARD_ERR_UNSUPPORTED, "%s: no random access (a stream)",
                          s->url);
    if (s->size >= 0 && (off > (uint64_t)s->size || n > (uint64_t)s->size - off))
        return shard_fail(s->err, SHARD_ERR_FORMAT,
                          "%s: bytes %llu..%llu lie past the end of the object (%lld bytes)",
                          s->url, (unsigned long long)off, (unsigned long long)(off + n),
                          (long long)s->size);
    return n ? s->ops->read_at(s, off, buf, n) : 0;
}

const unsigned char *shard_source_view(ShardSource *s, uint64_t off, size_t n, ShardBuf *tmp)
{
    if (s->map) {
        if (off > (uint64_t)s->size || n > (uint64_t)s->size - off) {
            shard_fail(s->err, SHARD_ERR_FORMAT,
                       "%s: bytes %llu..%llu lie past the end of the object (%lld bytes)",
                       s->url, (unsigned long long)off, (unsigned long long)(off + n),
                       (long long)s->size);
            return NULL;
        }
        return s->map + off;
    }
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
    return s->ops->hold ? s->ops->hold(s, p, n) : NULL;
}

int shard_source_finish(ShardSource *s)
{
    return s->ops->finish ? s->ops->finish(s) : 0;
}

/* ---- memory ---------------------------------------------------------------------------- */

typedef struct MemSource {
    int sent;
} MemSource;

static ssize_t mem_read(ShardSource *s, const void **block)
{
    MemSource *m = s->impl;
    if (m->sent || !s->size)
        return 0;
    m->sent = 1;
    *block = s->map;
    return (ssize_t)s->size;
}

static int mem_read_at(ShardSource *s, uint64_t off, void *buf, size_t n)
{
    memcpy(buf, s->map + off, n);
    return 0;
}

static ShardHold *mem_hold(ShardSource *s, const void *p, uint64_t n)
{
    const unsigned char *q = p;
    if (q < s->map || n > (uint64_t)s->size || (uint64_t)(q - s->map) > (uint64_t)s->size - n)
        return NULL;
    return shard_hold_ref(&s->hold);
}

static void mem_close(ShardSource *s) { free(s->impl); }

static const ShardSourceOps mem_ops = {
    .kind = "memory",
    .read = mem_read,
    .read_at = mem_read_at,
    .hold = mem_hold,
    .close = mem_close,
};

int shard_source_memory(ShardSource **out, const void *data, size_t size, const char *url,
                        char *err)
{
    *out = NULL;
    ShardSource *s = shard_source_new(&mem_ops, url ? url : "memory");
    MemSource *m = s ? calloc(1, sizeof *m) : NULL;
    if (!m) {
        shard_source_put(s);
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url ? url : "memory");
    }
    s->impl = m;
    s->map = data;
    s->size = (int64_t)size;
    *out = s;
    return 0;
}
