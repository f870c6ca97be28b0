/*
 * Remote objects as sources (remotesource.h): http(s)://, gs://, s3://, streamed through a
 * transfer (remote/xfer.h) and, where the shard is cached (cache.h), teed to disk as it is
 * read.
 *
 * The stream survives a flaky network: a transfer that fails (cut, stalled, 429, 5xx) is
 * retried with backoff and resumed with a Range from the byte the reader reached. The
 * first response pins the object's version (its ETag or Last-Modified, or on GCS its
 * generation); every later response must come from that version, or the read fails as
 * "replaced" rather than splice two objects. A server that answers a Range with the whole
 * object is read past the bytes already handed out. The retry budget counts failures since
 * the last progress; when it is spent the error names the URL and the byte offset.
 *
 * An object whose store redirects to signed links (the Hub's resolve URL to its CDN) is
 * resolved once: later requests (a resume, a range) go straight to the link until it
 * expires or is refused, then through the resolve URL again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "remote/lane.h"
#include "remote/handle.h"
#include "remote/object.h"
#include "remote/request.h"
#include "remote/retry.h"
#include "remote/xfer.h"
#include "source/cache.h"
#include "source/remotesource.h"
#include "source/source.h"

typedef struct Remote {
    ShardRemote *r;
    ShardObject o;
    char pin[256];      /* the version read, "" until the first response */
    ShardXfer *x;       /* the stream's transfer, NULL between transfers */
    int judged;         /* x's response was checked (a prefetched one is not yet) */
    uint64_t drop;      /* bytes of x's body to pass over (a Range answered from 0) */
    int attempt;        /* failures since the last progress */
    int eof;
    ShardCacheFill *fill; /* the cache copy being written, or NULL */
    ShardNetLane *lane; /* where its transfers run (a reference), NULL: the network thread */
    char *direct;       /* the signed link a resolve led to, asked straight, or NULL */
    int64_t direct_until; /* its expiry (seconds since 1970) */
    int refused;        /* links refused: past LINKS_REFUSED, resolved each time after */
} Remote;

enum { RETRY = 1, RESOLVE_AGAIN = 2 };

/* A link is not asked in its last minute: clocks differ, and a transfer takes time. */
#define LINK_MARGIN 60
/* Links refused before their time (revoked, or never good to ask straight) after which an
 * object goes through its resolve URL each time: two round trips a read no more. */
#define LINKS_REFUSED 3

static int fail_replaced(ShardSource *s, Remote *m, uint64_t off, const char *now)
{
    shard_remote_count(m->r, SHARD_REMOTE_REPLACED, 1);
    return shard_fail(s->err, SHARD_ERR_IO,
                      "%s: offset %llu: the object was replaced while being read (version %s, "
                      "now %s): not splicing the two",
                      s->url, (unsigned long long)off, m->pin, now && *now ? now : "gone");
}

/* Judges a transfer's response for bytes from off: 0 (with *drop the bytes of its body to
 * pass over: a Range answered from 0), RETRY, or an error. */
