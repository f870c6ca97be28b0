/*
 * The batch loader (shard/loader.h): the reader, batch assembly (batch.c), the decode pool
 * (decodepool.c) and a ring of batch buffers.
 *
 * DESIGN
 * - The ring: `batches` slots, each a batch buffer. Free slots wait in free_q; the
 *   producer thread takes one, fills it and deals its samples to the decode pool; the
 *   decoder that finishes a slot's last sample puts the slot into ready_q. Slots finish
 *   in any order, so the caller's thread parks early ones and hands batches out in the
 *   order the producer filled them: the reader's order, whatever the decode timing.
 *   A batch released by the caller goes back into free_q, from any thread.
 * - The queues carry slot handles and jobs, never pixels: decoders write each image into
 *   its place in the slot's buffer. Only the producer fills a slot; only the caller
 *   compacts and publishes it, once every job of it is done.
 * - At the epoch's end (or on the reader's error) the producer puts an END slot into
 *   ready_q, carrying the error, and ends. Stopping early (set_epoch, restore, free) puts
 *   a NULL into free_q to wake the producer, joins it, then waits for every slot it had
 *   taken to come back through ready_q (in-flight count), so no decoder writes a slot
 *   after it was reset.
 * - Each sample's random choices come from (seed, epoch, consumer, its position in the
 *   epoch), so augmentation is reproducible and survives a resume.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/queue.h"
#include "base/rng.h"
#include "base/text.h"
#include "base/thread.h"
#include "base/trace.h"
#include "load/batch.h"
#include "load/decodepool.h"
#include "load/stats.h"
#include "read/fetch.h"
#include "read/reader.h"
#include "shard/loader.h"
#include "tar/item.h"

struct ShardLoader {
    ShardLoaderSettings s;
    ShardBatchSpec spec;
    char *image_fields, *label_field, *raw_fields; /* the settings' strings, copied */
    ShardReader *reader;
    char err[SHARD_ERROR_MAX];
    uint64_t consumer;

    ShardSlot *slots;
    size_t nslots;
    ShardQueue free_q;  /* slots the producer may fill (and NULL, to stop it) */
    ShardQueue ready_q; /* slots whose samples are all decoded, and END slots */
    ShardDecodePool *pool;

    pthread_t producer;
    int producer_running;
    atomic_int stop;
    atomic_size_t inflight; /* slots the producer took that have not reached the caller */
    atomic_size_t held;     /* slots the caller holds */
    uint64_t next_fill;     /* the producer's */
    uint64_t fill_epoch;    /* the producer's: the epoch of the batches it fills */
    uint64_t fill_index;    /* the producer's: the next batch's number in that epoch */
    atomic_ullong ahead;    /* the epoch the producer went on into by itself (0: none) */
    pthread_mutex_t at_end_lock;
    ShardReaderStats at_end; /* the reader's counters when the producer left at_end_epoch */
    uint64_t at_end_epoch;
    int have_at_end;
    uint64_t epoch;         /* the caller's: of the batches it takes */

    /* the caller's side */
    ShardSlot **parked; /* finished before their turn */
    size_t nparked;
    uint64_t next_give;
    int ended;          /* the caller has seen this epoch's END */
    int broken;         /* a restore or new epoch failed: no producer runs, and next says so */
    uint64_t skipped;                  /* samples left out in skip mode, and by reason */
    uint64_t skipped_by[SHARD_BAD_N];
    uint64_t *offsets; /* per shard: samples in the shards before it, or NULL (the spec's) */
    uint64_t delivered_position;

    /* statistics (shard_loader_stats) */
    double opened;                /* when */
    _Atomic double producer_time; /* seconds of ended producer runs */
    _Atomic double producer_start;/* when the running one began; 0: none runs */
    _Atomic double reader_time;   /* seconds the producer spent in shard_reader_take */
    atomic_ullong delivered, delivered_bytes; /* samples handed to the caller */
    ShardTrace *trace;            /* settings.trace_path: spans of every stage */
    char *trace_path;
};



void shard_loader_default_settings(ShardLoaderSettings *s)
{
    memset(s, 0, sizeof *s);
    shard_reader_default_settings(&s->reader);
    shard_transform_default(&s->transform);
    s->batch_size = 256;
    s->drop_last = 0;
    s->threads = 0;
    s->batches = 4;
    s->image_fields = "jpg;jpeg;png";
    s->label_field = "cls";
    s->raw_fields = "*";
    s->allocator = NULL;
}

