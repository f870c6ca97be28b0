/*
 * The loader's producer thread (producer.h). The DESIGN comment is in loaderdef.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/queue.h"
#include "base/rng.h"
#include "base/thread.h"
#include "base/trace.h"
#include "load/batch.h"
#include "load/decodepool.h"
#include "load/loaderdef.h"
#include "load/producer.h"
#include "resume/resume.h"
#include "read/streamreader.h"
#include "shard/loader.h"
#include "tar/item.h"

void shard_loader_decoded(void *cookie, const ShardDecodeJob *j, int rc, const char *msg)
{
    ShardLoader *l = cookie;
    ShardSlot *sl = j->tag;
    char why[320];
    if (rc) {
        if (!j->data)
            snprintf(why, sizeof why, "no image field (looked for %s)", l->spec.image_fields);
        shard_slot_fail(sl, j->index, j->data ? SHARD_BAD_IMAGE : SHARD_BAD_NO_IMAGE,
                        j->data ? msg : why);
    } else if (l->spec.missing_label == SHARD_LABEL_ERROR &&
               shard_slot_no_label(sl, &l->spec, j->index, why, sizeof why)) {
        shard_slot_fail(sl, j->index, SHARD_BAD_LABEL, why);
    }
    if (atomic_fetch_sub(&sl->pending, 1) == 1) /* never full: it holds every slot */
        shard_queue_put(&l->ready_q, &sl, (uint64_t)sl->n * sl->sample_bytes);
}

/* Asks the hook (load/defer.h) which samples a later stage decodes: those are copied into
 * the slot and their labels checked here. *cpu: the samples left to the decode threads,
 * *last: the last of them. @return 0 or SHARD_ERR_NOMEM */
static int defer_samples(ShardLoader *l, ShardSlot *sl, size_t *cpu, size_t *last)
{
    int rc = 0;
    pthread_mutex_lock(&l->defer_lock);
    sl->has_why = l->defer_take != NULL;
    for (size_t i = 0; i < sl->n && l->defer_take && !rc; i++) {
        int not = sl->img[i] ? l->defer_take(l->defer_ctx, sl->img[i], sl->img_size[i]) : 255;
        sl->why[i] = (unsigned char)not;
        if (not)
            continue;
        if ((rc = shard_slot_defer(sl, i)))
            break;
        char why[320];
        if (l->spec.missing_label == SHARD_LABEL_ERROR &&
            shard_slot_no_label(sl, &l->spec, i, why, sizeof why))
            shard_slot_fail(sl, i, SHARD_BAD_LABEL, why);
    }
    pthread_mutex_unlock(&l->defer_lock);
    *cpu = 0;
    for (size_t i = 0; i < sl->n; i++)
        if (!sl->gpu[i])
            (*cpu)++, *last = i;
    return rc;
}

/* The next free slot, begun for a new batch; NULL when the producer is to stop. */
static ShardSlot *take_slot(ShardLoader *l)
{
    ShardSlot *sl = NULL;
    if (atomic_load(&l->stop) || shard_queue_take(&l->free_q, &sl) || !sl)
        return NULL;
    atomic_fetch_add(&l->inflight, 1);
    shard_slot_begin(sl, &l->spec, l->next_fill++, l->fill_index++, l->fill_epoch);
    shard_order_put(sl->order);
    sl->order = shard_reader_order(l->reader);
    if (atomic_load(&l->stop)) {
        sl->discarded = 1;
        shard_queue_put(&l->ready_q, &sl, 0);
        return NULL;
    }
    return sl;
}

/* Ends the epoch with sl: an END slot, carrying the error that ended it (0: none). */
static void put_end(ShardLoader *l, ShardSlot *sl, int code, const char *message)
{
    shard_slot_clear(sl);
    sl->end = 1;
    sl->code = code;
    if (code)
        snprintf(sl->message, sizeof sl->message, "%s", message);
    shard_queue_put(&l->ready_q, &sl, 0);
}