static int judge(ShardSource *s, Remote *m, ShardXfer *x, uint64_t off, uint64_t *drop)
{
    const ShardResponse *rs = shard_xfer_head(x);
    const char *why;
    ShardNetFail cc = shard_xfer_error(x, &why);
    if (!rs) {
        if (shard_retryable(cc, 0) && m->attempt < shard_retry_limit(m->r, cc))
            return RETRY;
        return shard_fail(s->err, SHARD_ERR_IO, "%s: offset %llu: %s%s", s->url,
                          (unsigned long long)off, why, m->attempt ? " (retries spent)" : "");
    }
    long st = rs->status;
    const char *v = shard_object_version(&m->o, rs);
    int direct = m->direct && !strcmp(shard_xfer_url(x), m->direct);
    if (direct && (st == 401 || st == 403 || st == 404 || st == 410))
        return RESOLVE_AGAIN; /* the link expired or was revoked: the Hub gives another */
    if (st == 206 || st == 200) {
        if (m->pin[0] && v[0] && strcmp(v, m->pin))
            return fail_replaced(s, m, off, v);
        if (st == 206 && rs->range_start != (int64_t)off)
            return shard_fail(s->err, SHARD_ERR_IO,
                              "%s: asked for bytes from %llu, the server sent them from %lld",
                              s->url, (unsigned long long)off, (long long)rs->range_start);
        if (!m->pin[0]) {
            snprintf(m->pin, sizeof m->pin, "%s", v);
            snprintf(s->version, sizeof s->version, "%s", v);
        }
        if (rs->total >= 0) {
            if (s->size >= 0 && rs->total != s->size)
                return fail_replaced(s, m, off, v);
            s->size = rs->total;
        }
        int64_t until = direct || m->refused >= LINKS_REFUSED ? 0
                                                              : shard_object_direct_until(&m->o, rs);
        if (until > 0) {
            free(m->direct);
            m->direct = strdup(rs->redirected); /* NULL (no memory): resolved each time */
            m->direct_until = until;
        }
        *drop = st == 200 ? off : 0;
        if (st == 200 && off)
            shard_remote_count(m->r, SHARD_REMOTE_RANGE_IGNORED, 1);
        return 0;
    }
    if (shard_retryable(SHARD_NET_OK, st) && m->attempt < shard_remote_retries(m->r))
        return RETRY;
    char reason[256];
    const void *b;
    while (shard_xfer_read(x, &b) > 0) /* the error body, for its reason */
        ;
    shard_store_reason(shard_xfer_body(x), reason, sizeof reason);
    if (st == 412 || (st == 404 && m->pin[0] && m->o.kind == SHARD_OBJ_GCS))
        return fail_replaced(s, m, off, NULL);
    if (st == 404)
        return shard_fail(s->err, SHARD_ERR_NOT_FOUND, "%s: not found (HTTP 404%s)", s->url,
                          reason);
    if (st == 401 || st == 403)
        return shard_fail(s->err, SHARD_ERR_IO, "%s: access denied (HTTP %ld%s)", s->url, st,
                          reason);
    return shard_fail(s->err, SHARD_ERR_IO, "%s: offset %llu: HTTP %ld%s%s", s->url,
                      (unsigned long long)off, st, reason,
                      m->attempt ? " (retries spent)" : "");
}

static void forget_link(Remote *m)
{
    free(m->direct);
    m->direct = NULL;
}

/* Sends the request for bytes off..to (to UINT64_MAX: to the end; head: the headers only)
 * without waiting for its answer. */
static int launch(ShardSource *s, Remote *m, uint64_t off, uint64_t to, int head, ShardXfer **out)
{
    ShardRequest q = {0};
    if (m->direct && (int64_t)time(NULL) > m->direct_until - LINK_MARGIN)
        forget_link(m);
    int rc;
    if (m->direct) { /* signed: no token with it */
        q.url = strdup(m->direct);
        q.if_range = m->pin[0] ? strdup(m->pin) : NULL;
        rc = !q.url || (m->pin[0] && !q.if_range) ? shard_fail(s->err, SHARD_ERR_NOMEM, "out of memory") : 0;
        if (!rc)
            shard_remote_count(m->r, SHARD_REMOTE_DIRECT, 1);
    } else {
        rc = shard_object_request(m->r, &m->o, m->pin[0] ? m->pin : NULL, &q, s->err);
    }
    if (!rc) {
        q.head = head;
        q.ranged = !head && (off > 0 || to != UINT64_MAX);
        q.from = off;
        q.to = to;
        rc = shard_xfer_start_on(m->r, m->lane, &q, out, s->err);
    }
    shard_request_clear(&q);
    return rc;
}

/* A transfer of bytes off..to into *out, its answer judged (*out may have been launched
 * already: a prefetch), retried until it is good or the budget is spent; *drop as judge's. */
static int start_xfer(ShardSource *s, Remote *m, uint64_t off, uint64_t to, int head, ShardXfer **out,
                 uint64_t *drop)
{
    for (;;) {
        int rc = *out ? 0 : launch(s, m, off, to, head, out);
        if (rc)
            return rc;
        rc = judge(s, m, *out, off, drop);
        if (rc == RESOLVE_AGAIN) { /* no failure of the object's: no backoff, no retry spent */
            shard_xfer_free(out);
            forget_link(m);
            m->refused++;
            continue;
        }
        if (rc != RETRY)
            return rc;
        const ShardResponse *rs = shard_xfer_head(*out);
        double after = rs ? rs->retry_after : 0;
        const char *why;
        ShardNetFail cc = shard_xfer_error(*out, &why);
        char reason[300];
        if (rs)
            snprintf(reason, sizeof reason, "offset %llu: HTTP %ld", (unsigned long long)off,
                     rs->status);
        else
            snprintf(reason, sizeof reason, "offset %llu: %s", (unsigned long long)off, why);
        int limit = rs ? shard_remote_retries(m->r) : shard_retry_limit(m->r, cc);
        shard_xfer_free(out);
        shard_remote_count(m->r, SHARD_REMOTE_RETRIES, 1);
        shard_backoff_on(m->r, m->lane, m->attempt++, limit, after, s->url, reason);
    }
}

