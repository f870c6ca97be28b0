/*
 * Transfers (xfer.h): the request set up on a libcurl easy handle, the callbacks that fill
 * the body's buffers and read the response's headers (on whichever thread drives the
 * transfer, under the transfer's mutex), and the reader's side.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "base/blockpool.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/handoff.h"
#include "remote/lane.h"
#include "remote/net.h"
#include "remote/remotedef.h"
#include "remote/request.h"
#include "remote/xfer.h"
#include "remote/xferdef.h"
#include "shard/version.h"

/* A lane's transfer buffers: a pass of libcurl's reads, paused once less than one read's
 * room is left, and small enough that the parser reads them back from the core's cache
 * (2 MiB ones were 10% slower) */
#define LANE_BUFFER (768 * 1024)

/* Finished transfers' buffers, kept for the next ones (of any size: a manifest's transfer
 * and the shards' lanes use different ones), so that a new shard does not fault its
 * buffers in again: the lanes' and the network thread's transfers at once. */
#define SPARE_BUFFERS 32
#define SPARE_BYTES ((size_t)64 << 20)

/* ---- callbacks, on the thread that drives the transfer --------------------------------- */

static int is_ok(long status) { return status >= 200 && status < 300; }

static size_t on_body(char *p, size_t size, size_t nmemb, void *cookie)
{
    ShardXfer *x = cookie;
    size_t n = size * nmemb;
    ShardRemote *r = x->r;
    pthread_mutex_lock(&x->mu);
    if (x->cancel) {
        pthread_mutex_unlock(&x->mu);
        return 0;
    }
    if (!is_ok(x->resp.status)) {
        size_t k = n < BODY_KEEP - 1 - x->nbody ? n : BODY_KEEP - 1 - x->nbody;
        memcpy(x->body + x->nbody, p, k);
        x->nbody += k;
        x->body[x->nbody] = 0;
        pthread_mutex_unlock(&x->mu);
        return n;
    }
    int w = !x->rside;
    if (x->wlen + n > x->cap[w]) {
        if (x->wlen) { /* full: wait for the reader */
            x->paused = 1;
            pthread_mutex_unlock(&x->mu);
            return CURL_WRITEFUNC_PAUSE;
        }
        unsigned char *b = realloc(x->buf[w], n);
        if (!b) {
            pthread_mutex_unlock(&x->mu);
            return 0;
        }
        x->buf[w] = b;
        x->cap[w] = n;
    }
    if (x->lane) /* read next on this core: kept in its cache */
        memcpy(x->buf[w] + x->wlen, p, n);
    else
        shard_copy_handoff(x->buf[w] + x->wlen, p, n);
    x->wlen += n;
    /* Less than one read of libcurl's fits after this: pausing now (libcurl still hands
     * over the rest of the read in progress, which fits) stops it before its next read.
     * Refusing bytes instead makes it copy them aside, into memory it allocates, and hand
     * them over again after. */
    if (!x->paused && x->wlen + XFER_CURL_BUFFER > x->cap[w]) {
        x->paused = 1;
        curl_easy_pause(x->easy, CURLPAUSE_RECV);
    }
    shard_stat_add(&r->st.bytes, n);
    x->fresh = 1; /* the reader is woken once per pass of the loop, or at half full */
    if (x->wlen * 2 >= x->cap[w])
        pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    return n;
}

/* Copies a header's value (trimmed) into out. */
static void header_value(const char *v, size_t n, char *out, size_t cap)
{
    while (n && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, v, n);
    out[n] = 0;
}

static int header_is(const char *line, size_t n, const char *name, const char **value,
                     size_t *vn)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) || line[k] != ':')
        return 0;
    *value = line + k + 1;
    *vn = n - k - 1;
    return 1;
}

/* Where the response before a new one sent the request: its Location resolved against the
 * URL it answered (libcurl's URL parser, as libcurl follows it); NULL when it was no
 * redirect. curl_free it. */