/* The batch's images: the transform's size, or its aspect bucket's (from its last sample). */
static void size_batch(ShardLoader *l, ShardSlot *sl)
{
    sl->bucket = -1;
    sl->width = l->s.transform.width;
    sl->height = l->s.transform.height;
    sl->sample_bytes = l->spec.image_bytes;
    int h, w, b = sl->n ? shard_reader_bucket(l->reader, sl->items[sl->n - 1], &h, &w, NULL) : -1;
    if (b < 0)
        return;
    ShardTransform t = l->s.transform;
    t.width = w, t.height = h;
    sl->bucket = b;
    sl->width = w;
    sl->height = h;
    sl->sample_bytes = shard_transform_output_size(&t);
}

/* Fills the batches of the producer's epoch; 1 when it ended (its END slot out), 0 on an
 * error or a stop. */
static int produce_epoch(ShardLoader *l)
{
    size_t bs = l->s.batch_size;
    const ShardList *list = shard_reader_list(l->reader);
    ShardSlot *sl;
    while ((sl = take_slot(l))) {
        /* Take the batch's samples (the reader runs on this thread). */
        int rc = 0;
        double shuffle_from = l->trace ? shard_seconds() : 0;
        while (sl->n < bs) {
            ShardItem *it;
            double t0 = shard_seconds();
            rc = shard_reader_take(l->reader, &it);
            shard_add_seconds(&l->reader_time, shard_seconds() - t0);
            if (rc)
                break;
            int end = it->batch_end; /* a bucketed batch's last, maybe short */
            if ((rc = shard_slot_add(sl, &l->spec, it, shard_list_entry(list, it->shard)->url)))
                break;
            if (end)
                break;
        }
        shard_slot_seal(sl);
        size_batch(l, sl);
        double batch_from = l->trace ? shard_seconds() : 0;
        shard_trace_span(l->trace, "shuffle", shuffle_from, batch_from, sl->n);
        if (rc && rc != SHARD_EOS) {
            put_end(l, sl, rc, rc == SHARD_ERR_NOMEM
                                   ? "loader: out of memory for a batch's keys or raw fields"
                                   : shard_reader_error(l->reader));
            return 0;
        }
        size_t n = sl->n;
        int bucketed = sl->bucket >= 0; /* its short batches are the line's partials */
        if (n == 0 || (n < bs && l->s.drop_last && !bucketed)) {
            put_end(l, sl, 0, NULL);
            return 1;
        }
        /* each sample's own draws: the same pixels whichever consumer (and decoder) takes
         * it, and when */
        for (size_t i = 0; i < n; i++) {
            const ShardItem *it = sl->items[i];
            ShardRng r;
            shard_rng_init(&r, shard_reader_seed(l->reader), SHARD_RNG_AUGMENT, sl->epoch,
                           it->shard, (uint64_t)it->round << 40 ^ it->v.index);
            sl->seeds[i] = shard_rng_next(&r);
        }
        size_t cpu = n, last = n - 1;
        if (!bucketed && (rc = defer_samples(l, sl, &cpu, &last))) {
            put_end(l, sl, rc, "loader: out of memory for the GPU's JPEGs");
            return 0;
        }
        if (!cpu) { /* the GPU's, every one: out as it is */
            shard_queue_put(&l->ready_q, &sl, (uint64_t)n * sl->sample_bytes);
        } else {
            atomic_store(&sl->pending, cpu);
            for (size_t i = 0; i < n; i++) {
                if (sl->gpu[i])
                    continue;
                ShardDecodeJob j = {.data = sl->img[i], .size = sl->img_size[i],
                                    .seed = sl->seeds[i],
                                    .out = (unsigned char *)sl->images + i * sl->sample_bytes,
                                    .width = bucketed ? sl->width : 0,
                                    .height = bucketed ? sl->height : 0, .tag = sl, .index = i};
                shard_pool_submit(l->pool, &j); /* the pool closes only after the producer ends */
                if (i == last)
                    break; /* the slot may be the consumer's already */
            }
        }
        if (l->trace)
            shard_trace_span(l->trace, "batch", batch_from, shard_seconds(), n);
        if (n < bs && !bucketed) { /* the partial last batch is out; the END follows */
            if (!(sl = take_slot(l)))
                return 0;
            put_end(l, sl, 0, NULL);
            return 1;
        }
    }
    return 0; /* stopped */
}

