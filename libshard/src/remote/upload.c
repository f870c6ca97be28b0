/*
 * Writing objects into the stores (gs://, s3://), for the bucket sink (sink/objectsink.c): an
 * object in one request, or in parts as its bytes come, the size told with the last: a GCS
 * resumable session (each chunk's Content-Range gives the total as "*", unknown, until the
 * last; a cut chunk goes on from what the session says it holds) or an S3 multipart upload (a failed part is
 * sent again; the part list completes it). In both stores an object exists only once its
 * upload completes: nobody reads half a shard. An upload dropped is aborted (S3) or its
 * session cancelled (GCS), so no parts are left to pay for.
 *
 * Retries, backoff and the messages naming the URL are retry.c's (shard_request_whole).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/crc32c.h"
#include "base/digest.h"
#include "base/error.h"
#include "remote/gcs.h"
#include "remote/object.h"
#include "remote/s3.h"
#include "remote/remotedef.h"
#include "remote/request.h"
#include "remote/retry.h"
#include "remote/upload.h"
#include "remote/xfer.h"
#include "remote/xml.h"

typedef struct Put {
    ShardRemote *r;
    const ShardObject *o;
    const char *method;
    const char *what;    /* GCS: "media", "resumable", "delete"; S3: the query or NULL */
    const char *session; /* GCS: a resumable session URI */
    const void *body;
    size_t len;
    const char *range;   /* GCS: Content-Range for a session request */
    const char *hash;    /* the checksum header a store checks the body against, or NULL */
} Put;

static int build_put(void *cookie, ShardRequest *q, char *err)
{
    Put *p = cookie;
    int rc = p->o->kind == SHARD_OBJ_GCS
                 ? shard_gcs_write_request(p->r, p->o, p->what, p->session, q, err)
                 : shard_s3_request_query(p->r, p->o, p->what, q, err);
    if (rc)
        return rc;
    q->method = p->method;
    q->body = p->body;
    q->body_len = p->len;
    if (p->range && shard_request_header(q, "Content-Range: %s", p->range))
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    if (p->body && shard_request_header(q, "Content-Type: application/octet-stream"))
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    if (p->hash && shard_request_header(q, "%s", p->hash))
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    return 0;
}

/* S3 checks a body against its Content-MD5 (BadDigest): a store that kept fewer bytes, or
 * others, refuses them. */
static int content_md5(const void *p, size_t n, char *line, size_t cap)
{
    char b64[25];
    if (shard_md5_base64(p, n, b64))
        return SHARD_ERR_NOMEM;
    snprintf(line, cap, "Content-MD5: %s", b64);
    return 0;
}

/* GCS keeps every object's CRC-32C and answers an upload with it: an object whose CRC is not
 * what was sent is removed and the upload refused. */
static int gcs_check(ShardRemote *r, const ShardObject *o, const ShardBuf *body, uint32_t crc,
                     char *err)
{
    char sent[9];
    shard_crc32c_base64(crc, sent);
    json_t *j = body->data ? json_loadb((const char *)body->data, body->len, 0, NULL) : NULL;
    const char *held = j ? json_string_value(json_object_get(j, "crc32c")) : NULL;
    int rc = 0;
    if (held && strcmp(held, sent)) {
        rc = shard_fail(err, SHARD_ERR_CHECKSUM, "%s: the store holds other bytes than were "
                        "sent (CRC-32C %.16s there, %s sent): the object is removed",
                        o->url, held, sent);
        char e2[SHARD_ERROR_MAX];
        shard_object_delete(r, o->url, e2);
    }
    json_decref(j);
    return rc;
}

/* One request with the store's retries; the answer's body in *body, its headers in *rs. */
static int put_send(Put *p, ShardBuf *body, ShardResponse *rs, long *status, int retries, char *err)
{
    return shard_request_whole(p->r, p->o->url, build_put, p, body, 1u << 20, retries, status, rs, err);
}

static int refused(const ShardObject *o, const char *step, long status, const ShardBuf *body,
                   char *err)
{
    char why[256];
    shard_store_reason(body->data ? (const char *)body->data : "", why, sizeof why);
    return shard_fail(err, status == 404 ? SHARD_ERR_NOT_FOUND : SHARD_ERR_IO, "%s: %s: HTTP %ld%s",
                      o->url, step, status, why);
}