/* ---- decoders' side -------------------------------------------------------------------- */

static void decoded(void *cookie, const ShardDecodeJob *j, int rc, const char *msg)
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
        shard_queue_put(&l->ready_q, &sl, (uint64_t)sl->n * l->spec.image_bytes);
}

/* ---- producer -------------------------------------------------------------------------- */

/* The next free slot, begun for a new batch; NULL when the producer is to stop. */
static ShardSlot *take_slot(ShardLoader *l)
{
    ShardSlot *sl = NULL;
    if (atomic_load(&l->stop) || shard_queue_take(&l->free_q, &sl) || !sl)
        return NULL;
    atomic_fetch_add(&l->inflight, 1);
    shard_slot_begin(sl, &l->spec, l->next_fill++, l->fill_index++, l->fill_epoch);
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
            if ((rc = shard_slot_add(sl, &l->spec, it, shard_list_entry(list, it->shard)->url)))
                break;
        }
        shard_slot_seal(sl);
        double batch_from = l->trace ? shard_seconds() : 0;
        shard_trace_span(l->trace, "shuffle", shuffle_from, batch_from, sl->n);
        if (rc && rc != SHARD_EOS) {
            put_end(l, sl, rc, rc == SHARD_ERR_NOMEM
                                   ? "loader: out of memory for a batch's keys or raw fields"
                                   : shard_reader_error(l->reader));
            return 0;
        }
        size_t n = sl->n;
        if (n < bs && (n == 0 || l->s.drop_last)) {
            put_end(l, sl, 0, NULL);
            return 1;
        }
        atomic_store(&sl->pending, n);
        for (size_t i = 0; i < n; i++) {
            ShardRng r;
            shard_rng_init(&r, shard_reader_seed(l->reader), SHARD_RNG_AUGMENT, sl->epoch,
                           l->consumer, sl->items[i]->position);
            sl->seeds[i] = shard_rng_next(&r);
            ShardDecodeJob j = {sl->img[i], sl->img_size[i], sl->seeds[i],
                                (unsigned char *)sl->images + i * l->spec.image_bytes, sl, i};
            shard_pool_submit(l->pool, &j); /* the pool closes only after the producer ends */
        }
        if (l->trace)
            shard_trace_span(l->trace, "batch", batch_from, shard_seconds(), n);
        if (n < bs) { /* the partial last batch is out; the END follows */
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
        atomic_store(&l->ahead, l->fill_epoch);
    }
    shard_add_seconds(&l->producer_time, shard_seconds() - atomic_exchange(&l->producer_start, 0.0));
    return NULL;
}



/* ---- threads --------------------------------------------------------------------------- */

/* Receives one slot from ready_q (waiting for it), parked for its turn. */
static void receive(ShardLoader *l)
{
    ShardSlot *sl;
    shard_queue_take(&l->ready_q, &sl);
    atomic_fetch_sub(&l->inflight, 1);
    l->parked[l->nparked++] = sl;
}

/* Stops the producer and takes back every slot it filled: afterwards every slot is either
 * free (in free_q) or held by the caller, and no thread writes one. */
