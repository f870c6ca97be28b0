/* The bounded queue between stages (libshard/src/queue.h): order, blocking both ways, close
 * while callers are blocked, the wake-up threshold, and counters that add up. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "base/queue.h"
#include "shard/common.h"

TestSuite(queue, .timeout = 30);

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

Test(queue, fifo_order_and_try_take)
{
    ShardQueue q;
    cr_assert_eq(shard_queue_init(&q, 4, sizeof(int)), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(shard_queue_put(&q, &i, 10), 0);
    int x;
    for (int round = 0; round < 3; round++) { /* wrap around the ring */
        cr_assert_eq(shard_queue_take(&q, &x), 0);
        cr_assert_eq(x, round);
        int y = 4 + round;
        cr_assert_eq(shard_queue_put(&q, &y, 10), 0);
    }
    for (int i = 3; i < 7; i++) {
        cr_assert_eq(shard_queue_try_take(&q, &x), 0);
        cr_assert_eq(x, i);
    }
    cr_assert_eq(shard_queue_try_take(&q, &x), SHARD_EOS);
    ShardQueueStats st;
    shard_queue_stats(&q, &st);
    cr_assert_eq(st.items, 7);
    cr_assert_eq(st.bytes, 70);
    cr_assert_eq(st.fill, 0);
    cr_assert_eq(st.capacity, 4);
    cr_assert_eq(st.put_wait, 0.0, "nobody blocked");
    cr_assert_eq(st.take_wait, 0.0);
    shard_queue_destroy(&q);
    cr_assert_eq(shard_queue_init(&q, 0, 4), SHARD_ERR_INVALID);
}

typedef struct Worker {
    ShardQueue *q;
    int n, rc, got;
    int64_t sum;
} Worker;

static void *producer(void *arg)
{
    Worker *w = arg;
    for (int i = 0; i < w->n; i++)
        if ((w->rc = shard_queue_put(w->q, &i, 1)))
            break;
    return NULL;
}

static void *consumer(void *arg)
{
    Worker *w = arg;
    int x;
    while ((w->rc = shard_queue_take(w->q, &x)) == 0) {
        w->sum += x;
        w->got++;
        if (w->got == w->n)
            break;
    }
    return NULL;
}

Test(queue, threads_exchange_everything_and_the_counters_add_up)
{
    ShardQueue q;
    cr_assert_eq(shard_queue_init(&q, 8, sizeof(int)), 0);
    Worker p = {&q, 100000, 0, 0, 0}, c = {&q, 100000, 0, 0, 0};
    pthread_t tp, tc;
    pthread_create(&tc, NULL, consumer, &c);
    pthread_create(&tp, NULL, producer, &p);
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert_eq(c.got, 100000);
    cr_assert_eq(c.sum, (int64_t)100000 * 99999 / 2, "every element once, none twice");
    ShardQueueStats st;
    shard_queue_stats(&q, &st);
    cr_assert_eq(st.items, 100000);
    cr_assert_eq(st.bytes, 100000);
    cr_assert_eq(st.fill, 0);
    shard_queue_destroy(&q);
}

/* Whether a thread is blocked in put (putters) or take. */
static int blocked(ShardQueue *q, int putters)
{
    pthread_mutex_lock(&q->lock);
    int n = putters ? q->putters : q->takers;
    pthread_mutex_unlock(&q->lock);
    return n > 0;
}

