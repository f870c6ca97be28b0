/*
 * The network thread and its transfers (net.h).
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/blockpool.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/handoff.h"
#include "base/thread.h"
#include "remote/net.h"
#include "shard/version.h"

/* libcurl's receive buffer: one read of the socket (its largest, fewer system calls) */
#define XFER_CURL_BUFFER (512 * 1024)
#define BODY_KEEP 768
/* A lane's transfer buffers: a pass of libcurl's reads, paused once less than one read's
 * room is left, and small enough that the parser reads them back from the core's cache
 * (2 MiB ones were 10% slower) */
#define LANE_BUFFER (768 * 1024)

struct ShardXfer {
    ShardRemote *r;
    ShardNetLane *lane; /* NULL: on r's network thread */
    CURL *easy;
    ShardRequest q;
    pthread_mutex_t mu; /* guards what follows, shared by its reader and the network thread
                           (not r->mu, which every reader and transfer would contend for) */
    pthread_cond_t cv;
    unsigned char *buf[2];
    size_t cap[2];
    size_t wlen;   /* bytes in buf[!rside], the one being filled */
    int rside;     /* the buffer the reader holds */
    int paused, want_unpause, cancel, removed, head_done, done;
    int fresh;     /* bytes came since the reader was last woken */
    CURLcode result;
    ShardResponse resp;
    char body[BODY_KEEP];
    size_t nbody;
    char errbuf[CURL_ERROR_SIZE];
    ShardXfer *next;
};

struct ShardNetLane {
    atomic_int refs;
    CURLM *multi;
};

void shard_secret_free(char *s)
{
    if (s) {
        memset(s, 0, strlen(s));
        free(s);
    }
}

void shard_request_clear(ShardRequest *q)
{
    free(q->url);
    curl_slist_free_all(q->headers);
    free(q->sigv4);
    free(q->user);
    shard_secret_free(q->password);
    free(q->post);
    free(q->if_range);
    memset(q, 0, sizeof *q);
}

int shard_request_header(ShardRequest *q, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return SHARD_ERR_INVALID;
    struct curl_slist *h = curl_slist_append(q->headers, line);
    memset(line, 0, sizeof line); /* it may be a credential */
    if (!h)
        return SHARD_ERR_NOMEM;
    q->headers = h;
    return 0;
}

int shard_url_encode(ShardBuf *out, const char *s, int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int plain = isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
                    (keep_slash && *p == '/');
        char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
        if (plain ? shard_buf_append(out, p, 1) : shard_buf_append(out, e, 3))
            return SHARD_ERR_NOMEM;
    }
    return shard_buf_reserve(out, 1) ? SHARD_ERR_NOMEM : (out->data[out->len] = 0, 0);
}

/* ---- the network thread ------------------------------------------------------------- */

/* The next transfer of m that ended (its result in *cc), taken off m; NULL when none. */
static ShardXfer *finished(CURLM *m, CURLcode *cc)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        ShardXfer *x = NULL;
        CURL *e = msg->easy_handle;
        *cc = msg->data.result; /* msg is gone once the handle is removed */
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
        curl_multi_remove_handle(m, e);
        return x;
    }
    return NULL;
}

/* Takes x off the network thread's list once libcurl let go of it, and tells its reader,
 * which may then free it (under r->mu; x is not touched after). */
