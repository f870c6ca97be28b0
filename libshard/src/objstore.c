/*
 * Remote objects (objstore.h): the scheme switch, and what every store shares.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objstore.h"
#include "url.h"

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
    *skip = 0;
    return SHARD_OBJ_HTTP;
}

int shard_url_is_remote(const char *url)
{
    return !strncmp(url, "http://", 7) || !strncmp(url, "https://", 8) ||
           !strncmp(url, "gs://", 5) || !strncmp(url, "s3://", 5);
}

int shard_object_parse(ShardObject *o, const char *url, char *err)
{
    memset(o, 0, sizeof *o);
    o->url = url;
    size_t skip;
    o->kind = kind_of(url, &skip);
    if (o->kind == SHARD_OBJ_HTTP)
        return 0;
    const char *b = url + skip, *slash = strchr(b, '/');
    if (slash == b || !*b)
        return shard_fail(err, SHARD_ERR_INVALID, "%s: no bucket (want %.5sBUCKET/NAME)", url,
                          url);
    size_t nb = slash ? (size_t)(slash - b) : strlen(b);
    o->bucket = malloc(nb + 1);
    o->key = shard_strdup(slash ? slash + 1 : "");
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
    default:
        q->url = shard_strdup(o->url);
        rc = q->url ? 0 : shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        break;
    }
    if (!rc && pin && !(q->if_range = shard_strdup(pin)))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    return rc;
}

const char *shard_object_version(const ShardObject *o, const ShardResponse *rs)
{
    if (o->kind == SHARD_OBJ_GCS)
        return rs->generation;
    return rs->etag[0] ? rs->etag : rs->last_modified;
}

/* The text between <tag> and </tag>, or after "key": "...", into out. */
static int grab(const char *body, const char *open, const char *close, char *out, size_t cap)
{
    const char *a = strstr(body, open);
    if (!a)
        return 0;
    a += strlen(open);
    const char *b = strstr(a, close);
    size_t n = b ? (size_t)(b - a) : strlen(a);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, a, n);
    out[n] = 0;
    return 1;
}

void shard_object_reason(const char *body, char *out, size_t cap)
{
    out[0] = 0;
    char code[96], msg[160];
    if (grab(body, "<Code>", "</Code>", code, sizeof code)) {
        if (grab(body, "<Message>", "</Message>", msg, sizeof msg))
            snprintf(out, cap, ": %s: %s", code, msg);
        else
            snprintf(out, cap, ": %s", code);
    } else if (grab(body, "\"message\": \"", "\"", msg, sizeof msg) ||
               grab(body, "\"message\":\"", "\"", msg, sizeof msg)) {
        snprintf(out, cap, ": %s", msg);
    }
}

int shard_object_list_page(ShardRemote *r, const ShardObject *prefix, ShardBuildFn build,
                           void *cookie, ShardBuf *body, char *err)
{
    long status;
    int rc = shard_net_fetch(r, prefix->url, build, cookie, body, 64u << 20, r->s.retries,
                             &status, err);
    if (!rc && status != 200) {
        char reason[256];
        shard_object_reason((char *)body->data, reason, sizeof reason);
        rc = shard_fail(err, status == 404 ? SHARD_ERR_NOT_FOUND : SHARD_ERR_IO,
                        "%s: listing failed (HTTP %ld%s)", prefix->url, status, reason);
    }
    return rc;
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
    default:
        rc = shard_fail(err, SHARD_ERR_UNSUPPORTED,
                        "%s: plain HTTP has no listing: name the shards (a brace pattern or a "
                        "manifest), or use gs:// or s3://",
                        url);
    }
    shard_object_clear(&o);
    return rc;
}