Test(queue, blocked_time_is_counted_on_the_side_that_waited)
{
    ShardQueue q;
    cr_assert_eq(shard_queue_init(&q, 1, sizeof(int)), 0);
    Worker c = {&q, 1, 0, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, consumer, &c);
    while (!blocked(&q, 0)) /* however loaded the machine: once it is blocked, 60 ms more */
        sleep_ms(1);
    sleep_ms(60); /* the consumer waits on the empty queue */
    int one = 1;
    cr_assert_eq(shard_queue_put(&q, &one, 0), 0);
    pthread_join(t, NULL);
    ShardQueueStats st;
    shard_queue_stats(&q, &st);
    cr_assert_geq(st.take_wait, 0.04, "take waited %f s", st.take_wait);
    cr_assert_eq(st.put_wait, 0.0);

    cr_assert_eq(shard_queue_put(&q, &one, 0), 0); /* full now */
    Worker p = {&q, 1, 0, 0, 0};
    pthread_create(&t, NULL, producer, &p);
    while (!blocked(&q, 1))
        sleep_ms(1);
    sleep_ms(60); /* the producer waits on the full queue */
    int x;
    cr_assert_eq(shard_queue_take(&q, &x), 0);
    pthread_join(t, NULL);
    shard_queue_stats(&q, &st);
    cr_assert_geq(st.put_wait, 0.04, "put waited %f s", st.put_wait);
    shard_queue_destroy(&q);
}

Test(queue, close_wakes_blocked_callers)
{
    ShardQueue q;
    cr_assert_eq(shard_queue_init(&q, 2, sizeof(int)), 0);
    /* takers blocked on an empty queue */
    Worker c1 = {&q, 1, 0, 0, 0}, c2 = {&q, 1, 0, 0, 0};
    pthread_t a, b;
    pthread_create(&a, NULL, consumer, &c1);
    pthread_create(&b, NULL, consumer, &c2);
    sleep_ms(30);
    shard_queue_close(&q);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    cr_assert_eq(c1.rc, SHARD_EOS);
    cr_assert_eq(c2.rc, SHARD_EOS);
    int x = 5;
    cr_assert_eq(shard_queue_put(&q, &x, 0), SHARD_EOS, "a closed queue takes nothing");

    /* a putter blocked on a full queue; what was put before the close can still be taken */
    shard_queue_reopen(&q);
    cr_assert_eq(shard_queue_put(&q, &x, 0), 0);
    cr_assert_eq(shard_queue_put(&q, &x, 0), 0);
    Worker p = {&q, 1, 0, 0, 0};
    pthread_create(&a, NULL, producer, &p);
    sleep_ms(30);
    shard_queue_close(&q);
    pthread_join(a, NULL);
    cr_assert_eq(p.rc, SHARD_EOS);
    cr_assert_eq(shard_queue_take(&q, &x), 0);
    cr_assert_eq(shard_queue_take(&q, &x), 0);
    cr_assert_eq(shard_queue_take(&q, &x), SHARD_EOS, "closed and empty");
    shard_queue_destroy(&q);
}

typedef struct Burst {
    ShardQueue *q;
    int n;
    int fill_seen[64]; /* the fill after each put */
} Burst;

static void *burst_producer(void *arg)
{
    Burst *b = arg;
    for (int i = 0; i < b->n; i++) {
        shard_queue_put(b->q, &i, 0);
        ShardQueueStats st;
        shard_queue_stats(b->q, &st);
        b->fill_seen[i] = (int)st.fill;
    }
    return NULL;
}

Test(queue, a_blocked_putter_wakes_at_the_threshold)
{
    ShardQueue q;
    cr_assert_eq(shard_queue_init(&q, 8, sizeof(int)), 0);
    shard_queue_set_wake(&q, 4);
    Burst b = {&q, 9, {0}};
    pthread_t t;
    pthread_create(&t, NULL, burst_producer, &b);
    sleep_ms(30); /* 8 put, the 9th waits */
    int x;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(shard_queue_take(&q, &x), 0);
    sleep_ms(30);
    ShardQueueStats st;
    shard_queue_stats(&q, &st);
    cr_assert_eq(st.fill, 5, "above the threshold the putter sleeps on (fill %zu)", st.fill);
    cr_assert_eq(shard_queue_take(&q, &x), 0); /* fill 4: wakes it */
    pthread_join(t, NULL);
    shard_queue_stats(&q, &st);
    cr_assert_eq(st.fill, 5);
    cr_assert_eq(st.items, 9);
    shard_queue_destroy(&q);
}

