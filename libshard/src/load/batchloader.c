/*
 * The batch loader (shard/loader.h): opening the reader, the decode pool and the ring of
 * batch buffers; the caller's side of the ring (batches handed out in fill order, released
 * from any thread); epochs and states. The producer thread is producer.c's; the statistics,
 * loaderstats.c's. The DESIGN comment is in loaderdef.h.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/queue.h"
#include "base/trace.h"
#include "load/batch.h"
#include "load/decodepool.h"
#include "load/loaderdef.h"
#include "load/producer.h"
#include "resume/resume.h"
#include "read/aspects.h"
#include "read/streamreader.h"
#include "read/state.h"
#include "shard/loader.h"
#include "sink/sink.h"
#include "tar/item.h"

void shard_loader_default_settings(ShardLoaderSettings *s)
{
    memset(s, 0, sizeof *s);
    shard_reader_default_settings(&s->reader);
    shard_transform_default_settings(&s->transform);
    s->batch_size = 256;
    s->drop_last = 0;
    s->threads = 0;
    s->batches = 4;
    s->image_fields = "jpg;jpeg;png;webp";
    s->label_field = "cls";
    s->raw_fields = "*";
    s->allocator = NULL;
    s->decode_memory = (size_t)512 << 20;
}

static int fail_open(ShardLoader *l, ShardError *err, int rc)
{
    shard_report(err, rc, l->err);
    shard_loader_free(&l);
    return rc;
}

/* The batches' per-shard tables: each shard's first sample's index in the data set (where
 * every count is known; else none) and its source in a mix. 0 or SHARD_ERR_NOMEM. */
static int shard_tables(ShardLoader *l)
{
    const ShardList *list = shard_reader_list(l->reader);
    size_t nshards = shard_list_count(list);
    l->offsets = malloc((nshards ? nshards : 1) * sizeof *l->offsets);
    if (!l->offsets)
        return SHARD_ERR_NOMEM;
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
    if (!(l->sources = malloc((nshards ? nshards : 1) * sizeof *l->sources)))
        return SHARD_ERR_NOMEM;
    for (size_t i = 0; i < nshards; i++)
        l->sources[i] = shard_reader_source_of(l->reader, i);
    l->spec.sources = l->sources;
    return 0;
}

/* The trace the settings ask for, its origin the list's start, the list its first span.
 * 0 or SHARD_ERR_NOMEM. */
static int open_trace(ShardLoader *l)
{
    const ShardLoaderSettings *s = &l->s;
    l->trace_path = strdup(s->trace_path);
    l->trace = shard_trace_new(s->trace_spans ? s->trace_spans : (size_t)1 << 20);
    if (!l->trace || !l->trace_path)
        return SHARD_ERR_NOMEM;
    shard_pool_set_trace(l->pool, l->trace);
    shard_reader_set_trace(l->reader, l->trace);
    double t0, dt;
    ShardReaderStats rs;
    shard_reader_list_time(l->reader, &t0, &dt);
    shard_reader_stats(l->reader, &rs);
    shard_trace_set_origin(l->trace, t0);
    shard_trace_span(l->trace, "list", t0, t0 + dt, rs.shards);
    return 0;
}

/* With aspect_buckets, each image covers its bucket, aspect kept, and is cropped to it: the
 * center crop centered (SHARD_CROP_COVER), the training crop at random (COVER_RANDOM); NONE
 * resizes the whole image to the bucket. 0, or an error with the crop refused. */
static int bucket_crop(ShardLoader *l, ShardTransform *t)
{
    if (t->crop == SHARD_CROP_RANDOM_RESIZED)
        t->crop = SHARD_CROP_COVER_RANDOM;
    else if (t->crop == SHARD_CROP_CENTER)
        t->crop = SHARD_CROP_COVER;
    else if (t->crop != SHARD_CROP_COVER && t->crop != SHARD_CROP_COVER_RANDOM &&
             t->crop != SHARD_CROP_NONE)
        return shard_fail(l->err, SHARD_ERR_UNSUPPORTED, "loader: aspect_buckets cannot take "
                          "crop %d (cover, cover_random, center, random_resized or none)",
                          (int)t->crop);
    return 0;
}

/* The bytes of the largest bucket's image. */
static size_t largest_bucket(const ShardReader *r, const ShardTransform *t)
{
    size_t n = shard_reader_buckets(r, NULL, NULL, 0), most = 0;
    int *h = malloc((n ? n : 1) * sizeof *h), *w = malloc((n ? n : 1) * sizeof *w);
    if (h && w)
        shard_reader_buckets(r, h, w, n);
    for (size_t i = 0; h && w && i < n; i++) {
        ShardTransform b = *t;
        b.width = w[i], b.height = h[i];
        size_t bytes = shard_transform_output_size(&b);
        most = bytes > most ? bytes : most;
    }
    free(h);
    free(w);
    return most ? most : shard_transform_output_size(t);
}

