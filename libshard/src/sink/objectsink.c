/*
 * Objects in buckets (objectsink.h): the bytes collect in a buffer of one part (the remote's
 * upload_part; for GCS rounded up to a multiple of 256 KiB). An object that ends within its
 * first part goes up in one request at commit. One that outgrows it starts an upload in
 * parts (remote/upload.h) and sends each part once the next byte past it arrives, so the
 * last part, sent at commit, is never empty and tells GCS the size. Memory is one part;
 * nothing is staged on disk, so a killed writer leaves nothing here to sweep, and in the
 * store only an unfinished upload, which no reader sees (S3 keeps its parts until the
 * bucket's lifecycle rule for incomplete multipart uploads aborts them; a GCS session
 * lapses after a week).
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "remote/handle.h"
#include "remote/upload.h"
#include "shard/common.h"
#include "sink/objectsink.h"

typedef struct Bucket {
    ShardRemote *r; /* a reference */
    char *url;
    size_t part;
    ShardBuf held;     /* the part being filled, at most part bytes */
    ShardUpload *up;   /* NULL until the object outgrows one part */
    unsigned parts;    /* sent so far */
    unsigned max_parts; /* the store's limit (0: none) */
} Bucket;

static int send_held(Bucket *b, int last, char *err)
{
    if (b->max_parts && b->parts == b->max_parts)
        return shard_fail(err, SHARD_ERR_UNSUPPORTED, "%s: more than %u parts of %zu bytes, the "
                          "store's limit: a larger upload_part is needed", b->url, b->max_parts,
                          b->part);
    b->parts++;
    int rc = 0;
    if (!b->up)
        rc = shard_upload_begin(&b->up, b->r, b->url, err);
    if (!rc)
        rc = shard_upload_part(b->up, b->held.data, b->held.len, last, err);
    b->held.len = 0;
    return rc;
}

static int object_put(ShardSink *k, const unsigned char *p, size_t n, char *err)
{
    Bucket *b = k->impl;
    while (n) {
        if (b->held.len == b->part) {
            int rc = send_held(b, 0, err);
            if (rc)
                return rc;
        }
        size_t room = b->part - b->held.len, m = n < room ? n : room;
        if (shard_buf_append(&b->held, p, m))
            return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory (a part of %zu bytes)",
                              b->url, b->part);
        p += m;
        n -= m;
    }
    return 0;
}

static int object_commit(ShardSink *k, char *err)
{
    Bucket *b = k->impl;
    if (!b->up) {
        int rc = shard_object_put(b->r, b->url, b->held.data, b->held.len, err);
        b->held.len = 0;
        return rc;
    }
    int rc = send_held(b, 1, err);
    ShardUpload *up = b->up;
    b->up = NULL;
    if (rc) {
        shard_upload_abort(up);
        return rc;
    }
    return shard_upload_finish(up, err);
}

static void object_drop(ShardSink *k)
{
    Bucket *b = k->impl;
    if (!b)
        return;
    shard_upload_abort(b->up);
    shard_buf_free(&b->held);
    if (b->r)
        shard_remote_put(b->r);
    free(b->url);
    free(b);
    k->impl = NULL;
}

static const ShardSinkOps object_ops = {object_put, object_commit, object_drop};

int shard_sink_object_open(ShardSink *k, const char *url, ShardRemote *r, char *err)
{
    int rc = shard_object_writable(url, err);
    if (rc)
        return rc;
    Bucket *b = calloc(1, sizeof *b);
    if (!b)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    k->impl = b;
    k->ops = &object_ops;
    if (!(b->url = strdup(url)))
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    b->r = shard_remote_resolve(r, err);
    if (!b->r)
        return SHARD_ERR_NOMEM;
    return shard_upload_shape(b->r, url, &b->part, &b->max_parts, err);
}
