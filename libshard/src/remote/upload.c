/*
 * Writing objects into the stores (gs://, s3://): what packing into a bucket needs. A file
 * up to the remote's upload_part goes up in one request; a larger one in parts of that size
 * read from the file one at a time, so memory stays bounded: a GCS resumable upload (a
 * cut part resumes from the bytes the session says it holds) or an S3 multipart upload (a
 * failed part is sent again; a failed upload is aborted). In both stores an object exists
 * only once its upload completes: nobody reads half a shard.
 *
 * Retries, backoff and the messages naming the URL are net.c's (shard_request_whole).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
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
    return 0;
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

/* n bytes of fd at off into buf; 0, or an error naming path. */
static int read_part(int fd, const char *path, uint64_t off, unsigned char *buf, size_t n, char *err)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return shard_fail(err, SHARD_ERR_IO, "%s: read failed at byte %llu: %s", path,
                              (unsigned long long)(off + got), k ? strerror(errno) : "file shrank");
        got += (size_t)k;
    }
    return 0;
}

/* ---- GCS: resumable upload ---------------------------------------------------------------- */

static int gcs_resumable(ShardRemote *r, const ShardObject *o, int fd, const char *path,
                         uint64_t size, unsigned char *buf, size_t part, char *err)
{
    ShardBuf body = {0};
    ShardResponse rs;
    long st;
    Put start = {r, o, "POST", "resumable", NULL, NULL, 0, NULL};
    int rc = put_send(&start, &body, &rs, &st, r->s.retries, err);
    if (!rc && (st != 200 || !rs.location[0]))
        rc = st == 200 ? shard_fail(err, SHARD_ERR_IO, "%s: the store gave no upload session", o->url)
                       : refused(o, "starting a resumable upload", st, &body, err);
    char *session = rc ? NULL : strdup(rs.location);
    if (!rc && !session)
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    uint64_t off = 0;
    int attempt = 0;
    while (!rc) {
        size_t n = size - off < part ? (size_t)(size - off) : part;
        char range[96];
        snprintf(range, sizeof range, "bytes %llu-%llu/%llu", (unsigned long long)off,
                 (unsigned long long)(off + n - 1), (unsigned long long)size);
        if ((rc = read_part(fd, path, off, buf, n, err)))
            break;
        Put chunk = {r, o, "PUT", NULL, session, buf, n, range};
        char e2[SHARD_ERROR_MAX];
        int sent = put_send(&chunk, &body, &rs, &st, 0, e2);
        if (!sent && (st == 200 || st == 201)) {
            rc = off + n == size ? 0 : shard_fail(err, SHARD_ERR_IO, "%s: the upload ended early", o->url);
            break;
        }
        if (!sent && st == 308) { /* on from what the session holds (no Range: nothing) */
            uint64_t held = rs.persisted >= 0 ? (uint64_t)rs.persisted : 0;
            if (held > size) {
                rc = shard_fail(err, SHARD_ERR_FORMAT, "%s: the session says it holds %llu of %llu bytes",
                                o->url, (unsigned long long)held, (unsigned long long)size);
                break;
            }
            if (held > off) {
                off = held;
                attempt = 0;
                continue;
            }
            off = held; /* no progress: counts against the retries below */
            if (attempt >= r->s.retries) {
                rc = shard_fail(err, SHARD_ERR_IO, "%s: the upload makes no progress at byte %llu", o->url,
                                (unsigned long long)off);
                break;
            }
            shard_stat_add(&r->st.retries, 1);
            shard_backoff(r, attempt++, 0);
            continue;
        }
        if (!sent && !shard_retryable(CURLE_OK, st)) {
            rc = refused(o, "uploading a part", st, &body, err);
            break;
        }
        if (attempt >= r->s.retries) {
            rc = sent ? shard_fail(err, sent, "%s", e2)
                      : shard_fail(err, SHARD_ERR_IO, "%s: HTTP %ld after %d retries", o->url, st, attempt);
            break;
        }
        /* a cut or a 5xx: ask the session what it holds, and go on from there */
        shard_stat_add(&r->st.retries, 1);
        shard_backoff(r, attempt++, 0);
        char status_range[64];
        snprintf(status_range, sizeof status_range, "bytes */%llu", (unsigned long long)size);
        Put ask = {r, o, "PUT", NULL, session, NULL, 0, status_range};
        if (!put_send(&ask, &body, &rs, &st, r->s.retries, e2)) {
            if (st == 200 || st == 201)
                break; /* it was all in */
            if (st == 308) {
                uint64_t held = rs.persisted >= 0 ? (uint64_t)rs.persisted : 0;
                off = held <= size ? held : off;
                shard_stat_add(&r->st.resumes, 1);
            }
        }
    }
    free(session);
    shard_buf_free(&body);
    return rc;
}

/* ---- S3: multipart upload ----------------------------------------------------------------- */

