/*
 * A ShardRemote's network thread (xferdef.h): one libcurl multi handle carrying every
 * transfer started without a lane, so connections are reused and objects download side by
 * side.
 *
 * DESIGN: readers start transfers by queueing them on r->incoming under r->mu and waking
 * the thread (curl_multi_wakeup); the thread alone adds and removes easy handles and calls
 * libcurl, and does so outside r->mu wherever libcurl may call back (unpausing delivers
 * held data). A reader that frees a running transfer marks it cancelled and waits until the
 * thread has taken it off (removed); a transfer that ends is taken off here and its reader
 * woken. Readers are woken once per pass of the loop for the bytes it brought, not per
 * chunk.
 */
#include <pthread.h>

#include <curl/curl.h>

#include "base/error.h"
#include "base/thread.h"
#include "remote/remotedef.h"
#include "remote/net.h"
#include "remote/xferdef.h"

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
        while ((ended = shard_multi_finished(r->multi, &cc))) {
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

int shard_net_add(ShardRemote *r, ShardXfer *x, char *err)
{
    pthread_mutex_lock(&r->mu);
    int rc = net_start(r, err);
    if (!rc) {
        x->next = r->incoming;
        r->incoming = x;
    }
    pthread_mutex_unlock(&r->mu);
    if (rc)
        return rc;
    shard_stat_add(&r->st.requests, 1);
    curl_multi_wakeup(r->multi);
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