int shard_loader_open(ShardLoader **out, const ShardLoaderSettings *s, ShardError *err)
{
    *out = NULL;
    ShardLoader *l = calloc(1, sizeof *l);
    if (!l)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    l->s = *s;
    pthread_mutex_init(&l->at_end_lock, NULL);
    pthread_mutex_init(&l->defer_lock, NULL);
    l->image_fields = strdup(s->image_fields ? s->image_fields : "jpg;jpeg;png;webp");
    l->label_field = s->label_field ? strdup(s->label_field) : NULL;
    l->raw_fields = s->raw_fields && *s->raw_fields ? strdup(s->raw_fields) : NULL;
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
    ShardTransform pt = *t; /* the decoders' */
    if (s->reader.aspect_buckets && bucket_crop(l, &pt))
        return fail_open(l, err, SHARD_ERR_UNSUPPORTED);
    ShardError e;
    ShardReaderSettings rs = s->reader;
    rs.batch_size = bs; /* equal mode's repeats and states count in batches */
    rs.drop_last = s->drop_last;
    if (rs.aspect_buckets) /* the named sets and "auto" keep the transform's area */
        rs.aspect_side = shard_aspect_side(t->width, t->height);
    if (shard_reader_open(&l->reader, &rs, &e))
        return fail_open(l, err, shard_fail(l->err, e.code, "%s", e.message));
    if (rs.aspect_buckets) {
        l->spec.image_bytes = largest_bucket(l->reader, &pt);
        l->nbuckets = shard_reader_buckets(l->reader, NULL, NULL, 0);
        if (!(l->bucket_samples = calloc(l->nbuckets, sizeof *l->bucket_samples)))
            return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
    }
    l->delivered_order = shard_reader_order(l->reader);
    if (shard_tables(l))
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
    l->epoch = l->fill_epoch = s->reader.epoch;
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
    if (shard_pool_open(&l->pool, threads < 1 ? 1 : threads, bs * 2, s->decode_memory, &pt,
                        shard_loader_decoded, l))
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "loader: no decode thread"));
    if (s->trace_path && open_trace(l)) /* before any thread records */
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
    /* the clock of the statistics starts once the shard list is read (indexes and
     * manifests fetched): the stages' time from here */
    l->opened = shard_seconds();
    int rc = shard_loader_start_producer(l);
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
                                  "loader: all %zu batch buffers are held: copy the batches "
                                  "kept (.clone() in Python) and let them go, or raise the "
                                  "batch count (batches= in Python, ShardLoaderSettings."
                                  "batches in C)",
                                  l->nslots);
            if (shard_loader_receive_for(l, l->wait) == SHARD_AGAIN)
                return SHARD_AGAIN; /* nothing changed: the next call goes on waiting */
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
        size_t failed = 0;
        if (bad && shard_slot_fill(sl, sl->sample_bytes, l->skipped_by, &failed)) {
            shard_fail(l->err, SHARD_ERR_NOMEM, "loader: out of memory");
            l->ended = 1;
            recycle(l, sl);
            return SHARD_ERR_NOMEM;
        }
        l->skipped += failed;
        l->delivered_position = sl->end_position;
        if (sl->order != l->delivered_order) {
            shard_order_put(l->delivered_order);
            l->delivered_order = shard_order_ref(sl->order);
        }
        /* every sample failed (nothing to repeat in its place), or drop_last and the epoch's
         * last short batch: on to the next batch. A skipped sample's place is a marked repeat
         * of another of its batch, so a batch is short only at the epoch's end. */
        if (!sl->n || (l->s.drop_last && sl->n < l->s.batch_size && sl->bucket < 0)) {
            l->dropped_batches += !sl->n;
            recycle(l, sl);
            continue;
        }
        shard_slot_publish(sl, sl->sample_bytes);
        atomic_fetch_add(&l->held, 1);
        atomic_fetch_add(&l->delivered, sl->n);
        atomic_fetch_add(&l->delivered_bytes, (uint64_t)sl->n * sl->sample_bytes);
        if (sl->bucket >= 0 && (size_t)sl->bucket < l->nbuckets)
            atomic_fetch_add(&l->bucket_samples[sl->bucket], sl->n);
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

/* The producer is stopped: the batches handed out next are of the reader's order now. */
static void take_order(ShardLoader *l)
{
    shard_order_put(l->delivered_order);
    l->delivered_order = shard_reader_order(l->reader);
}

/* The producer is stopped and the reader set to a new position: start reading there, or
 * remember that no producer runs, so that next does not wait for one. */
static int restart(ShardLoader *l, int rc)
{
    if (rc)
        shard_fail(l->err, rc, "%s", shard_reader_error(l->reader));
    else
        rc = shard_loader_start_producer(l);
    l->broken = rc;
    return rc;
}