/* Epoch after epoch: at the end of one the producer goes on into the next, whose plan is
 * known, so its first batches are fetched and decoded while the caller finishes this one;
 * shard_loader_set_epoch of that very epoch then finds them ready (no stall between
 * epochs), any other epoch stops and restarts it. */
static void *producer_main(void *arg)
{
    pthread_setname_np(pthread_self(), "shard-produce"); /* for top -H, perf and gdb */
    ShardLoader *l = arg;
    atomic_store(&l->producer_start, shard_seconds());
    while (produce_epoch(l) && !atomic_load(&l->stop)) {
        /* the caller, still in this epoch, sees its counters, not the next one's */
        pthread_mutex_lock(&l->at_end_lock);
        shard_reader_stats(l->reader, &l->at_end);
        l->at_end_epoch = l->fill_epoch;
        l->have_at_end = 1;
        pthread_mutex_unlock(&l->at_end_lock);
        if (shard_reader_set_epoch(l->reader, l->fill_epoch + 1))
            break; /* the caller's own set_epoch meets the error */
        l->fill_epoch++;
        l->fill_index = 0;
        pthread_mutex_lock(&l->at_end_lock); /* the order of the epoch gone on into */
        shard_order_put(l->ahead_order);
        l->ahead_order = shard_reader_order(l->reader);
        pthread_mutex_unlock(&l->at_end_lock);
        atomic_store(&l->ahead, l->fill_epoch);
    }
    shard_add_seconds(&l->producer_time, shard_seconds() - atomic_exchange(&l->producer_start, 0.0));
    return NULL;
}

/* Receives one slot from ready_q (waiting for it), parked for its turn. */
int shard_loader_receive_for(ShardLoader *l, double seconds)
{
    ShardSlot *sl;
    if (shard_queue_take_for(&l->ready_q, &sl, seconds) == SHARD_AGAIN)
        return SHARD_AGAIN;
    atomic_fetch_sub(&l->inflight, 1);
    l->parked[l->nparked++] = sl;
    return 0;
}

void shard_loader_receive(ShardLoader *l) { shard_loader_receive_for(l, 0); }

/* Stops the producer and takes back every slot it filled: afterwards every slot is either
 * free (in free_q) or held by the caller, and no thread writes one. */
void shard_loader_stop_producer(ShardLoader *l)
{
    if (!l->producer_running)
        return;
    atomic_store(&l->stop, 1);
    /* the batches in flight are thrown away: not decoded (a loader freed while it reads
     * ahead into the next epoch does not wait for that epoch's first batches) */
    shard_pool_drop(l->pool, 1);
    ShardSlot *wake = NULL;
    shard_queue_put(&l->free_q, &wake, 0); /* room for it: nslots + 1 */
    /* a producer waiting on the reader (a slow command or server, a backoff) stops too */
    shard_reader_interrupt(l->reader);
    pthread_join(l->producer, NULL);
    l->producer_running = 0;
    atomic_store(&l->ahead, 0);
    while (atomic_load(&l->inflight))
        shard_loader_receive(l);
    shard_pool_drop(l->pool, 0);
    /* every slot taken back, and the NULL out of free_q again */
    ShardSlot *sl;
    size_t n = l->nparked;
    while (shard_queue_try_take(&l->free_q, &sl) == 0)
        if (sl)
            l->parked[n++] = sl;
    for (size_t i = 0; i < n; i++) {
        shard_slot_clear(l->parked[i]);
        shard_queue_put(&l->free_q, &l->parked[i], 0);
    }
    l->nparked = 0;
    atomic_store(&l->stop, 0);
}

int shard_loader_start_producer(ShardLoader *l)
{
    l->ended = 0;
    l->next_give = l->next_fill;
    int rc = shard_thread_start(&l->producer, producer_main, l);
    if (rc)
        return shard_fail(l->err, SHARD_ERR_NOMEM, "loader: cannot start the producer thread");
    l->producer_running = 1;
    return 0;
}