static void stop_producer(ShardLoader *l)
{
    if (!l->producer_running)
        return;
    atomic_store(&l->stop, 1);
    /* the batches in flight are thrown away: not decoded (a loader freed while it reads
     * ahead into the next epoch does not wait for that epoch's first batches) */
    shard_pool_drop(l->pool, 1);
    ShardSlot *wake = NULL;
    shard_queue_put(&l->free_q, &wake, 0); /* room for it: nslots + 1 */
    pthread_join(l->producer, NULL);
    l->producer_running = 0;
    atomic_store(&l->ahead, 0);
    while (atomic_load(&l->inflight))
        receive(l);
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

static int start_producer(ShardLoader *l)
{
    l->ended = 0;
    l->next_give = l->next_fill;
    int rc = shard_thread_start(&l->producer, producer_main, l);
    if (rc)
        return shard_fail(l->err, SHARD_ERR_NOMEM, "loader: cannot start the producer thread");
    l->producer_running = 1;
    return 0;
}

/* ---- open and use ---------------------------------------------------------------------- */

static int fail_open(ShardLoader *l, ShardError *err, int rc)
{
    shard_report(err, rc, l->err);
    shard_loader_free(&l);
    return rc;
}

int shard_loader_open(ShardLoader **out, const ShardLoaderSettings *s, ShardError *err)
{
    *out = NULL;
    ShardLoader *l = calloc(1, sizeof *l);
    if (!l)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    l->s = *s;
    pthread_mutex_init(&l->at_end_lock, NULL);
    l->image_fields = shard_strdup(s->image_fields ? s->image_fields : "jpg;jpeg;png");
    l->label_field = s->label_field ? shard_strdup(s->label_field) : NULL;
    l->raw_fields = s->raw_fields && *s->raw_fields ? shard_strdup(s->raw_fields) : NULL;
    l->s.image_fields = l->image_fields;
    l->s.label_field = l->label_field;
    l->s.raw_fields = l->raw_fields;
    if (!l->image_fields || (s->label_field && !l->label_field) ||
        (s->raw_fields && *s->raw_fields && !l->raw_fields))
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
    const ShardTransform *t = &s->transform;
    if (!s->batch_size || t->width <= 0 || t->height <= 0 || t->width > 16384 || t->height > 16384)
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_INVALID,
                                            "loader: batch size and image size must be positive"));
    size_t bs = s->batch_size;
    l->spec = (ShardBatchSpec){
        .batch_size = bs,
        .image_bytes = shard_transform_output_size(t),
        .image_fields = l->image_fields,
        .label_field = l->label_field,
        .raw_fields = l->raw_fields,
        .raw_all = l->raw_fields && !strcmp(l->raw_fields, "*"),
        .missing_label = s->missing_label,
        .alloc = s->allocator ? s->allocator : shard_default_allocator(),
    };
    ShardError e;
    ShardReaderSettings rs = s->reader;
    rs.worker_align = bs; /* batch counts per rank independent of workers */
    if (shard_reader_open(&l->reader, &rs, &e))
        return fail_open(l, err, shard_fail(l->err, e.code, "%s", e.message));
    /* each shard's first sample's index in the data set, where every count is known */
    const ShardList *list = shard_reader_list(l->reader);
    size_t nshards = shard_list_count(list);
    l->offsets = malloc((nshards ? nshards : 1) * sizeof *l->offsets);
    if (!l->offsets)
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
    uint64_t sum = 0;
    for (size_t i = 0; i < nshards && l->offsets; i++) {
        uint64_t c = shard_list_entry(list, i)->nsamples;
        l->offsets[i] = sum;
        if (c == SHARD_COUNT_UNKNOWN) {
            free(l->offsets);
            l->offsets = NULL;
        }
        sum += c;
    }
    l->spec.offsets = l->offsets;
    l->epoch = l->fill_epoch = s->reader.epoch;
    int rank = s->reader.rank < 0 ? 0 : s->reader.rank;
    l->consumer = (uint64_t)rank * (uint64_t)(s->reader.num_workers ? s->reader.num_workers : 1) +
                  (uint64_t)s->reader.worker;
    l->nslots = s->batches < 2 ? 2 : s->batches;
    l->slots = calloc(l->nslots, sizeof *l->slots);
    l->parked = calloc(l->nslots, sizeof *l->parked);
    if (!l->slots || !l->parked || shard_queue_init(&l->free_q, l->nslots + 1, sizeof(ShardSlot *)) ||
        shard_queue_init(&l->ready_q, l->nslots, sizeof(ShardSlot *)))
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
    for (size_t k = 0; k < l->nslots; k++) {
        ShardSlot *sl = &l->slots[k];
        if (shard_slot_init(sl, &l->spec))
            return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM,
                                                "loader: cannot allocate %zu batch buffers of %zu "
                                                "bytes", l->nslots, bs * l->spec.image_bytes));
        shard_queue_put(&l->free_q, &sl, 0);
    }
    int threads = s->threads > 0 ? s->threads : shard_cpus_available();
    if (shard_pool_open(&l->pool, threads < 1 ? 1 : threads, bs * 2, t, decoded, l))
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "loader: no decode thread"));
    if (s->trace_path) { /* before any thread records */
        l->trace_path = shard_strdup(s->trace_path);
        l->trace = shard_trace_new(s->trace_spans ? s->trace_spans : (size_t)1 << 20);
        if (!l->trace || !l->trace_path)
            return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
        shard_pool_set_trace(l->pool, l->trace);
        shard_reader_set_trace(l->reader, l->trace);
        double t0, dt;
        ShardReaderStats rs;
        shard_reader_list_time(l->reader, &t0, &dt);
        shard_reader_stats(l->reader, &rs);
        shard_trace_set_origin(l->trace, t0);
        shard_trace_span(l->trace, "list", t0, t0 + dt, rs.shards);
    }
    /* the clock of the statistics starts once the shard list is read (indexes and
     * manifests fetched): the stages' time from here */
    l->opened = shard_seconds();
    int rc = start_producer(l);
    if (rc)
        return fail_open(l, err, rc);
    *out = l;
    return 0;
}

