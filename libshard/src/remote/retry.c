/*
 * What every request does when a store does not answer as hoped (retry.h): which failures
 * are worth another try, how long to wait first, and a whole small response fetched with
 * retries.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/url.h"
#include "remote/lane.h"
#include "remote/remotedef.h"
#include "remote/request.h"
#include "remote/retry.h"
#include "remote/xfer.h"
#include "remote/xml.h"

static int is_ok(long status) { return status >= 200 && status < 300; }

int shard_retryable(ShardNetFail f, long status)
{
    if (f != SHARD_NET_OK)
        return f == SHARD_NET_TRANSIENT || f == SHARD_NET_NO_SERVER;
    return status == 408 || status == 429 || status >= 500;
}

/* retries of a refused connection or an unknown name: 0.5 + 1 + 2 s of backoff at most */
#define CONNECT_RETRIES 3

int shard_retry_limit(const ShardRemote *r, ShardNetFail f)
{
    if (f == SHARD_NET_NO_SERVER && r->s.retries > CONNECT_RETRIES)
        return CONNECT_RETRIES;
    return r->s.retries;
}

void shard_backoff(ShardRemote *r, int attempt, int limit, double retry_after,
                   const char *url, const char *why)
{
    shard_backoff_on(r, NULL, attempt, limit, retry_after, url, why);
}

void shard_backoff_on(ShardRemote *r, const ShardNetLane *lane, int attempt, int limit,
                      double retry_after, const char *url, const char *why)
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
    if (r->s.on_retry) {
        char shown[512], line[1024];
        shard_url_shown(url, shown, sizeof shown);
        snprintf(line, sizeof line, "%s: %s; retry %d of %d in %.2f s", shown, why,
                 attempt + 1, limit, d);
        shard_escape_message(line, sizeof line); /* the reason may name a URL too */
        r->s.on_retry(r->s.on_retry_cookie, line);
    }
    /* in slices, so that a reader closing meanwhile need not wait the backoff out */
    double end = shard_seconds() + d;
    for (double left = d; left > 0 && !shard_lane_aborted(lane) && !shard_remote_aborted(r);
         left = end - shard_seconds()) {
        double step = left < 0.02 ? left : 0.02;
        struct timespec ts = {(time_t)step, (long)((step - floor(step)) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

int shard_request_whole(ShardRemote *r, const char *shown, ShardBuildFn build, void *cookie,
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
        ShardNetFail cc = shard_xfer_error(x, &why);
        if (!rc && cc == SHARD_NET_OK && k == 0 && !shard_retryable(cc, st)) {
            if (resp)
                *resp = *rs;
            shard_xfer_free(&x);
            *status = st;
            if (shard_buf_reserve(out, 1))
                return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", shown);
            out->data[out->len] = 0;
            return 0;
        }
        int limit = cc != SHARD_NET_OK && shard_retry_limit(r, cc) < retries ? shard_retry_limit(r, cc)
                                                                         : retries;
        if (!rc && (!shard_retryable(cc, st) || attempt >= limit)) {
            if (cc != SHARD_NET_OK)
                rc = shard_fail(err, SHARD_ERR_IO, "%s: %s%s", shown, why,
                                attempt ? " (after retries)" : "");
            else
                rc = shard_fail(err, SHARD_ERR_IO, "%s: HTTP %ld after %d retries", shown, st,
                                attempt);
        }
        char reason[SHARD_ERROR_MAX]; /* why points into x: said before x goes */
        if (cc == SHARD_NET_OK)
            snprintf(reason, sizeof reason, "HTTP %ld", st);
        else
            snprintf(reason, sizeof reason, "%s", why);
        shard_xfer_free(&x);
        if (rc)
            return rc;
        shard_stat_add(&r->st.retries, 1);
        shard_backoff(r, attempt, limit, after, shown, reason);
    }
}

/* ---- what stores answer ------------------------------------------------------------- */

/* The text of "key": "..." in a JSON body, cut to cap bytes, into out. */
static int json_text(const char *body, const char *key, char *out, size_t cap)
{
    const char *a = strstr(body, key);
    if (!a)
        return 0;
    a += strlen(key);
    const char *b = strchr(a, '"');
    size_t n = b ? (size_t)(b - a) : strlen(a);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, a, n);
    out[n] = 0;
    return 1;
}

void shard_store_reason(const char *body, char *out, size_t cap)
{
    out[0] = 0;
    ShardBuf code = {0}, msg = {0};
    const char *p = body, *q = body;
    if (shard_xml_text(&p, NULL, "Code", &code) > 0) {
        if (shard_xml_text(&q, NULL, "Message", &msg) > 0)
            snprintf(out, cap, ": %.95s: %.159s", (char *)code.data, (char *)msg.data);
        else
            snprintf(out, cap, ": %.95s", (char *)code.data);
    } else {
        char m[160];
        if (json_text(body, "\"message\": \"", m, sizeof m) ||
            json_text(body, "\"message\":\"", m, sizeof m))
            snprintf(out, cap, ": %s", m);
    }
    shard_buf_free(&code);
    shard_buf_free(&msg);
}

int shard_list_page(ShardRemote *r, const char *shown, ShardBuildFn build, void *cookie,
                        ShardBuf *body, char *err)
{
    long status;
    int rc = shard_request_whole(r, shown, build, cookie, body, 64u << 20, r->s.retries,
                             &status, NULL, err);
    if (!rc && status != 200) {
        char reason[256];
        shard_store_reason((char *)body->data, reason, sizeof reason);
        rc = shard_fail(err, status == 404 ? SHARD_ERR_NOT_FOUND : SHARD_ERR_IO,
                        "%s: listing failed (HTTP %ld%s)", shown, status, reason);
    }
    return rc;
}