struct ShardUpload {
    ShardRemote *r;
    ShardObject o;
    char *url;       /* o.url points here */
    uint64_t off;    /* bytes the store holds */
    /* GCS */
    char *session;
    uint32_t crc;    /* of the bytes given so far */
    /* S3 */
    ShardBuf id;     /* the UploadId, %-encoded */
    ShardBuf done;   /* <CompleteMultipartUpload> so far */
    unsigned number; /* the next part's number */
};

static int nomem(char *err)
{
    return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
}

/* ---- GCS: resumable session ------------------------------------------------------------- */

static int gcs_begin(ShardUpload *u, char *err)
{
    ShardBuf body = {0};
    ShardResponse rs;
    long st;
    Put start = {u->r, &u->o, "POST", "resumable", NULL, NULL, 0, NULL, NULL};
    int rc = put_send(&start, &body, &rs, &st, u->r->s.retries, err);
    if (!rc && (st != 200 || !rs.location[0]))
        rc = st == 200 ? shard_fail(err, SHARD_ERR_IO, "%s: the store gave no upload session", u->o.url)
                       : refused(&u->o, "starting a resumable upload", st, &body, err);
    if (!rc && !(u->session = strdup(rs.location)))
        rc = nomem(err);
    shard_buf_free(&body);
    return rc;
}

/* "bytes A-B/T" for n bytes at off, T "*" until the last chunk; "bytes * /T" for none. */
static void gcs_range(char *out, size_t cap, uint64_t off, size_t n, int last)
{
    char total[32] = "*";
    if (last)
        snprintf(total, sizeof total, "%llu", (unsigned long long)(off + n));
    if (n)
        snprintf(out, cap, "bytes %llu-%llu/%s", (unsigned long long)off,
                 (unsigned long long)(off + n - 1), total);
    else
        snprintf(out, cap, "bytes */%s", total);
}

/* The session's CRC-32C on to n more bytes, and for the last chunk the header with the whole
 * object's, which the store checks as it completes it ("" before). */
static void gcs_hash(ShardUpload *u, const void *p, size_t n, int last, char *line, size_t cap)
{
    u->crc = shard_crc32c(u->crc, p, n);
    line[0] = 0;
    if (last) {
        char b64[9];
        shard_crc32c_base64(u->crc, b64);
        snprintf(line, cap, "X-Goog-Hash: crc32c=%s", b64);
    }
}

/* n bytes at u->off, sent until the session holds them all (and, for the last, the object
 * is complete). The session may keep less than a chunk: the rest is sent again. */