/* Gives a slot the caller will not see back to the producer. */
static void recycle(ShardLoader *l, ShardSlot *sl)
{
    shard_slot_clear(sl);
    shard_queue_put(&l->free_q, &sl, 0);
}

/* The parked slot whose turn it is, taken out of the parking; NULL if it has not come. */
static ShardSlot *unpark(ShardLoader *l)
{
    for (size_t i = 0; i < l->nparked; i++)
        if (l->parked[i]->seq == l->next_give) {
            ShardSlot *sl = l->parked[i];
            l->parked[i] = l->parked[--l->nparked];
            return sl;
        }
    return NULL;
}

static int loader_next(ShardLoader *l, const ShardBatch **out);

int shard_loader_next(ShardLoader *l, const ShardBatch **out)
{
    double t0 = l->trace ? shard_seconds() : 0;
    int rc = loader_next(l, out);
    if (l->trace) /* the caller's wait for a batch */
        shard_trace_span(l->trace, "deliver", t0, shard_seconds(), *out ? (*out)->size : 0);
    return rc;
}

static int loader_next(ShardLoader *l, const ShardBatch **out)
{
    *out = NULL;
    if (l->broken)
        return l->broken;
    for (;;) {
        if (l->ended)
            return SHARD_EOS;
        ShardSlot *sl = unpark(l);
        if (!sl) {
            if (atomic_load(&l->held) == l->nslots)
                return shard_fail(l->err, SHARD_ERR_STATE,
                                  "loader: all %zu batch buffers are held: release (or copy) the "
                                  "batches kept, or raise the batch count (ShardLoaderSettings."
                                  "batches; batches= in Python)",
                                  l->nslots);
            receive(l);
            continue;
        }
        l->next_give++;
        if (sl->end) {
            l->ended = 1;
            int code = sl->code;
            if (code)
                snprintf(l->err, sizeof l->err, "%s", sl->message);
            recycle(l, sl);
            return code ? code : SHARD_EOS;
        }
        /* the samples are decoded: give the reader's memory back now */
        shard_slot_release_items(sl);
        int bad = 0;
        for (size_t i = 0; i < sl->n; i++)
            bad |= sl->failed[i];
        if (bad && !l->s.reader.skip_errors) {
            const char *first = shard_slot_error(sl);
            shard_fail(l->err, SHARD_ERR_DECODE, "%s", first ? first : "decode failed");
            l->ended = 1;
            recycle(l, sl);
            return SHARD_ERR_DECODE;
        }
        shard_slot_forget_errors(sl);
        if (bad)
            l->skipped += shard_slot_compact(sl, l->spec.image_bytes, l->skipped_by);
        l->delivered_position = sl->end_position;
        if (!sl->n) { /* every sample failed: on to the next batch */
            recycle(l, sl);
            continue;
        }
        shard_slot_publish(sl, l->spec.image_bytes);
        atomic_fetch_add(&l->held, 1);
        atomic_fetch_add(&l->delivered, sl->n);
        atomic_fetch_add(&l->delivered_bytes, (uint64_t)sl->n * l->spec.image_bytes);
        *out = &sl->batch;
        return 0;
    }
}

void shard_batch_release(ShardLoader *l, const ShardBatch *b)
{
    if (!l || !b)
        return;
    ShardSlot *sl = (ShardSlot *)b; /* the batch is the slot's first member */
    atomic_fetch_sub(&l->held, 1);
    recycle(l, sl);
}

/* The producer is stopped and the reader set to a new position: start reading there, or
 * remember that no producer runs, so that next does not wait for one. */