static char *redirect_target(const ShardXfer *x)
{
    const ShardResponse *rs = &x->resp;
    size_t n = strlen(rs->location);
    if (rs->status < 300 || rs->status >= 400 || rs->status == 304 || !n ||
        n + 1 >= sizeof rs->location) /* cut short: not a URL to ask again */
        return NULL;
    CURLU *u = curl_url();
    char *to = NULL;
    if (u && !curl_url_set(u, CURLUPART_URL, rs->redirected[0] ? rs->redirected : x->q.url, 0) &&
        !curl_url_set(u, CURLUPART_URL, rs->location, 0))
        curl_url_get(u, CURLUPART_URL, &to, 0);
    curl_url_cleanup(u);
    return to;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *cookie)
{
    ShardXfer *x = cookie;
    size_t n = size * nmemb;
    ShardResponse *rs = &x->resp;
    const char *v;
    size_t vn;
    char tmp[256];
    pthread_mutex_lock(&x->mu);
    if (n >= 5 && !strncmp(p, "HTTP/", 5)) { /* a new response (after a redirect or 100) */
        const char *sp = memchr(p, ' ', n);
        long status = sp ? strtol(sp + 1, NULL, 10) : 0;
        char *to = redirect_target(x), was[sizeof rs->redirected];
        int hop = rs->status >= 300 && rs->status < 400; /* a 3xx: where it led, or unknown */
        memcpy(was, rs->redirected, sizeof was); /* kept past a 100 Continue */
        memset(rs, 0, sizeof *rs);
        if (!hop)
            memcpy(rs->redirected, was, sizeof was);
        else if (to && strlen(to) < sizeof rs->redirected)
            memcpy(rs->redirected, to, strlen(to) + 1);
        curl_free(to);
        rs->status = status;
        rs->total = rs->range_start = rs->persisted = -1;
    } else if (n <= 2 && (p[0] == '\r' || p[0] == '\n')) {
        long st = rs->status;
        int follows = !x->q.sigv4 && !x->q.method; /* an upload's 308 is an answer */
        int final = st >= 200 && !(st >= 300 && st < 400 && follows && st != 304);
        if (final) {
            x->head_done = 1;
            pthread_cond_broadcast(&x->cv);
        }
    } else if (header_is(p, n, "etag", &v, &vn)) {
        header_value(v, vn, tmp, sizeof tmp);
        if (strncmp(tmp, "W/", 2)) /* a weak ETag cannot pin a range */
            snprintf(rs->etag, sizeof rs->etag, "%s", tmp);
    } else if (header_is(p, n, "x-goog-generation", &v, &vn)) {
        header_value(v, vn, rs->generation, sizeof rs->generation);
    } else if (header_is(p, n, "last-modified", &v, &vn)) {
        header_value(v, vn, rs->last_modified, sizeof rs->last_modified);
    } else if (header_is(p, n, "retry-after", &v, &vn)) {
        header_value(v, vn, tmp, sizeof tmp);
        rs->retry_after = strtod(tmp, NULL);
    } else if (header_is(p, n, "content-range", &v, &vn)) {
        header_value(v, vn, tmp, sizeof tmp);
        unsigned long long a, b, t;
        if (sscanf(tmp, "bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
            rs->range_start = (int64_t)a;
            rs->total = (int64_t)t;
        } else if (sscanf(tmp, "bytes */%llu", &t) == 1) {
            rs->total = (int64_t)t;
        }
    } else if (header_is(p, n, "location", &v, &vn)) {
        header_value(v, vn, rs->location, sizeof rs->location);
    } else if (header_is(p, n, "link", &v, &vn)) {
        header_value(v, vn, rs->link, sizeof rs->link);
    } else if (header_is(p, n, "range", &v, &vn)) {
        header_value(v, vn, tmp, sizeof tmp);
        unsigned long long a, b;
        if (sscanf(tmp, "bytes=%llu-%llu", &a, &b) == 2)
            rs->persisted = (int64_t)b + 1;
    } else if (header_is(p, n, "content-length", &v, &vn)) {
        header_value(v, vn, tmp, sizeof tmp);
        if (rs->status == 200 && rs->total < 0)
            rs->total = strtoll(tmp, NULL, 10);
    }
    pthread_mutex_unlock(&x->mu);
    return n;
}

/* ---- the reader's side ---------------------------------------------------------------- */

static int xfer_setup(ShardXfer *x, char *err)
{
    ShardRemote *r = x->r;
    const ShardRemoteSettings *s = &r->s;
    CURL *e = x->easy;
    ShardRequest *q = &x->q;
    curl_easy_setopt(e, CURLOPT_URL, q->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)x);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)XFER_CURL_BUFFER);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(s->connect_timeout * 1000));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, s->stall_bytes);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)ceil(s->stall_timeout));
    /* no CURLOPT_PIPEWAIT: a transfer waiting to multiplex on a connection whose first
     * transfer is paused (its reader busy elsewhere) would wait for good */
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, q->sigv4 || q->method ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, s->verify_tls ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, s->verify_tls ? 2L : 0L);
    if (s->ca_bundle)
        curl_easy_setopt(e, CURLOPT_CAINFO, s->ca_bundle);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "libshard/" SHARD_VERSION_STRING);
    if (q->headers)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, q->headers);
    if (q->sigv4) {
        curl_easy_setopt(e, CURLOPT_AWS_SIGV4, q->sigv4);
        curl_easy_setopt(e, CURLOPT_USERNAME, q->user);
        curl_easy_setopt(e, CURLOPT_PASSWORD, q->password);
    }
    if (q->method) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->body ? q->body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(q->body ? q->body_len : 0));
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, q->method);
        /* no "Expect: 100-continue" round trip before each part; not with SigV4, which
         * would sign the emptied header that is then not sent */
        if (!q->sigv4 && shard_request_header(q, "Expect:"))
            return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, q->headers);
    } else if (q->post) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->post);
    } else if (q->head) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    }
    if (q->ranged) {
        char range[64];
        if (q->to == UINT64_MAX)
            snprintf(range, sizeof range, "%llu-", (unsigned long long)q->from);
        else
            snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)q->from,
                     (unsigned long long)q->to);
        curl_easy_setopt(e, CURLOPT_RANGE, range);
        if (q->if_range && shard_request_header(q, "If-Range: %s", q->if_range))
            return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, q->headers);
    }
    return 0;
}