static int gcs_part(ShardUpload *u, const unsigned char *p, size_t n, int last, char *err)
{
    ShardRemote *r = u->r;
    const ShardObject *o = &u->o;
    uint64_t start = u->off, end = start + n;
    ShardBuf body = {0};
    ShardResponse rs;
    long st;
    int attempt = 0, rc = 0;
    char hash[64];
    gcs_hash(u, p, n, last, hash, sizeof hash);
    for (;;) {
        size_t k = (size_t)(end - u->off);
        char range[96];
        gcs_range(range, sizeof range, u->off, k, last);
        Put chunk = {r, o, "PUT", NULL, u->session, p + (u->off - start), k, range,
                     last ? hash : NULL};
        char e2[SHARD_ERROR_MAX];
        int sent = put_send(&chunk, &body, &rs, &st, 0, e2);
        if (!sent && (st == 200 || st == 201)) {
            rc = last ? gcs_check(r, o, &body, u->crc, err)
                      : shard_fail(err, SHARD_ERR_IO, "%s: the store completed the upload "
                                   "before its last part", o->url);
            u->off = end;
            break;
        }
        if (!sent && st == 308) { /* on from what the session holds (no Range: nothing) */
            uint64_t held = rs.persisted >= 0 ? (uint64_t)rs.persisted : 0;
            if (held > end || held < start) {
                rc = shard_fail(err, SHARD_ERR_FORMAT, "%s: the session says it holds %llu bytes, "
                                "not %llu to %llu", o->url, (unsigned long long)held,
                                (unsigned long long)start, (unsigned long long)end);
                break;
            }
            if (held == end && !last) {
                u->off = end;
                break;
            }
            if (held > u->off) {
                u->off = held;
                attempt = 0;
                continue;
            }
            u->off = held; /* no progress: counts against the retries below */
            if (attempt >= r->s.retries) {
                rc = shard_fail(err, SHARD_ERR_IO, "%s: the upload makes no progress at byte %llu",
                                o->url, (unsigned long long)held);
                break;
            }
            char reason[80];
            snprintf(reason, sizeof reason, "the upload makes no progress at byte %llu",
                     (unsigned long long)held);
            shard_stat_add(&r->st.retries, 1);
            shard_backoff(r, attempt++, r->s.retries, 0, o->url, reason);
            continue;
        }
        if (!sent && !shard_retryable(SHARD_NET_OK, st)) {
            rc = refused(o, "uploading a part", st, &body, err);
            break;
        }
        if (attempt >= r->s.retries) {
            rc = sent ? shard_fail(err, sent, "%s (a part at byte %llu, after %d retries)", e2,
                                   (unsigned long long)u->off, attempt)
                      : shard_fail(err, SHARD_ERR_IO, "%s: HTTP %ld at byte %llu after %d retries", o->url,
                                   st, (unsigned long long)u->off, attempt);
            break;
        }
        /* a cut or a 5xx: ask the session what it holds, and go on from there */
        char reason[SHARD_ERROR_MAX + 40];
        if (sent)
            snprintf(reason, sizeof reason, "a part at byte %llu: %s", (unsigned long long)u->off, e2);
        else
            snprintf(reason, sizeof reason, "a part at byte %llu: HTTP %ld",
                     (unsigned long long)u->off, st);
        shard_stat_add(&r->st.retries, 1);
        shard_backoff(r, attempt++, r->s.retries, 0, o->url, reason);
        char ask_range[64];
        gcs_range(ask_range, sizeof ask_range, end, 0, last);
        Put ask = {r, o, "PUT", NULL, u->session, NULL, 0, ask_range, NULL};
        if (!put_send(&ask, &body, &rs, &st, r->s.retries, e2)) {
            if (st == 200 || st == 201) {
                rc = last ? 0 : shard_fail(err, SHARD_ERR_IO, "%s: the store completed the upload "
                                           "before its last part", o->url);
                u->off = end;
                break; /* it was all in */
            }
            if (st == 308) {
                uint64_t held = rs.persisted >= 0 ? (uint64_t)rs.persisted : 0;
                if (held >= start && held <= end)
                    u->off = held;
                shard_stat_add(&r->st.resumes, 1);
            }
        }
    }
    shard_buf_free(&body);
    return rc;
}

/* ---- S3: multipart upload ----------------------------------------------------------------- */

static int s3_begin(ShardUpload *u, char *err)
{
    ShardBuf body = {0}, id = {0};
    ShardResponse rs;
    long st;
    Put start = {u->r, &u->o, "POST", "uploads=", NULL, NULL, 0, NULL, NULL};
    int rc = put_send(&start, &body, &rs, &st, u->r->s.retries, err);
    if (!rc && st != 200)
        rc = refused(&u->o, "starting a multipart upload", st, &body, err);
    const char *reply = body.data ? (const char *)body.data : "";
    int found = rc ? 0 : shard_xml_text(&reply, NULL, "UploadId", &id);
    if (!rc && found <= 0)
        rc = found < 0 ? nomem(err)
                       : shard_fail(err, SHARD_ERR_FORMAT, "%s: the store's reply names no UploadId",
                                    u->o.url);
    if (!rc && (shard_url_encode(&u->id, (const char *)id.data, 0) ||
                shard_buf_printf(&u->done, "<CompleteMultipartUpload>")))
        rc = nomem(err);
    u->number = 1;
    shard_buf_free(&body);
    shard_buf_free(&id);
    return rc;
}