int shard_loader_set_epoch(ShardLoader *l, uint64_t e)
{
    if (l->producer_running && l->ended && !l->broken && e > 0 && atomic_load(&l->ahead) == e) {
        /* the producer is already in it, past the END the caller took */
        pthread_mutex_lock(&l->at_end_lock);
        ShardOrder *o = shard_order_ref(l->ahead_order);
        pthread_mutex_unlock(&l->at_end_lock);
        if (o && o->epoch == e) {
            shard_order_put(l->delivered_order);
            l->delivered_order = o;
            l->epoch = e;
            l->delivered_position = 0;
            l->ended = 0;
            return 0;
        }
        shard_order_put(o); /* gone further already: start it anew */
    }
    shard_loader_stop_producer(l);
    l->epoch = l->fill_epoch = e;
    l->fill_index = 0;
    l->delivered_position = 0;
    int rc = shard_reader_set_epoch(l->reader, e);
    take_order(l);
    return restart(l, rc);
}

int shard_loader_state(const ShardLoader *l, char *buf, size_t size)
{
    return shard_reader_state_at(l->reader, l->delivered_order, l->delivered_position,
                                 l->s.batch_size, buf, size);
}

int shard_loader_restore(ShardLoader *l, const char *state)
{
    unsigned long long e;
    if (sscanf(state, "v%*1[1234]:%llu:", &e) != 1)
        return shard_fail(l->err, SHARD_ERR_INVALID,
                          "loader: '%.200s' is not a state (v4:EPOCH:SEED:SETTINGS;CUT)", state);
    shard_loader_stop_producer(l);
    int rc = shard_reader_restore(l->reader, state);
    if (!rc) {
        l->epoch = l->fill_epoch = e;
        l->delivered_position = shard_reader_position(l->reader);
        l->fill_index = l->delivered_position / l->s.batch_size;
    }
    take_order(l);
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

uint64_t shard_loader_skipped_batches(const ShardLoader *l) { return l->dropped_batches; }

void shard_loader_stop(ShardLoader *l)
{
    shard_loader_stop_producer(l); /* interrupts the reader: its threads' waits end */
    l->broken = shard_fail(l->err, SHARD_ERR_STATE,
                           "loader: stopped (set_epoch or restore to go on)");
}

void shard_loader_set_wait(ShardLoader *l, double seconds) { l->wait = seconds > 0 ? seconds : 0; }

void shard_loader_held(const ShardLoader *l, size_t *held, size_t *batches)
{
    *held = atomic_load(&((ShardLoader *)l)->held);
    *batches = l->nslots;
}

uint64_t shard_loader_skipped_by(const ShardLoader *l, ShardBadSample why)
{
    return why > 0 && why < SHARD_BAD_N ? l->skipped_by[why] : 0;
}

const char *shard_loader_error(const ShardLoader *l) { return l->err; }

/* The trace so far into path (a file, or an object in a bucket), whole or not at all. */
static int write_trace(ShardTrace *t, const char *path, char *msg)
{
    ShardBuf text = {0};
    int rc = shard_trace_render(t, &text);
    if (rc)
        shard_fail(msg, rc, "trace %s: out of memory", path);
    else
        rc = shard_sink_put(path, text.data, text.len, NULL, msg);
    shard_buf_free(&text);
    return rc;
}

void shard_loader_free(ShardLoader **pl)
{
    if (!pl || !*pl)
        return;
    ShardLoader *l = *pl;
    shard_loader_stop_producer(l);
    shard_pool_free(&l->pool);
    for (size_t k = 0; l->slots && k < l->nslots; k++)
        shard_slot_free(&l->slots[k], &l->spec);
    free(l->slots);
    free(l->parked);
    free(l->bucket_samples);
    shard_queue_destroy(&l->free_q);
    shard_queue_destroy(&l->ready_q);
    shard_order_put(l->delivered_order);
    shard_order_put(l->ahead_order);
    shard_reader_free(&l->reader);
    free(l->image_fields);
    free(l->label_field);
    free(l->offsets);
    free(l->sources);
    free(l->raw_fields);
    if (l->trace) {
        char msg[SHARD_ERROR_MAX];
        if (write_trace(l->trace, l->trace_path, msg)) /* nowhere else to say it */
            fprintf(stderr, "libshard: %s\n", msg);
        shard_trace_free(&l->trace);
    }
    free(l->trace_path);
    pthread_mutex_destroy(&l->at_end_lock);
    pthread_mutex_destroy(&l->defer_lock);
    free(l);
    *pl = NULL;
}

int shard_loader_trace_write(const ShardLoader *l, const char *path, ShardError *err)
{
    if (!l->trace)
        return shard_report(err, SHARD_ERR_STATE, "loader: no trace recorded (trace_path unset)");
    char msg[SHARD_ERROR_MAX];
    int rc = write_trace(l->trace, path, msg);
    return rc ? shard_report(err, rc, msg) : 0;
}
