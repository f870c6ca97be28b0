/*
 * Remote objects (object.h): the bucket switch (gs://, s3://, hf://), and what every remote
 * object shares.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "remote/gcs.h"
#include "remote/hf.h"
#include "remote/object.h"
#include "remote/request.h"
#include "remote/s3.h"
#include "remote/xfer.h"

static ShardObjectKind kind_of(const char *url, size_t *skip)
{
    if (!strncmp(url, "gs://", 5)) {
        *skip = 5;
        return SHARD_OBJ_GCS;
    }
    if (!strncmp(url, "s3://", 5)) {
        *skip = 5;
        return SHARD_OBJ_S3;
    }
    if (!strncmp(url, "hf://", 5)) {
        *skip = 5;
        return SHARD_OBJ_HF;
    }
    *skip = 0;
    return SHARD_OBJ_HTTP;
}

int shard_object_parse(ShardObject *o, const char *url, char *err)
{
    memset(o, 0, sizeof *o);
    o->url = url;
    size_t skip;
    o->kind = kind_of(url, &skip);
    if (o->kind == SHARD_OBJ_HTTP)
        return 0;
    if (o->kind == SHARD_OBJ_HF) {
        int rc = shard_hf_parse(o, url, err);
        if (rc)
            shard_object_clear(o);
        return rc;
    }
    const char *b = url + skip, *slash = strchr(b, '/');
    if (slash == b || !*b)
        return shard_fail(err, SHARD_ERR_INVALID, "%s: no bucket (want %.5sBUCKET/NAME)", url,
                          url);
    size_t nb = slash ? (size_t)(slash - b) : strlen(b);
    o->bucket = malloc(nb + 1);
    o->key = strdup(slash ? slash + 1 : "");
    if (!o->bucket || !o->key) {
        shard_object_clear(o);
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    }
    memcpy(o->bucket, b, nb);
    o->bucket[nb] = 0;
    return 0;
}

void shard_object_clear(ShardObject *o)
{
    free(o->bucket);
    free(o->key);
    free(o->rev);
    memset(o, 0, sizeof *o);
}

int shard_object_request(ShardRemote *r, const ShardObject *o, const char *pin, ShardRequest *q,
                         char *err)
{
    int rc;
    switch (o->kind) {
    case SHARD_OBJ_GCS:
        return shard_gcs_request(r, o, pin, q, err);
    case SHARD_OBJ_S3:
        rc = shard_s3_request(r, o, q, err);
        break;
    case SHARD_OBJ_HF:
        rc = shard_hf_request(r, o, q, err);
        break;
    default:
        q->url = strdup(o->url);
        rc = q->url ? 0 : shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        break;
    }
    if (!rc && pin && !(q->if_range = strdup(pin)))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    return rc;
}

const char *shard_object_version(const ShardObject *o, const ShardResponse *rs)
{
    if (o->kind == SHARD_OBJ_GCS)
        return rs->generation;
    return rs->etag[0] ? rs->etag : rs->last_modified;
}

int64_t shard_object_direct_until(const ShardObject *o, const ShardResponse *rs)
{
    if (o->kind != SHARD_OBJ_HF || !rs->redirected[0])
        return 0;
    int64_t until = shard_hf_link_until(rs->redirected);
    return until == INT64_MAX ? 0 : until; /* a link that states no expiry is no signed one */
}

int shard_object_list(ShardRemote *r, const char *url, ShardListFn fn, void *cookie, char *err)
{
    ShardObject o;
    int rc = shard_object_parse(&o, url, err);
    if (rc)
        return rc;
    switch (o.kind) {
    case SHARD_OBJ_GCS:
        rc = shard_gcs_list(r, &o, fn, cookie, err);
        break;
    case SHARD_OBJ_S3:
        rc = shard_s3_list(r, &o, fn, cookie, err);
        break;
    case SHARD_OBJ_HF:
        rc = shard_hf_list(r, &o, fn, cookie, err);
        break;
    default:
        rc = shard_fail(err, SHARD_ERR_UNSUPPORTED,
                        "%s: plain HTTP has no listing: name the shards (a brace pattern or a "
                        "manifest), or use gs:// or s3://",
                        url);
    }
    shard_object_clear(&o);
    return rc;
}