static int restart(ShardLoader *l, int rc)
{
    if (rc)
        shard_fail(l->err, rc, "%s", shard_reader_error(l->reader));
    else
        rc = start_producer(l);
    l->broken = rc;
    return rc;
}

int shard_loader_set_epoch(ShardLoader *l, uint64_t e)
{
    if (l->producer_running && l->ended && !l->broken && e > 0 && atomic_load(&l->ahead) == e) {
        /* the producer is already in it, past the END the caller took */
        l->epoch = e;
        l->delivered_position = 0;
        l->ended = 0;
        return 0;
    }
    stop_producer(l);
    l->epoch = l->fill_epoch = e;
    l->fill_index = 0;
    l->delivered_position = 0;
    return restart(l, shard_reader_set_epoch(l->reader, e));
}

int shard_loader_state(const ShardLoader *l, char *buf, size_t size)
{
    int n = snprintf(buf, size, "v1:%llu:%llu:%llu", (unsigned long long)l->epoch,
                     (unsigned long long)l->delivered_position,
                     (unsigned long long)shard_reader_seed(l->reader));
    return n < 0 || (size_t)n >= size ? SHARD_ERR_INVALID : 0;
}

int shard_loader_restore(ShardLoader *l, const char *state)
{
    unsigned long long e, p, seed;
    char tail;
    if (sscanf(state, "v1:%llu:%llu:%llu%c", &e, &p, &seed, &tail) != 3)
        return shard_fail(l->err, SHARD_ERR_INVALID, "loader: '%s' is not a state", state);
    stop_producer(l);
    int rc = shard_reader_restore(l->reader, state);
    if (!rc) {
        l->epoch = l->fill_epoch = e;
        l->delivered_position = p;
        l->fill_index = p / l->s.batch_size;
    }
    return restart(l, rc);
}

int64_t shard_loader_epoch_batches(const ShardLoader *l)
{
    int64_t n = shard_reader_epoch_length(l->reader);
    if (n < 0)
        return -1;
    int64_t bs = (int64_t)l->s.batch_size;
    return l->s.drop_last ? n / bs : (n + bs - 1) / bs;
}

uint64_t shard_loader_seed(const ShardLoader *l) { return shard_reader_seed(l->reader); }

uint64_t shard_loader_skipped(const ShardLoader *l) { return l->skipped; }

uint64_t shard_loader_skipped_by(const ShardLoader *l, ShardBadSample why)
{
    return why > 0 && why < SHARD_BAD_N ? l->skipped_by[why] : 0;
}

void shard_loader_reader_stats(const ShardLoader *cl, ShardReaderStats *out)
{
    ShardLoader *l = (ShardLoader *)cl;
    pthread_mutex_lock(&l->at_end_lock);
    int ahead = l->have_at_end && l->at_end_epoch == l->epoch && atomic_load(&l->ahead);
    if (ahead)
        *out = l->at_end;
    pthread_mutex_unlock(&l->at_end_lock);
    if (!ahead)
        shard_reader_stats(l->reader, out);
}

/* ---- statistics ----------------------------------------------------------------------- */