int shard_xfer_buffers_init(ShardRemote *r)
{
    r->spare = shard_block_pool_new(SPARE_BUFFERS, SPARE_BYTES);
    return r->spare ? 0 : SHARD_ERR_NOMEM;
}

void shard_xfer_buffers_free(ShardRemote *r)
{
    shard_block_pool_unref(r->spare);
    r->spare = NULL;
}

int shard_xfer_start_on(ShardRemote *r, ShardNetLane *lane, ShardRequest *q, ShardXfer **out,
                        char *err)
{
    *out = NULL;
    ShardXfer *x = calloc(1, sizeof *x);
    size_t cap = r->s.buffer / 2 > XFER_CURL_BUFFER ? r->s.buffer / 2 : XFER_CURL_BUFFER;
    if (lane && cap > LANE_BUFFER) /* the socket holds the read-ahead; this stays in cache */
        cap = LANE_BUFFER;
    if (x) {
        x->buf[0] = shard_block_get(r->spare, cap, &x->cap[0]);
        x->buf[1] = shard_block_get(r->spare, cap, &x->cap[1]);
        x->easy = curl_easy_init();
    }
    if (!x || !x->buf[0] || !x->buf[1] || !x->easy) {
        if (x) {
            shard_block_put(r->spare, x->buf[0], x->cap[0]);
            shard_block_put(r->spare, x->buf[1], x->cap[1]);
            if (x->easy)
                curl_easy_cleanup(x->easy);
            free(x);
        }
        shard_request_clear(q);
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    }
    x->r = r;
    x->q = *q;
    memset(q, 0, sizeof *q);
    x->resp.total = x->resp.range_start = x->resp.persisted = -1;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    int rc = xfer_setup(x, err);
    if (!rc)
        rc = lane ? shard_lane_add(x, lane, err) : shard_net_add(r, x, err);
    if (rc) {
        x->removed = 1;
        shard_xfer_free(&x);
        return rc;
    }
    *out = x;
    return 0;
}

int shard_xfer_start(ShardRemote *r, ShardRequest *q, ShardXfer **out, char *err)
{
    return shard_xfer_start_on(r, NULL, q, out, err);
}

/* Waits on x's condition (x->mu held) for at most a tenth of a second; 1, with x marked
 * aborted, once its remote was aborted. */
static int wait_or_abort(ShardXfer *x)
{
    if (shard_remote_aborted(x->r)) {
        x->aborted = 1;
        return 1;
    }
    struct timespec ts = shard_deadline(CLOCK_REALTIME, 0.1);
    pthread_cond_timedwait(&x->cv, &x->mu, &ts);
    return 0;
}