Test(queue, a_byte_cap_bounds_what_it_holds_one_element_always_fits)
{
    ShardQueue q;
    cr_assert_eq(shard_queue_init(&q, 8, sizeof(int)), 0);
    cr_assert_eq(shard_queue_set_byte_cap(&q, 100), 0);
    int v = 1;
    cr_assert_eq(shard_queue_put(&q, &v, 60), 0);
    cr_assert_eq(shard_queue_put(&q, &v, 40), 0); /* 100: at the cap */
    int x;
    cr_assert_eq(shard_queue_take(&q, &x), 0); /* 40 held */
    cr_assert_eq(shard_queue_put(&q, &v, 60), 0); /* 100 again */
    cr_assert_eq(shard_queue_take(&q, &x), 0);
    cr_assert_eq(shard_queue_take(&q, &x), 0); /* empty */
    cr_assert_eq(shard_queue_put(&q, &v, 500), 0, "one element always fits, however big");
    shard_queue_close(&q);
    cr_assert_eq(shard_queue_put(&q, &v, 1), SHARD_EOS, "past the cap and closed: no wait");
    shard_queue_destroy(&q);
}

typedef struct Bigs {
    ShardQueue *q;
    int done;
} Bigs;

static void *put_bigs(void *arg)
{
    Bigs *b = arg;
    for (int i = 0; i < 4; i++) {
        int v = i;
        shard_queue_put(b->q, &v, 80); /* two do not fit under 100 */
    }
    b->done = 1;
    return NULL;
}

Test(queue, a_put_past_the_byte_cap_waits_for_a_take)
{
    ShardQueue q;
    cr_assert_eq(shard_queue_init(&q, 8, sizeof(int)), 0);
    cr_assert_eq(shard_queue_set_byte_cap(&q, 100), 0);
    Bigs b = {&q, 0};
    pthread_t t;
    pthread_create(&t, NULL, put_bigs, &b);
    while (!blocked(&q, 1)) /* the second put waits: 80 + 80 > 100 */
        sleep_ms(1);
    ShardQueueStats st;
    shard_queue_stats(&q, &st);
    cr_assert_eq(st.fill, 1);
    for (int i = 0; i < 4; i++) {
        int x;
        cr_assert_eq(shard_queue_take(&q, &x), 0);
        cr_assert_eq(x, i);
    }
    pthread_join(t, NULL);
    cr_assert(b.done);
    shard_queue_destroy(&q);
}

typedef struct Sized {
    ShardQueue *q;
    int n;
    uint64_t bytes;
} Sized;

static void *put_sized(void *arg)
{
    Sized *s = arg;
    for (int i = 0; i < s->n; i++)
        shard_queue_put(s->q, &i, s->bytes);
    return NULL;
}

Test(queue, with_a_mark_a_putter_blocked_on_bytes_wakes_at_half_the_bytes)
{
    ShardQueue q;
    cr_assert_eq(shard_queue_init(&q, 64, sizeof(int)), 0);
    shard_queue_set_wake(&q, 2); /* the fill mark alone would wake it late */
    cr_assert_eq(shard_queue_set_byte_cap(&q, 100), 0);
    Sized s = {&q, 11, 10}; /* ten fit; the eleventh waits */
    pthread_t t;
    pthread_create(&t, NULL, put_sized, &s);
    while (!blocked(&q, 1))
        sleep_ms(1);
    int x;
    for (int i = 0; i < 4; i++) /* 60 bytes held: over half, it sleeps on */
        cr_assert_eq(shard_queue_take(&q, &x), 0);
    sleep_ms(30);
    ShardQueueStats st;
    shard_queue_stats(&q, &st);
    cr_assert_eq(st.fill, 6, "above half the bytes the putter sleeps on (fill %zu)", st.fill);
    cr_assert_eq(shard_queue_take(&q, &x), 0); /* 50 bytes: wakes it */
    pthread_join(t, NULL);
    shard_queue_stats(&q, &st);
    cr_assert_eq(st.fill, 6);
    cr_assert_eq(st.items, 11);
    shard_queue_destroy(&q);
}
