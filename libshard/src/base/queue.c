/*
 * The bounded queue (queue.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "shard/common.h"
#include "base/queue.h"

int shard_queue_init(ShardQueue *q, size_t cap, size_t esize)
{
    memset(q, 0, sizeof *q);
    if (!cap || !esize)
        return SHARD_ERR_INVALID;
    q->v = calloc(cap, esize);
    if (!q->v)
        return SHARD_ERR_NOMEM;
    q->cap = cap;
    q->esize = esize;
    q->wake_below = cap - 1;
    pthread_mutex_init(&q->lock, NULL);
    pthread_condattr_t ca; /* timed takes wait on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->not_empty, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&q->not_full, NULL);
    return 0;
}

int shard_queue_set_byte_cap(ShardQueue *q, uint64_t cap)
{
    if (!cap)
        return 0;
    uint64_t *sizes = calloc(q->cap, sizeof *sizes);
    if (!sizes)
        return SHARD_ERR_NOMEM;
    pthread_mutex_lock(&q->lock);
    free(q->sizes);
    q->sizes = sizes;
    q->byte_cap = cap;
    pthread_mutex_unlock(&q->lock);
    return 0;
}

/* Whether an element of bytes must wait; the lock is held. */
static int full(const ShardQueue *q, uint64_t bytes)
{
    return q->n == q->cap || (q->byte_cap && q->n && q->held + bytes > q->byte_cap);
}

void shard_queue_destroy(ShardQueue *q)
{
    if (!q->v)
        return;
    free(q->v);
    free(q->sizes);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    memset(q, 0, sizeof *q);
}

void shard_queue_set_wake(ShardQueue *q, size_t below)
{
    pthread_mutex_lock(&q->lock);
    q->wake_below = below < q->cap ? below : q->cap - 1;
    pthread_mutex_unlock(&q->lock);
}

int shard_queue_put(ShardQueue *q, const void *e, uint64_t bytes)
{
    pthread_mutex_lock(&q->lock);
    if (full(q, bytes) && !q->closed) {
        double t = shard_seconds();
        q->putters++;
        while (full(q, bytes) && !q->closed)
            pthread_cond_wait(&q->not_full, &q->lock);
        q->putters--;
        q->put_wait += shard_seconds() - t;
    }
    if (q->closed) {
        pthread_mutex_unlock(&q->lock);
        return SHARD_EOS;
    }
    size_t at = (q->head + q->n) % q->cap;
    memcpy(q->v + at * q->esize, e, q->esize);
    if (q->sizes) {
        q->sizes[at] = bytes;
        q->held += bytes;
    }
    q->n++;
    q->items++;
    q->bytes += bytes;
    int wake = q->takers > 0;
    pthread_mutex_unlock(&q->lock);
    /* after unlocking: woken under the lock, the taker would wait again, for the lock */
    if (wake)
        pthread_cond_signal(&q->not_empty);
    return 0;
}

/* Whether a take wakes the blocked putters; the lock is held. Bytes may fit after any take,
 * but with a mark set they wait for half the byte bound too, as for the fill: an empty
 * queue always wakes them. */
static int wake_putters(const ShardQueue *q)
{
    if (!q->putters)
        return 0;
    if (q->n <= q->wake_below)
        return 1;
    return q->byte_cap && (q->wake_below + 1 >= q->cap || q->held <= q->byte_cap / 2);
}

/* Takes the head element, the lock held and the queue not empty; unlocks, then wakes the
 * putters if they may go on (after unlocking, as in put). */
static void take_head(ShardQueue *q, void *e)
{
    memcpy(e, q->v + q->head * q->esize, q->esize);
    if (q->sizes)
        q->held -= q->sizes[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    int wake = wake_putters(q);
    pthread_mutex_unlock(&q->lock);
    if (wake)
        pthread_cond_broadcast(&q->not_full);
}

int shard_queue_take(ShardQueue *q, void *e)
{
    pthread_mutex_lock(&q->lock);
    if (!q->n && !q->closed) {
        double t = shard_seconds();
        q->takers++;
        while (!q->n && !q->closed)
            pthread_cond_wait(&q->not_empty, &q->lock);
        q->takers--;
        q->take_wait += shard_seconds() - t;
    }
    if (!q->n) {
        pthread_mutex_unlock(&q->lock);
        return SHARD_EOS;
    }
    take_head(q, e);
    return 0;
}

int shard_queue_take_for(ShardQueue *q, void *e, double seconds)
{
    if (seconds <= 0)
        return shard_queue_take(q, e);
    struct timespec until = shard_deadline(CLOCK_MONOTONIC, seconds);
    pthread_mutex_lock(&q->lock);
    int timed_out = 0;
    if (!q->n && !q->closed) {
        double t = shard_seconds();
        q->takers++;
        while (!q->n && !q->closed && !timed_out)
            timed_out = pthread_cond_timedwait(&q->not_empty, &q->lock, &until) == ETIMEDOUT;
        q->takers--;
        q->take_wait += shard_seconds() - t;
    }
    if (!q->n) {
        pthread_mutex_unlock(&q->lock);
        return q->closed ? SHARD_EOS : SHARD_AGAIN;
    }
    take_head(q, e);
    return 0;
}

int shard_queue_try_take(ShardQueue *q, void *e)
{
    pthread_mutex_lock(&q->lock);
    if (!q->n) {
        pthread_mutex_unlock(&q->lock);
        return SHARD_EOS;
    }
    take_head(q, e);
    return 0;
}

void shard_queue_close(ShardQueue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
}

void shard_queue_reopen(ShardQueue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = 0;
    pthread_mutex_unlock(&q->lock);
}

void shard_queue_stats(ShardQueue *q, ShardQueueStats *st)
{
    pthread_mutex_lock(&q->lock);
    st->items = q->items;
    st->bytes = q->bytes;
    st->put_wait = q->put_wait;
    st->take_wait = q->take_wait;
    st->fill = q->n;
    st->capacity = q->cap;
    pthread_mutex_unlock(&q->lock);
}