const ShardResponse *shard_xfer_head(ShardXfer *x)
{
    ShardRemote *r = x->r;
    if (x->lane)
        return shard_lane_head(x) ? &x->resp : NULL;
    pthread_mutex_lock(&x->mu);
    uint64_t t0 = shard_nanoseconds();
    while (!x->head_done && !x->done && !wait_or_abort(x))
        ;
    int have = x->head_done;
    pthread_mutex_unlock(&x->mu);
    shard_stat_add(&r->st.wait_ns, shard_nanoseconds() - t0);
    return have ? &x->resp : NULL;
}

ssize_t shard_xfer_read(ShardXfer *x, const void **block)
{
    ShardRemote *r = x->r;
    if (x->lane)
        return shard_lane_read(x, block);
    pthread_mutex_lock(&x->mu);
    uint64_t t0 = shard_nanoseconds();
    while (!x->wlen && !x->done && !x->paused && !wait_or_abort(x))
        ;
    if (x->aborted && !x->wlen) {
        pthread_mutex_unlock(&x->mu);
        return -1;
    }
    size_t n = x->wlen;
    int w = !x->rside;
    x->wlen = 0;
    x->rside = w;
    int wake = 0;
    if (x->paused) {
        x->paused = 0;
        x->want_unpause = wake = 1;
    }
    int done = x->done;
    CURLcode cc = x->result;
    pthread_mutex_unlock(&x->mu);
    shard_stat_add(&r->st.wait_ns, shard_nanoseconds() - t0);
    if (wake)
        curl_multi_wakeup(r->multi);
    if (n) {
        *block = x->buf[w];
        return (ssize_t)n;
    }
    if (!done) /* paused with nothing buffered: only after the reader took it all */
        return shard_xfer_read(x, block);
    return cc == CURLE_OK ? 0 : -1;
}

/* libcurl's result as the retry rules tell endings apart. */
static ShardNetFail fail_of(CURLcode cc)
{
    switch (cc) {
    case CURLE_OK:
        return SHARD_NET_OK;
    case CURLE_COULDNT_RESOLVE_HOST: /* DNS can be flaky; the retry budget bounds it */
    case CURLE_COULDNT_CONNECT:
        return SHARD_NET_NO_SERVER;
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY:
        return SHARD_NET_TRANSIENT;
    default:
        return SHARD_NET_FATAL;
    }
}

ShardNetFail shard_xfer_error(ShardXfer *x, const char **why)
{
    pthread_mutex_lock(&x->mu);
    CURLcode cc = x->done ? x->result : x->aborted ? CURLE_ABORTED_BY_CALLBACK : CURLE_OK;
    int aborted = x->aborted && !x->done;
    pthread_mutex_unlock(&x->mu);
    if (why)
        *why = aborted ? "stopped (the caller gave up)"
               : cc == CURLE_OK ? ""
               /* what libcurl says of a response header over its 100 KB limit, among
                * others: not this process out of memory */
               : cc == CURLE_OUT_OF_MEMORY ? "libcurl could not hold the response (\"out of "
                                             "memory\": a response header over its 100 KB "
                                             "limit, most likely)"
               : x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc);
    return fail_of(cc);
}

const char *shard_xfer_body(ShardXfer *x) { return x->body; }
const char *shard_xfer_url(ShardXfer *x) { return x->q.url; }

void shard_xfer_free(ShardXfer **px)
{
    ShardXfer *x = *px;
    if (!x)
        return;
    *px = NULL;
    ShardRemote *r = x->r;
    if (x->lane)
        shard_lane_remove(x);
    pthread_mutex_lock(&x->mu);
    if (!x->removed) {
        x->cancel = 1;
        pthread_mutex_unlock(&x->mu);
        curl_multi_wakeup(r->multi);
        pthread_mutex_lock(&x->mu);
        while (!x->removed)
            pthread_cond_wait(&x->cv, &x->mu);
    }
    pthread_mutex_unlock(&x->mu);
    curl_easy_cleanup(x->easy);
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
    shard_request_clear(&x->q);
    shard_block_put(r->spare, x->buf[0], x->cap[0]);
    shard_block_put(r->spare, x->buf[1], x->cap[1]);
    free(x);
}