static int s3_multipart(ShardRemote *r, const ShardObject *o, int fd, const char *path,
                        uint64_t size, unsigned char *buf, size_t part, char *err)
{
    ShardBuf body = {0}, done = {0}, q = {0};
    ShardResponse rs;
    long st;
    ShardBuf id = {0};
    Put start = {r, o, "POST", "uploads=", NULL, NULL, 0, NULL};
    int rc = put_send(&start, &body, &rs, &st, r->s.retries, err);
    if (!rc && st != 200)
        rc = refused(o, "starting a multipart upload", st, &body, err);
    const char *reply = body.data ? (const char *)body.data : "";
    int found = rc ? 0 : shard_xml_text(&reply, NULL, "UploadId", &id);
    if (!rc && found <= 0)
        rc = found < 0 ? shard_fail(err, SHARD_ERR_NOMEM, "out of memory")
                       : shard_fail(err, SHARD_ERR_FORMAT, "%s: the store's reply names no UploadId",
                                    o->url);
    ShardBuf enc = {0};
    if (!rc && shard_url_encode(&enc, (const char *)id.data, 0))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    int started = !rc;
    if (!rc && shard_buf_printf(&done, "<CompleteMultipartUpload>"))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    unsigned number = 1;
    for (uint64_t off = 0; !rc && off < size; off += part, number++) {
        size_t n = size - off < part ? (size_t)(size - off) : part;
        if ((rc = read_part(fd, path, off, buf, n, err)))
            break;
        q.len = 0;
        if (shard_buf_printf(&q, "partNumber=%u&uploadId=%.*s", number, (int)enc.len, (const char *)enc.data)) {
            rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
            break;
        }
        Put up = {r, o, "PUT", (const char *)q.data, NULL, buf, n, NULL};
        rc = put_send(&up, &body, &rs, &st, r->s.retries, err);
        if (!rc && (st != 200 || !rs.etag[0]))
            rc = st == 200 ? shard_fail(err, SHARD_ERR_IO, "%s: part %u came back without an ETag", o->url, number)
                           : refused(o, "uploading a part", st, &body, err);
        if (!rc && shard_buf_printf(&done, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                                    number, rs.etag))
            rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    }
    if (!rc && shard_buf_printf(&done, "</CompleteMultipartUpload>"))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    if (!rc) {
        q.len = 0;
        if (shard_buf_printf(&q, "uploadId=%.*s", (int)enc.len, (const char *)enc.data))
            rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    }
    if (!rc) {
        Put fin = {r, o, "POST", (const char *)q.data, NULL, done.data, done.len, NULL};
        rc = put_send(&fin, &body, &rs, &st, r->s.retries, err);
        /* S3 may answer 200 and still fail the completion, in the body */
        if (!rc && (st != 200 || shard_xml_has((const char *)body.data, "Error")))
            rc = refused(o, "completing the multipart upload", st, &body, err);
    }
    if (rc && started) { /* nothing left behind to pay for: best effort */
        q.len = 0;
        char e2[SHARD_ERROR_MAX];
        if (!shard_buf_printf(&q, "uploadId=%.*s", (int)enc.len, (const char *)enc.data)) {
            Put abort_ = {r, o, "DELETE", (const char *)q.data, NULL, NULL, 0, NULL};
            put_send(&abort_, &body, &rs, &st, 1, e2);
        }
    }
    shard_buf_free(&body);
    shard_buf_free(&done);
    shard_buf_free(&q);
    shard_buf_free(&enc);
    shard_buf_free(&id);
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
                          "%s: only gs:// and s3:// objects can be written (plain HTTP has no upload)", url);
    }
    return 0;
}

int shard_object_upload(ShardRemote *r, const char *url, const char *path, char *err)
{
    ShardObject o;
    int rc = writable(&o, url, err);
    if (rc)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        shard_object_clear(&o);
        return shard_fail(err, shard_errno_code(e), "%s: cannot open for upload: %s", path, strerror(e));
    }
    uint64_t size = (uint64_t)st.st_size, part = r->s.upload_part;
    if (o.kind == SHARD_OBJ_GCS)
        part = (part + (256u << 10) - 1) / (256u << 10) * (256u << 10);
    size_t n = size <= part ? (size_t)size : (size_t)part;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf)
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    else if (size > part)
        rc = o.kind == SHARD_OBJ_GCS ? gcs_resumable(r, &o, fd, path, size, buf, n, err)
                                     : s3_multipart(r, &o, fd, path, size, buf, n, err);
    else if (!(rc = read_part(fd, path, 0, buf, n, err))) {
        ShardBuf body = {0};
        ShardResponse rs;
        long status;
        Put p = {r, &o, o.kind == SHARD_OBJ_GCS ? "POST" : "PUT", o.kind == SHARD_OBJ_GCS ? "media" : NULL,
                 NULL, buf, n, NULL};
        rc = put_send(&p, &body, &rs, &status, r->s.retries, err);
        if (!rc && status != 200 && status != 201)
            rc = refused(&o, "upload", status, &body, err);
        shard_buf_free(&body);
    }
    free(buf);
    close(fd);
    shard_object_clear(&o);
    return rc;
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
    Put p = {r, &o, "DELETE", o.kind == SHARD_OBJ_GCS ? "delete" : NULL, NULL, NULL, 0, NULL};
    rc = put_send(&p, &body, &rs, &status, r->s.retries, err);
    if (!rc && status != 200 && status != 204 && status != 404)
        rc = refused(&o, "delete", status, &body, err);
    shard_buf_free(&body);
    shard_object_clear(&o);
    return rc;
}