static int s3_part(ShardUpload *u, const unsigned char *p, size_t n, char *err)
{
    ShardBuf body = {0}, q = {0};
    ShardResponse rs;
    long st;
    int rc = 0;
    if (shard_buf_printf(&q, "partNumber=%u&uploadId=%.*s", u->number, (int)u->id.len,
                         (const char *)u->id.data))
        rc = nomem(err);
    char md5[64];
    if (!rc)
        rc = content_md5(p, n, md5, sizeof md5) ? nomem(err) : 0;
    Put up = {u->r, &u->o, "PUT", (const char *)q.data, NULL, p, n, NULL, md5};
    if (!rc)
        rc = put_send(&up, &body, &rs, &st, u->r->s.retries, err);
    if (!rc && (st != 200 || !rs.etag[0]))
        rc = st == 200 ? shard_fail(err, SHARD_ERR_IO, "%s: part %u came back without an ETag",
                                    u->o.url, u->number)
                       : refused(&u->o, "uploading a part", st, &body, err);
    if (!rc && shard_buf_printf(&u->done, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                                u->number, rs.etag))
        rc = nomem(err);
    if (!rc) {
        u->number++;
        u->off += n;
    }
    shard_buf_free(&body);
    shard_buf_free(&q);
    return rc;
}

static int s3_finish(ShardUpload *u, char *err)
{
    ShardBuf body = {0}, q = {0};
    ShardResponse rs;
    long st;
    int rc = 0;
    if (shard_buf_printf(&u->done, "</CompleteMultipartUpload>") ||
        shard_buf_printf(&q, "uploadId=%.*s", (int)u->id.len, (const char *)u->id.data))
        rc = nomem(err);
    Put fin = {u->r, &u->o, "POST", (const char *)q.data, NULL, u->done.data, u->done.len,
               NULL, NULL};
    if (!rc)
        rc = put_send(&fin, &body, &rs, &st, u->r->s.retries, err);
    /* S3 may answer 200 and still fail the completion, in the body */
    if (!rc && (st != 200 || shard_xml_has((const char *)body.data, "Error")))
        rc = refused(&u->o, "completing the multipart upload", st, &body, err);
    shard_buf_free(&body);
    shard_buf_free(&q);
    return rc;
}

/* ---- the entry points --------------------------------------------------------------------- */

static int writable(ShardObject *o, const char *url, char *err)
{
    int rc = shard_object_parse(o, url, err);
    if (rc)
        return rc;
    if (o->kind == SHARD_OBJ_HTTP) {
        shard_object_clear(o);
        return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                          "%s: only gs:// and s3:// objects can be written, not plain HTTP "
                          "(it has no upload)", url);
    }
    return 0;
}

int shard_object_writable(const char *url, char *err)
{
    ShardObject o;
    int rc = writable(&o, url, err);
    if (!rc)
        shard_object_clear(&o);
    return rc;
}

/* the stores' bounds: a part is at most 5 GiB, S3 takes at most 10,000 of them, GCS takes
 * chunks in multiples of 256 KiB */
#define MAX_PART (5ull << 30)
#define MAX_S3_PARTS 10000
#define GCS_CHUNK (256u << 10)

int shard_upload_shape(ShardRemote *r, const char *url, size_t *part, unsigned *max_parts,
                       char *err)
{
    ShardObject o;
    int rc = writable(&o, url, err);
    if (rc)
        return rc;
    uint64_t p = r->s.upload_part < MAX_PART ? r->s.upload_part : MAX_PART;
    if (o.kind == SHARD_OBJ_GCS)
        p = (p + GCS_CHUNK - 1) / GCS_CHUNK * GCS_CHUNK;
    *part = p > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)p;
    *max_parts = o.kind == SHARD_OBJ_S3 ? MAX_S3_PARTS : 0;
    shard_object_clear(&o);
    return 0;
}