/* After a transfer failed at off: whether to try again (after a backoff), else an error. */
static int resume_xfer(ShardSource *s, Remote *m, ShardXfer **x, uint64_t off)
{
    const char *why;
    ShardNetFail cc = shard_xfer_error(*x, &why);
    if (cc != SHARD_NET_OK && (!shard_retryable(cc, 0) || m->attempt >= shard_retry_limit(m->r, cc))) {
        int rc = shard_fail(s->err, SHARD_ERR_IO, "%s: offset %llu: %s%s", s->url,
                            (unsigned long long)off, why,
                            m->attempt ? " (retries spent)" : "");
        shard_xfer_free(x);
        return rc;
    }
    char reason[300];
    snprintf(reason, sizeof reason, "offset %llu: %s", (unsigned long long)off,
             cc != SHARD_NET_OK ? why : "the transfer ended early");
    int limit = cc != SHARD_NET_OK ? shard_retry_limit(m->r, cc) : shard_remote_retries(m->r);
    shard_xfer_free(x);
    if (m->attempt >= shard_remote_retries(m->r))
        return shard_fail(s->err, SHARD_ERR_IO,
                          "%s: offset %llu: the transfer keeps ending early (retries spent)",
                          s->url, (unsigned long long)off);
    shard_remote_count(m->r, SHARD_REMOTE_RETRIES, 1);
    if (off)
        shard_remote_count(m->r, SHARD_REMOTE_RESUMES, 1);
    shard_backoff_on(m->r, m->lane, m->attempt++, limit, 0, s->url, reason);
    return 0;
}

static ssize_t remote_read(ShardSource *s, const void **block)
{
    Remote *m = s->impl;
    for (;;) {
        if (m->eof)
            return 0;
        if (!m->judged) {
            if (!m->x && s->size >= 0 && s->pos >= (uint64_t)s->size) {
                m->eof = 1;
                continue;
            }
            int rc = start_xfer(s, m, s->pos, UINT64_MAX, 0, &m->x, &m->drop);
            if (rc)
                return rc;
            m->judged = 1;
        }
        ssize_t k = shard_xfer_read(m->x, block);
        if (k > 0) {
            if (m->drop) {
                uint64_t d = m->drop < (uint64_t)k ? m->drop : (uint64_t)k;
                m->drop -= d;
                *block = (const unsigned char *)*block + d;
                k -= (ssize_t)d;
                if (!k)
                    continue;
            }
            m->attempt = 0; /* progress: bytes not seen before */
            if (m->fill)
                shard_cache_fill_write(&m->fill, *block, (size_t)k);
            return k;
        }
        m->judged = 0;
        if (k == 0 && (s->size < 0 || s->pos >= (uint64_t)s->size)) {
            shard_xfer_free(&m->x);
            m->eof = 1;
            if (m->fill)
                shard_cache_fill_commit(&m->fill, s->pos);
            continue;
        }
        int rc = resume_xfer(s, m, &m->x, s->pos); /* cut, or ended short of the size (frees x) */
        if (rc)
            return rc;
    }
}

static int remote_read_at(ShardSource *s, uint64_t off, void *buf, size_t n)
{
    Remote *m = s->impl;
    size_t got = 0;
    while (got < n) {
        ShardXfer *x = NULL;
        uint64_t drop = 0;
        int rc = start_xfer(s, m, off + got, off + n - 1, 0, &x, &drop);
        if (rc)
            return rc;
        ssize_t k;
        const void *b;
        while (got < n && (k = shard_xfer_read(x, &b)) > 0) {
            const unsigned char *p = b;
            if (drop) {
                uint64_t d = drop < (uint64_t)k ? drop : (uint64_t)k;
                drop -= d;
                p += d;
                k -= (ssize_t)d;
            }
            if (k)
                m->attempt = 0;
            size_t take = (size_t)k < n - got ? (size_t)k : n - got;
            memcpy((unsigned char *)buf + got, p, take);
            got += take;
        }
        if (got == n) {
            shard_xfer_free(&x);
            break;
        }
        if ((rc = resume_xfer(s, m, &x, off + got)))
            return rc;
    }
    return 0;
}

/* The size (and the version, pinned): a HEAD request; on GCS, whose media URL answers
 * HEAD without the generation, a one-byte range. */
