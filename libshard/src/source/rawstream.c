/*
 * The raw bytes of a URL (shard/stream.h): a source opened by the URL switch, its blocks
 * copied out as the caller asks for them.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/error.h"
#include "base/text.h"
#include "shard/stream.h"
#include "source/open.h"
#include "source/source.h"
#include "source/rawstream.h"

struct ShardStream {
    ShardSource *src;
    const unsigned char *block; /* what is left of the source's last block */
    size_t left;
    uint64_t pos;
    int ended;                  /* the source said end, and finish was called */
    char err[SHARD_ERROR_MAX];
};

int shard_stream_open(ShardStream **out, const char *url, ShardRemote *remote, ShardError *err)
{
    *out = NULL;
    ShardStream *s = calloc(1, sizeof *s);
    if (!s)
        return shard_report(err, SHARD_ERR_NOMEM, NULL);
    /* a shard by its name goes through the remote's cache, as the readers' shards do */
    static const char *const shards[] = {".tar", ".tar.gz", ".tgz", ".tar.zst"};
    int flags = SHARD_SOURCE_SEQUENTIAL;
    for (size_t i = 0; i < sizeof shards / sizeof *shards; i++)
        if (shard_ends_with(url, shards[i]))
            flags |= SHARD_SOURCE_SHARD;
    int rc = shard_source_open(&s->src, url, remote, flags, s->err);
    if (rc) {
        shard_report(err, rc, s->err);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int64_t shard_stream_read(ShardStream *s, void *buf, size_t n)
{
    s->err[0] = 0;
    size_t got = 0;
    while (got < n) {
        if (!s->left) {
            if (s->ended || got) /* hand out what there is before waiting for more */
                break;
            const void *b;
            ssize_t k = shard_source_read(s->src, &b);
            if (k < 0)
                return shard_fail(s->err, (int)k, "%s", s->src->err);
            if (k == 0) {
                s->ended = 1;
                int rc = shard_source_finish(s->src); /* a pipe's exit status */
                if (rc)
                    return shard_fail(s->err, rc, "%s", s->src->err);
                break;
            }
            s->block = b;
            s->left = (size_t)k;
        }
        size_t m = n - got < s->left ? n - got : s->left;
        memcpy((unsigned char *)buf + got, s->block, m);
        s->block += m;
        s->left -= m;
        got += m;
    }
    s->pos += got;
    return (int64_t)got;
}

int64_t shard_stream_size(const ShardStream *s) { return s->src->size; }
uint64_t shard_stream_tell(const ShardStream *s) { return s->pos; }
const char *shard_stream_error(const ShardStream *s) { return s->err; }

int shard_stream_take_source(ShardStream **ps, ShardSource **src, char *err)
{
    ShardStream *s = *ps;
    *ps = NULL;
    *src = NULL;
    if (s->pos || s->left || s->ended) {
        int rc = shard_fail(err, SHARD_ERR_INVALID,
                            "%s: the stream was read from: a shard is read from its start",
                            s->src->url);
        shard_stream_free(&s);
        return rc;
    }
    *src = s->src; /* the stream's reference, now the caller's */
    free(s);
    return 0;
}

void shard_stream_free(ShardStream **ps)
{
    if (!ps || !*ps)
        return;
    shard_source_put((*ps)->src);
    free(*ps);
    *ps = NULL;
}