void shard_loader_stats(const ShardLoader *cl, ShardLoaderStats *o)
{
    ShardLoader *l = (ShardLoader *)cl;
    memset(o, 0, sizeof *o);
    double now = shard_seconds(), wall = now - l->opened;
    o->wall_seconds = wall;
    ShardFetchCounters fc;
    shard_reader_fetch_counters(l->reader, &fc);
    ShardReaderStats rs;
    shard_reader_stats(l->reader, &rs);
    ShardPoolStats ps;
    shard_pool_stats(l->pool, &ps);
    ShardQueueStats free_q, ready_q;
    shard_queue_stats(&l->free_q, &free_q);
    shard_queue_stats(&l->ready_q, &ready_q);
    double start = atomic_load(&l->producer_start);
    double producer = atomic_load(&l->producer_time) + (start > 0 ? now - start : 0);
    double reader = atomic_load(&l->reader_time);

    /* Every stage's time is its threads x the loader's life, so shares compare: a thread
     * not running (a fetch stream between shards or epochs, the producer between epochs)
     * waits for input; the shuffle, pulled on the producer's thread, waits for its output
     * while the producer does batch work; the fetch streams' inline stages wait on each
     * other while one of them works. */
    ShardStageStats *st = o->stages;
    double fwall = (double)fc.threads * wall, idle = fwall - fc.alive;
    double parse = fc.alive - fc.put_wait - fc.read - fc.unpack;
    unsigned streams = (unsigned)fc.threads;
    st[SHARD_STAGE_LIST] = (ShardStageStats){"list", 1, rs.shards, 0, rs.list_seconds,
                                             rs.list_seconds, 0, 0, 0, 0};
    st[SHARD_STAGE_FETCH] = (ShardStageStats){"fetch", streams, fc.items, fc.read_bytes, fwall,
                                              fc.read, idle, fc.alive - fc.read, 0, 0};
    st[SHARD_STAGE_DECOMPRESS] = (ShardStageStats){
        "decompress", streams, fc.items, fc.unpack_bytes, fwall, fc.unpack, idle + fc.read,
        fc.alive - fc.read - fc.unpack, 0, 0};
    st[SHARD_STAGE_PARSE] = (ShardStageStats){"parse", streams, fc.items, fc.bytes, fwall, parse,
                                              idle + fc.read + fc.unpack, fc.put_wait, fc.fill,
                                              fc.capacity};
    st[SHARD_STAGE_SHUFFLE] = (ShardStageStats){"shuffle", 1, rs.samples, rs.bytes, wall,
                                                reader - rs.wait_seconds, rs.wait_seconds,
                                                wall - reader, 0, 0};
    double batch_out = free_q.take_wait + ps.jobs.put_wait;
    st[SHARD_STAGE_BATCH] = (ShardStageStats){"batch", 1, ps.jobs.items, ps.jobs.bytes, wall,
                                              producer - reader - batch_out,
                                              reader + (wall - producer), batch_out,
                                              ps.jobs.fill, ps.jobs.capacity};
    st[SHARD_STAGE_DECODE] = (ShardStageStats){"decode", (unsigned)ps.threads, ps.decoded,
                                               ps.decoded * l->spec.image_bytes,
                                               ps.threads * wall, ps.busy,
                                               ps.threads * wall - ps.busy, 0, ready_q.fill,
                                               ready_q.capacity};
    st[SHARD_STAGE_UPLOAD] = (ShardStageStats){"upload", 0, 0, 0, 0, 0, 0, 0, 0, 0};
    uint64_t d = atomic_load(&l->delivered);
    st[SHARD_STAGE_DELIVER] = (ShardStageStats){"deliver", 1, d, atomic_load(&l->delivered_bytes),
                                                wall, wall - ready_q.take_wait,
                                                ready_q.take_wait, 0,
                                                l->nslots - atomic_load(&l->held), l->nslots};
    for (int i = 0; i < SHARD_STAGES; i++)
        for (double *v = &st[i].busy_seconds; v <= &st[i].wait_output_seconds; v++)
            if (*v < 0) /* clock readings a moment apart */
                *v = 0;
    shard_stats_judge(o);
}

const char *shard_loader_error(const ShardLoader *l) { return l->err; }

void shard_loader_free(ShardLoader **pl)
{
    if (!pl || !*pl)
        return;
    ShardLoader *l = *pl;
    stop_producer(l);
    shard_pool_free(&l->pool);
    for (size_t k = 0; l->slots && k < l->nslots; k++)
        shard_slot_free(&l->slots[k], &l->spec);
    free(l->slots);
    free(l->parked);
    shard_queue_destroy(&l->free_q);
    shard_queue_destroy(&l->ready_q);
    shard_reader_free(&l->reader);
    free(l->image_fields);
    free(l->label_field);
    free(l->offsets);
    free(l->raw_fields);
    if (l->trace) {
        char msg[SHARD_ERROR_MAX];
        if (shard_trace_write(l->trace, l->trace_path, msg)) /* nowhere else to say it */
            fprintf(stderr, "libshard: %s\n", msg);
        shard_trace_free(&l->trace);
    }
    free(l->trace_path);
    pthread_mutex_destroy(&l->at_end_lock);
    free(l);
    *pl = NULL;
}

int shard_loader_trace_write(const ShardLoader *l, const char *path, ShardError *err)
{
    if (!l->trace)
        return shard_report(err, SHARD_ERR_STATE, "loader: no trace recorded (trace_path unset)");
    char msg[SHARD_ERROR_MAX];
    int rc = shard_trace_write(l->trace, path, msg);
    return rc ? shard_report(err, rc, msg) : 0;
}