int shard_object_put(ShardRemote *r, const char *url, const void *p, size_t n, char *err)
{
    ShardObject o;
    int rc = writable(&o, url, err);
    if (rc)
        return rc;
    ShardBuf body = {0};
    ShardResponse rs;
    long status;
    char hash[96], b64[25], crc64[9];
    uint32_t crc = shard_crc32c(0, p ? p : "", n);
    if (shard_md5_base64(p ? p : "", n, b64)) {
        shard_object_clear(&o);
        return nomem(err);
    }
    shard_crc32c_base64(crc, crc64);
    if (o.kind == SHARD_OBJ_GCS)
        snprintf(hash, sizeof hash, "X-Goog-Hash: crc32c=%s,md5=%s", crc64, b64);
    else
        snprintf(hash, sizeof hash, "Content-MD5: %s", b64);
    Put put = {r, &o, o.kind == SHARD_OBJ_GCS ? "POST" : "PUT", o.kind == SHARD_OBJ_GCS ? "media" : NULL,
               NULL, p ? p : "", n, NULL, hash};
    rc = put_send(&put, &body, &rs, &status, r->s.retries, err);
    if (!rc && status != 200 && status != 201)
        rc = refused(&o, "upload", status, &body, err);
    if (!rc && o.kind == SHARD_OBJ_GCS)
        rc = gcs_check(r, &o, &body, crc, err);
    shard_buf_free(&body);
    shard_object_clear(&o);
    return rc;
}

int shard_upload_begin(ShardUpload **out, ShardRemote *r, const char *url, char *err)
{
    *out = NULL;
    ShardUpload *u = calloc(1, sizeof *u);
    if (!u || !(u->url = strdup(url))) {
        free(u);
        return nomem(err);
    }
    u->r = r;
    int rc = writable(&u->o, u->url, err);
    if (rc) {
        free(u->url);
        free(u);
        return rc;
    }
    rc = u->o.kind == SHARD_OBJ_GCS ? gcs_begin(u, err) : s3_begin(u, err);
    if (rc) {
        shard_upload_abort(u);
        return rc;
    }
    *out = u;
    return 0;
}

int shard_upload_part(ShardUpload *u, const void *p, size_t n, int last, char *err)
{
    return u->o.kind == SHARD_OBJ_GCS ? gcs_part(u, p, n, last, err) : s3_part(u, p, n, err);
}

static void upload_free(ShardUpload *u)
{
    free(u->session);
    shard_buf_free(&u->id);
    shard_buf_free(&u->done);
    shard_object_clear(&u->o);
    free(u->url);
    free(u);
}

int shard_upload_finish(ShardUpload *u, char *err)
{
    /* GCS completed the object with its last chunk */
    int rc = u->o.kind == SHARD_OBJ_S3 ? s3_finish(u, err) : 0;
    if (rc) {
        shard_upload_abort(u);
        return rc;
    }
    upload_free(u);
    return 0;
}

void shard_upload_abort(ShardUpload *u)
{
    if (!u)
        return;
    ShardBuf body = {0}, q = {0};
    ShardResponse rs;
    long st;
    char e2[SHARD_ERROR_MAX];
    if (u->o.kind == SHARD_OBJ_S3 && u->id.len &&
        !shard_buf_printf(&q, "uploadId=%.*s", (int)u->id.len, (const char *)u->id.data)) {
        Put abort_ = {u->r, &u->o, "DELETE", (const char *)q.data, NULL, NULL, 0, NULL, NULL};
        put_send(&abort_, &body, &rs, &st, 1, e2);
    } else if (u->o.kind == SHARD_OBJ_GCS && u->session) {
        Put cancel = {u->r, &u->o, "DELETE", NULL, u->session, NULL, 0, NULL, NULL};
        put_send(&cancel, &body, &rs, &st, 1, e2); /* GCS answers 499: cancelled */
    }
    shard_buf_free(&body);
    shard_buf_free(&q);
    upload_free(u);
}

int shard_object_delete(ShardRemote *r, const char *url, char *err)
{
    ShardObject o;
    int rc = writable(&o, url, err);
    if (rc)
        return rc;
    ShardBuf body = {0};
    ShardResponse rs;
    long status;
    Put p = {r, &o, "DELETE", o.kind == SHARD_OBJ_GCS ? "delete" : NULL, NULL, NULL, 0, NULL, NULL};
    rc = put_send(&p, &body, &rs, &status, r->s.retries, err);
    if (!rc && status != 200 && status != 204 && status != 404)
        rc = refused(&o, "delete", status, &body, err);
    shard_buf_free(&body);
    shard_object_clear(&o);
    return rc;
}