static void retire(ShardRemote *r, ShardXfer *x)
{
    for (ShardXfer **pp = &r->active; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    pthread_mutex_lock(&x->mu);
    x->removed = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

static void *net_main(void *arg)
{
    pthread_setname_np(pthread_self(), "shard-net"); /* for top -H, perf and gdb */
    ShardRemote *r = arg;
    for (;;) {
        ShardXfer *unpause[64], *cancel[64];
        size_t nu = 0, nc = 0;
        pthread_mutex_lock(&r->mu);
        if (r->stopping && !r->active && !r->incoming) {
            pthread_mutex_unlock(&r->mu);
            break;
        }
        while (r->incoming) {
            ShardXfer *x = r->incoming;
            r->incoming = x->next;
            x->next = r->active;
            r->active = x;
            curl_multi_add_handle(r->multi, x->easy);
        }
        for (ShardXfer *x = r->active; x; x = x->next) {
            pthread_mutex_lock(&x->mu);
            if (x->cancel && !x->removed && nc < 64)
                cancel[nc++] = x;
            else if (x->want_unpause && nu < 64) {
                x->want_unpause = 0;
                unpause[nu++] = x;
            }
            pthread_mutex_unlock(&x->mu);
        }
        pthread_mutex_unlock(&r->mu);
        for (size_t i = 0; i < nc; i++) {
            curl_multi_remove_handle(r->multi, cancel[i]->easy);
            pthread_mutex_lock(&r->mu);
            retire(r, cancel[i]);
            pthread_mutex_unlock(&r->mu);
        }
        for (size_t i = 0; i < nu; i++) /* may deliver held data: outside the lock */
            curl_easy_pause(unpause[i]->easy, CURLPAUSE_CONT);
        int running = 0;
        curl_multi_perform(r->multi, &running);
        ShardXfer *ended;
        CURLcode cc;
        while ((ended = finished(r->multi, &cc))) {
            pthread_mutex_lock(&ended->mu);
            ended->result = cc;
            ended->done = 1;
            pthread_mutex_unlock(&ended->mu);
            pthread_mutex_lock(&r->mu);
            retire(r, ended);
            pthread_mutex_unlock(&r->mu);
        }
        /* One wake per transfer for what this pass brought, rather than one per 16 KB
         * chunk: a starved reader woken per chunk cost the loop a futex call each. */
        pthread_mutex_lock(&r->mu);
        for (ShardXfer *x = r->active; x; x = x->next) {
            pthread_mutex_lock(&x->mu);
            if (x->fresh) {
                x->fresh = 0;
                pthread_cond_broadcast(&x->cv);
            }
            pthread_mutex_unlock(&x->mu);
        }
        pthread_mutex_unlock(&r->mu);
        curl_multi_poll(r->multi, NULL, 0, 200, NULL);
    }
    return NULL;
}

/* Starts the network thread if it is not running (under r->mu). */
static int net_start(ShardRemote *r, char *err)
{
    if (r->running)
        return 0;
    r->multi = curl_multi_init();
    if (!r->multi)
        return shard_fail(err, SHARD_ERR_NOMEM, "libcurl: cannot make a multi handle");
    curl_multi_setopt(r->multi, CURLMOPT_MAX_HOST_CONNECTIONS, r->s.connections);
    curl_multi_setopt(r->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    int rc = shard_thread_start(&r->thread, net_main, r);
    if (rc) {
        curl_multi_cleanup(r->multi);
        r->multi = NULL;
        return shard_fail(err, SHARD_ERR_IO, "cannot start the network thread");
    }
    r->running = 1;
    return 0;
}

void shard_net_stop(ShardRemote *r)
{
    pthread_mutex_lock(&r->mu);
    int running = r->running;
    r->stopping = 1;
    pthread_mutex_unlock(&r->mu);
    if (!running)
        return;
    curl_multi_wakeup(r->multi);
    pthread_join(r->thread, NULL);
    curl_multi_cleanup(r->multi);
}

/* ---- lanes, driven by their reader ------------------------------------------------- */

ShardNetLane *shard_lane_new(void)
{
    ShardNetLane *l = calloc(1, sizeof *l);
    if (l && !(l->multi = curl_multi_init())) {
        free(l);
        return NULL;
    }
    if (l) {
        atomic_init(&l->refs, 1);
        curl_multi_setopt(l->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    }
    return l;
}

ShardNetLane *shard_lane_ref(ShardNetLane *l)
{
    atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
    return l;
}

void shard_lane_put(ShardNetLane *l)
{
    if (l && atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1) {
        curl_multi_cleanup(l->multi);
        free(l);
    }
}

/* Moves every transfer of the lane as far as the sockets allow, without waiting: bodies
 * into their buffers (until full, then paused), finished transfers marked done. */
static void lane_pump(ShardNetLane *l)
{
    int running = 0;
    curl_multi_perform(l->multi, &running);
    ShardXfer *x;
    CURLcode cc;
    while ((x = finished(l->multi, &cc))) {
        pthread_mutex_lock(&x->mu);
        x->result = cc;
        x->done = x->removed = 1;
        pthread_mutex_unlock(&x->mu);
    }
}

/* Waits until a socket of the lane has something (or libcurl's next timeout), counting
 * the time as waiting on the network. */
static void lane_wait(ShardXfer *x)
{
    uint64_t t0 = shard_nanoseconds();
    curl_multi_poll(x->lane->multi, NULL, 0, 200, NULL);
    shard_stat_add(&x->r->st.wait_ns, shard_nanoseconds() - t0);
    lane_pump(x->lane);
}

/* ---- callbacks, on the network thread or a lane's ------------------------------------------------ */

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
        memset(rs, 0, sizeof *rs);
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

/* ---- transfers, on the reader's thread ---------------------------------------------- */

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

/* Finished transfers' buffers, kept for the next ones (of any size: a manifest's transfer
 * and the shards' lanes use different ones), so that a new shard does not fault its
 * buffers in again: the lanes' and the network thread's transfers at once. */
#define SPARE_BUFFERS 32
#define SPARE_BYTES ((size_t)64 << 20)

int shard_net_buffers_init(ShardRemote *r)
{
    r->spare = shard_block_pool_new(SPARE_BUFFERS, SPARE_BYTES);
    return r->spare ? 0 : SHARD_ERR_NOMEM;
}

void shard_net_buffers_free(ShardRemote *r)
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
    if (!rc && lane) {
        if (curl_multi_add_handle(lane->multi, x->easy) != CURLM_OK) {
            rc = shard_fail(err, SHARD_ERR_NOMEM, "libcurl: cannot add a transfer");
        } else {
            x->lane = shard_lane_ref(lane);
            shard_stat_add(&r->st.requests, 1);
            lane_pump(lane); /* the request goes out now: its latency passes meanwhile */
            *out = x;
            return 0;
        }
    } else if (!rc) {
        pthread_mutex_lock(&r->mu);
        rc = net_start(r, err);
        if (!rc) {
            x->next = r->incoming;
            r->incoming = x;
        }
        pthread_mutex_unlock(&r->mu);
    }
    if (rc) {
        x->removed = 1;
        shard_xfer_free(&x);
        return rc;
    }
    shard_stat_add(&r->st.requests, 1);
    curl_multi_wakeup(r->multi);
    *out = x;
    return 0;
}

int shard_xfer_start(ShardRemote *r, ShardRequest *q, ShardXfer **out, char *err)
{
    return shard_xfer_start_on(r, NULL, q, out, err);
}

const ShardResponse *shard_xfer_head(ShardXfer *x)
{
    ShardRemote *r = x->r;
    if (x->lane) {
        lane_pump(x->lane);
        while (!x->head_done && !x->done)
            lane_wait(x);
        return x->head_done ? &x->resp : NULL;
    }
    pthread_mutex_lock(&x->mu);
    uint64_t t0 = shard_nanoseconds();
    while (!x->head_done && !x->done)
        pthread_cond_wait(&x->cv, &x->mu);
    int have = x->head_done;
    pthread_mutex_unlock(&x->mu);
    shard_stat_add(&r->st.wait_ns, shard_nanoseconds() - t0);
    return have ? &x->resp : NULL;
}

/* shard_xfer_read on a lane: the reader runs the transfers itself until this one has bytes
 * (the callbacks run here too, so nothing else touches x). */
static ssize_t lane_read(ShardXfer *x, const void **block)
{
    if (!x->wlen && !x->done) /* not before: what came in meanwhile would not fit */
        lane_pump(x->lane);
    while (!x->wlen && !x->done)
        lane_wait(x);
    size_t n = x->wlen;
    int w = !x->rside;
    x->wlen = 0;
    x->rside = w;
    if (x->paused) { /* libcurl hands over what it held back, into the buffer just freed */
        x->paused = 0;
        curl_easy_pause(x->easy, CURLPAUSE_CONT);
    }
    if (n) {
        *block = x->buf[w];
        return (ssize_t)n;
    }
    return x->result == CURLE_OK ? 0 : -1;
}

ssize_t shard_xfer_read(ShardXfer *x, const void **block)
{
    ShardRemote *r = x->r;
    if (x->lane)
        return lane_read(x, block);
    pthread_mutex_lock(&x->mu);
    uint64_t t0 = shard_nanoseconds();
    while (!x->wlen && !x->done && !x->paused)
        pthread_cond_wait(&x->cv, &x->mu);
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

CURLcode shard_xfer_error(ShardXfer *x, const char **why)
{
    pthread_mutex_lock(&x->mu);
    CURLcode cc = x->done ? x->result : CURLE_OK;
    pthread_mutex_unlock(&x->mu);
    if (why)
        *why = cc == CURLE_OK ? "" : x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc);
    return cc;
}

const char *shard_xfer_body(ShardXfer *x) { return x->body; }

void shard_xfer_free(ShardXfer **px)
{
    ShardXfer *x = *px;
    if (!x)
        return;
    *px = NULL;
    ShardRemote *r = x->r;
    if (x->lane) {
        if (!x->removed)
            curl_multi_remove_handle(x->lane->multi, x->easy);
        x->removed = 1;
        shard_lane_put(x->lane);
    }
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

/* ---- retries ------------------------------------------------------------------------- */

int shard_net_retryable(CURLcode cc, long status)
{
    if (cc != CURLE_OK) {
        switch (cc) {
        case CURLE_COULDNT_RESOLVE_HOST: /* DNS can be flaky; the budget bounds it */
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_WEIRD_SERVER_REPLY:
            return 1;
        default:
            return 0;
        }
    }
    return status == 408 || status == 429 || status >= 500;
}

void shard_net_backoff(ShardRemote *r, int attempt, double retry_after)
{
    double d = r->s.backoff * ldexp(1.0, attempt > 30 ? 30 : attempt);
    if (d > r->s.backoff_max)
        d = r->s.backoff_max;
    /* full jitter: a uniform delay in [0, d), so that clients cut at once spread out */
    uint64_t z = atomic_fetch_add_explicit(&r->seq, 0x9e3779b97f4a7c15ull,
                                           memory_order_relaxed) ^ shard_nanoseconds();
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    d *= (double)(z >> 11) / 9007199254740992.0;
    if (retry_after > d)
        d = retry_after < r->s.backoff_max ? retry_after : r->s.backoff_max;
    struct timespec ts = {(time_t)d, (long)((d - floor(d)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int shard_net_fetch(ShardRemote *r, const char *shown, ShardBuildFn build, void *cookie,
                    ShardBuf *out, size_t max, int retries, long *status, ShardResponse *resp,
                    char *err)
{
    *status = 0;
    for (int attempt = 0;; attempt++) {
        out->len = 0;
        ShardRequest q = {0};
        int rc = build(cookie, &q, err);
        ShardXfer *x = NULL;
        if (rc || (rc = shard_xfer_start(r, &q, &x, err))) {
            shard_request_clear(&q);
            return rc;
        }
        const ShardResponse *rs = shard_xfer_head(x);
        long st = rs ? rs->status : 0;
        double after = rs ? rs->retry_after : 0;
        ssize_t k = 0;
        if (rs && is_ok(st)) {
            const void *b;
            while ((k = shard_xfer_read(x, &b)) > 0 && !rc) {
                if (out->len + (size_t)k > max)
                    rc = shard_fail(err, SHARD_ERR_FORMAT, "%s: larger than %zu bytes", shown,
                                    max);
                else if (shard_buf_append(out, b, (size_t)k))
                    rc = shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", shown);
            }
        } else if (rs) {
            const void *b;
            while ((k = shard_xfer_read(x, &b)) > 0) /* the body is kept for messages */
                ;
            const char *body = shard_xfer_body(x);
            if (shard_buf_append(out, body, strlen(body)))
                rc = shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", shown);
        }
        const char *why;
        CURLcode cc = shard_xfer_error(x, &why);
        if (!rc && cc == CURLE_OK && k == 0 && !shard_net_retryable(cc, st)) {
            if (resp)
                *resp = *rs;
            shard_xfer_free(&x);
            *status = st;
            if (shard_buf_reserve(out, 1))
                return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", shown);
            out->data[out->len] = 0;
            return 0;
        }
        if (!rc && (!shard_net_retryable(cc, st) || attempt >= retries)) {
            if (cc != CURLE_OK)
                rc = shard_fail(err, SHARD_ERR_IO, "%s: %s%s", shown, why,
                                attempt ? " (after retries)" : "");
            else
                rc = shard_fail(err, SHARD_ERR_IO, "%s: HTTP %ld after %d retries", shown, st,
                                attempt);
        }
        shard_xfer_free(&x);
        if (rc)
            return rc;
        shard_stat_add(&r->st.retries, 1);
        shard_net_backoff(r, attempt, after);
    }
}

/* ---- what stores answer ------------------------------------------------------------- */

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

void shard_net_reason(const char *body, char *out, size_t cap)
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

int shard_net_list_page(ShardRemote *r, const char *shown, ShardBuildFn build, void *cookie,
                        ShardBuf *body, char *err)
{
    long status;
    int rc = shard_net_fetch(r, shown, build, cookie, body, 64u << 20, r->s.retries,
                             &status, NULL, err);
    if (!rc && status != 200) {
        char reason[256];
        shard_net_reason((char *)body->data, reason, sizeof reason);
        rc = shard_fail(err, status == 404 ? SHARD_ERR_NOT_FOUND : SHARD_ERR_IO,
                        "%s: listing failed (HTTP %ld%s)", shown, status, reason);
    }
    return rc;
}
