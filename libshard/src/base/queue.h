/*
 * The bounded queue between every pair of threaded stages (fetch -> shuffle, producer ->
 * decode pool, decode -> batch ring, the ring's free batches): fixed-size elements copied
 * in and out, blocking put and take, close, and counters kept from the start (items and
 * bytes put, seconds put and take spent blocked), so each stage's statistics come from the
 * queues around it.
 *
 * DESIGN: one mutex and two condition variables, signalled after the mutex is let go (a
 * thread woken while it is held would only block again, on the mutex). A taker is
 * signalled per put only while one waits; a putter blocked on a full queue is woken once
 * the fill drops to wake_below (default: one below capacity), or, with a byte cap and a
 * lower mark, to half the cap's bytes, so a stage that refills in bursts wakes once per
 * burst instead of once per element. Close wakes everyone: put then fails at once, take
 * returns what is left and then SHARD_EOS. Blocked time is measured only when a call
 * blocks.
 */
#ifndef SHARD_BASE_QUEUE_H
#define SHARD_BASE_QUEUE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"


typedef struct ShardQueueStats {
    uint64_t items, bytes;  /* put so far */
    double put_wait;        /* seconds putters spent blocked on a full queue */
    double take_wait;       /* seconds takers spent blocked on an empty queue */
    size_t fill, capacity;  /* elements in the queue now, and at most */
} ShardQueueStats;

typedef struct ShardQueue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    unsigned char *v;
    size_t esize, cap, head, n;
    size_t wake_below;
    int closed;
    int takers, putters; /* threads blocked in take and put */
    uint64_t items, bytes;
    double put_wait, take_wait;
    uint64_t byte_cap, held;  /* bytes the queue may hold (0: no limit), and holds */
    uint64_t *sizes;          /* each element's bytes, with a byte cap */
} ShardQueue;

/* A queue of cap elements of esize bytes each. */
SHARD_HIDDEN int shard_queue_init(ShardQueue *q, size_t cap, size_t esize);
/* Frees the queue (elements left in it are dropped: take them first). Accepts a zeroed one. */
SHARD_HIDDEN void shard_queue_destroy(ShardQueue *q);
/* Also bounds the bytes held (as put counts them) to cap: a put waits while the queue holds
 * something and the element would take it past cap (one element always fits). 0 or
 * SHARD_ERR_NOMEM; call before any put. */
SHARD_HIDDEN int shard_queue_set_byte_cap(ShardQueue *q, uint64_t cap);
/* A putter blocked on a full queue wakes once the fill is at most below (< capacity), or,
 * with a byte cap and below under capacity - 1, once half the cap's bytes are held. */
SHARD_HIDDEN void shard_queue_set_wake(ShardQueue *q, size_t below);
/* Copies e in, waiting while the queue is full; bytes counts toward the statistics.
 * 0, or SHARD_EOS when the queue is closed (e was not put). */
SHARD_HIDDEN int shard_queue_put(ShardQueue *q, const void *e, uint64_t bytes);
/* Copies the oldest element out into e, waiting while the queue is empty.
 * 0, or SHARD_EOS once the queue is closed and empty. */
SHARD_HIDDEN int shard_queue_take(ShardQueue *q, void *e);
/* As take, waiting at most seconds (<= 0: as long as it takes): SHARD_AGAIN when nothing
 * came in that time. */
SHARD_HIDDEN int shard_queue_take_for(ShardQueue *q, void *e, double seconds);
/* As take, without waiting: SHARD_EOS when the queue is empty (closed or not). */
SHARD_HIDDEN int shard_queue_try_take(ShardQueue *q, void *e);
/* Closes the queue and wakes every blocked caller. */
SHARD_HIDDEN void shard_queue_close(ShardQueue *q);
/* Opens a closed queue again (elements still in it stay). No call may be blocked on it. */
SHARD_HIDDEN void shard_queue_reopen(ShardQueue *q);
SHARD_HIDDEN void shard_queue_stats(ShardQueue *q, ShardQueueStats *st);

#endif /* SHARD_BASE_QUEUE_H */