static int remote_stat(ShardSource *s)
{
    Remote *m = s->impl;
    ShardXfer *x = NULL;
    uint64_t drop;
    int gcs = m->o.kind == SHARD_OBJ_GCS;
    int rc = start_xfer(s, m, 0, 0, !gcs, &x, &drop);
    shard_xfer_free(&x);
    if (!rc && s->size < 0)
        rc = shard_fail(s->err, SHARD_ERR_IO, "%s: the server does not say the object's size",
                        s->url);
    return rc;
}

/* Sends the stream's first request now, so that its latency passes while the reader is
 * still busy with the shard before (it waits, paused, once its buffer is full). */
static void remote_prefetch(ShardSource *s)
{
    Remote *m = s->impl;
    if (!m->x && !m->eof && s->pos == 0 && launch(s, m, 0, UINT64_MAX, 0, &m->x))
        m->x = NULL; /* the first read tries again and reports */
}

/* With a cache copy being written, the stream is read to its very end (libarchive stops at
 * the end-of-archive blocks) so that the copy is whole. */
static int remote_finish(ShardSource *s)
{
    Remote *m = s->impl;
    const void *b;
    ssize_t k = 0;
    while (m->fill && (k = shard_source_read(s, &b)) > 0)
        ;
    if (k < 0)
        shard_cache_fill_abort(&m->fill);
    return 0; /* a cache that could not be written is not the stream's failure */
}

/* A reader that stops at the last sample it expects leaves the archive's end unread; the
 * cache copy is completed when little is left (a tar's end blocks, a seek table), and
 * dropped otherwise (a seek, or a reader that stopped early). */
#define CACHE_TAIL (4u << 20)

static void remote_close(ShardSource *s)
{
    Remote *m = s->impl;
    if (!m)
        return;
    if (m->fill && s->pos && s->size >= 0 && (uint64_t)s->size - s->pos <= CACHE_TAIL)
        remote_finish(s);
    shard_xfer_free(&m->x);
    shard_lane_put(m->lane);
    shard_cache_fill_abort(&m->fill);
    shard_object_clear(&m->o);
    forget_link(m);
    shard_remote_put(m->r);
    free(m);
}

/* Skips n bytes before the stream has begun (a reader starting at a sample: the next read
 * asks for a Range from there; a prefetched request is dropped, and so is a cache copy,
 * which cannot have a hole). Once bytes flow, skips are read through (0): a member's data
 * skipped by a header scan costs less read than asked for again. */
static int64_t remote_skip(ShardSource *s, int64_t n)
{
    Remote *m = s->impl;
    if (m->eof || n <= 0 || m->judged)
        return 0;
    if (s->size >= 0 && (uint64_t)n > (uint64_t)s->size - s->pos)
        n = (int64_t)((uint64_t)s->size - s->pos);
    shard_xfer_free(&m->x);
    m->judged = 0;
    m->drop = 0;
    shard_cache_fill_abort(&m->fill);
    return n;
}

static const ShardSourceOps remote_ops = {
    .kind = "remote",
    .read = remote_read,
    .skip = remote_skip,
    .read_at = remote_read_at,
    .stat = remote_stat,
    .finish = remote_finish,
    .prefetch = remote_prefetch,
    .close = remote_close,
};

int shard_source_remote(ShardSource **out, const char *url, ShardRemote *r, int flags,
                        ShardNetLane *lane, char *err)
{
    *out = NULL;
    r = shard_remote_resolve(r, err);
    if (!r)
        return SHARD_ERR_NOMEM;
    if (shard_remote_cache_dir(r) && (flags & SHARD_SOURCE_SHARD)) {
        int rc = shard_cache_open(r, url, out, err); /* a hit: the cached file */
        if (!rc)
            (*out)->remote = r; /* its index is read through r too */
        if (rc != SHARD_ERR_NOT_FOUND) {
            if (rc)
                shard_remote_put(r);
            return rc;
        }
    }
    ShardSource *s = shard_source_new(&remote_ops, url);
    Remote *m = s ? calloc(1, sizeof *m) : NULL;
    if (!m) {
        shard_source_put(s);
        shard_remote_put(r);
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    }
    m->r = r;
    m->lane = lane ? shard_lane_ref(lane) : NULL;
    s->impl = m;
    s->remote = shard_remote_ref(r);
    s->costly = 1;
    int rc = shard_object_parse(&m->o, s->url, err);
    if (!rc && shard_remote_cache_dir(r) && (flags & SHARD_SOURCE_SHARD))
        m->fill = shard_cache_fill_begin(r, url);
    if (rc) {
        shard_source_put(s);
        return rc;
    }
    *out = s;
    return 0;
}

