/*
 * Lanes (xfer.h): a multi handle driven by the one thread that reads its transfers, inside
 * their reads, so that a shard's bytes come off the socket on the core that parses them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <curl/curl.h>

#include "base/clock.h"
#include "base/error.h"
#include "remote/remotedef.h"
#include "remote/lane.h"
#include "remote/xferdef.h"

struct ShardNetLane {
    atomic_int refs;
    atomic_int aborted; /* shard_lane_abort: its transfers end, "stopped" */
    CURLM *multi;
};

ShardXfer *shard_multi_finished(CURLM *m, CURLcode *cc)
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
    while ((x = shard_multi_finished(l->multi, &cc))) {
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

void shard_lane_abort(ShardNetLane *l)
{
    atomic_store(&l->aborted, 1);
    curl_multi_wakeup(l->multi);
}

int shard_lane_aborted(const ShardNetLane *l)
{
    return l && atomic_load(&((ShardNetLane *)l)->aborted);
}

/* Ends x as stopped when its lane was aborted: 1 then, else 0. */
static int stopped(ShardXfer *x)
{
    if (!atomic_load(&x->lane->aborted) && !shard_remote_aborted(x->r))
        return 0;
    pthread_mutex_lock(&x->mu);
    if (!x->done) {
        x->done = 1;
        x->result = CURLE_ABORTED_BY_CALLBACK;
        snprintf(x->errbuf, sizeof x->errbuf, "stopped (the reader is closing)");
    }
    pthread_mutex_unlock(&x->mu);
    return 1;
}

int shard_lane_add(ShardXfer *x, ShardNetLane *lane, char *err)
{
    if (curl_multi_add_handle(lane->multi, x->easy) != CURLM_OK)
        return shard_fail(err, SHARD_ERR_NOMEM, "libcurl: cannot add a transfer");
    x->lane = shard_lane_ref(lane);
    shard_stat_add(&x->r->st.requests, 1);
    lane_pump(lane); /* the request goes out now: its latency passes meanwhile */
    return 0;
}

int shard_lane_head(ShardXfer *x)
{
    lane_pump(x->lane);
    while (!x->head_done && !x->done && !stopped(x))
        lane_wait(x);
    return x->head_done;
}

/* The callbacks run here too, so nothing else touches x. */
ssize_t shard_lane_read(ShardXfer *x, const void **block)
{
    if (!x->wlen && !x->done) /* not before: what came in meanwhile would not fit */
        lane_pump(x->lane);
    while (!x->wlen && !x->done && !stopped(x))
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

void shard_lane_remove(ShardXfer *x)
{
    if (!x->removed)
        curl_multi_remove_handle(x->lane->multi, x->easy);
    x->removed = 1;
    shard_lane_put(x->lane);
}
