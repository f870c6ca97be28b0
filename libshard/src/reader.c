/*
 * The streaming reader (shard/reader.h).
 *
 * DESIGN
 * - Plan: shard_epoch_plan gives this consumer's segments for the epoch (resampled mode
 *   draws shards instead). Segments are dealt to S streams statically: stream k reads
 *   segments k, k+S, k+2S, ... in order. The consumer takes one sample from each stream
 *   in turn (round-robin over streams that still have samples), then passes them through
 *   the shuffle buffer. Which stream yields next, and which buffer slot is drawn, depend
 *   only on the plan, the sample counts and the seeded generator, never on timing.
 * - Threads: one fetch thread per stream, started at the epoch's first pull (after any
 *   restore), joined when the epoch is left. It opens its segments in order, reads their
 *   samples and pushes them into its bounded queue (queue_depth); a full queue blocks it.
 *   Everything else, including the shuffle buffer, runs on the caller's thread. Items cross
 *   threads only through the queues (one mutex and two condition variables each); the
 *   counters the fetch threads update are atomics; kept error messages are under their own
 *   mutex.
 * - Samples from local uncompressed tars are views into the shard's mapping: the item
 *   holds a reference on the open file, released when the item is. Other samples are
 *   copied once into a block of their own.
 * - Resume: with every count known, restoring position P replays the round-robin and the
 *   buffer on sample identities alone (shard, sample number) for P steps, then reads the
 *   buffered samples by index and starts each stream where the replay left it. Without
 *   counts it replays by reading (and dropping) P samples.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "rng.h"
#include "shard/file.h"
#include "shard/manifest.h"
#include "shard/reader.h"

#define KEPT_ERRORS 16

typedef struct FileRef {
    ShardFile *f;
    atomic_int refs;
} FileRef;

enum { ITEM_SAMPLE, ITEM_END, ITEM_ERROR };

typedef struct Item {
    int kind;
    uint32_t shard;
    uint64_t index; /* sample number within its shard */
    char *key;
    ShardFieldView *fields;
    size_t nfields;
    void *block; /* key, names, views (and copied data) */
    FileRef *ref; /* data viewed in this file's mapping, or NULL */
    char *error;
} Item;

typedef struct Queue {
    Item **v;
    size_t cap, head, n;
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
} Queue;

typedef struct Stream {
    struct ShardReader *r;
    int id;
    pthread_t thread;
    int running;
    Queue q;
    /* where the fetch thread starts: its n-th segment, at this many samples in */
    size_t start_seg;
    uint64_t start_off;
    /* replay bookkeeping (identities): next segment, offset in it */
    size_t sim_seg;
    uint64_t sim_off;
    int active;
    struct FileRef *last_ref; /* the consumer's: the shard its last item came from (held) */
} Stream;

struct ShardReader {
    ShardReaderSettings s;
    char **urls;
    uint64_t *counts;
    size_t nurls;
    char err[SHARD_ERROR_MAX];
    int failed;

    uint64_t epoch;
    uint64_t position;
    ShardSegment *segs;
    size_t nsegs;
    int counts_known; /* every segment's count is known */
    int64_t epoch_length;

    Stream *streams;
    size_t nstreams;
    size_t rr;
    atomic_int stop;

    ShardRng buf_rng;
    Item **buf;
    size_t nbuf;
    int src_done;
    Item *last; /* handed out, freed at the next call */
    FileRef **fin; /* shards the streams have moved past, oldest first (held) */
    size_t nfin;

    int start_due; /* the fetch threads start at the first pull: a restore or set_epoch
                      right after open or an epoch change reads nothing it drops */
    atomic_ullong shards_opened, skipped_shards, skipped_samples, errors;
    uint64_t samples, bytes;
    double wait;
    pthread_mutex_t kept_lock;
    char *kept[KEPT_ERRORS];
    size_t nkept;
};

/* ---- items ----------------------------------------------------------------------------- */

static void fileref_put(FileRef *r)
{
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
        shard_file_free(&r->f);
        free(r);
    }
}

static void item_free(Item *it)
{
    if (!it)
        return;
    fileref_put(it->ref);
    free(it->block);
    free(it->error);
    free(it);
}

/* Whether a field can stay a view: it lies in the mapping of the file ref holds open. */
static int viewable(const ShardFieldView *f, const FileRef *ref)
{
    return ref && shard_file_in_map(ref->f, f->data, f->size);
}

/* One block holding n field views, their names and members, the key, and the data of the
 * fields that cannot stay views into ref's mapping (all of them with ref NULL). */
static void *item_block(const ShardFieldView *in, size_t n, const char *key, const FileRef *ref,
                        ShardFieldView **fields, char **key_out)
{
    size_t need = n * sizeof(ShardFieldView) + strlen(key) + 1;
    for (size_t i = 0; i < n; i++)
        need += strlen(in[i].name) + 1 + strlen(in[i].member) + 1 +
                (viewable(&in[i], ref) ? 0 : (size_t)in[i].size);
    char *block = malloc(need + 16);
    if (!block)
        return NULL;
    ShardFieldView *out = (ShardFieldView *)block;
    char *p = block + n * sizeof(ShardFieldView);
    for (size_t i = 0; i < n; i++) {
        ShardFieldView *fv = &out[i];
        *fv = in[i];
        size_t k = strlen(in[i].name) + 1;
        memcpy(p, in[i].name, k);
        fv->name = p;
        p += k;
        k = strlen(in[i].member) + 1;
        memcpy(p, in[i].member, k);
        fv->member = p;
        p += k;
        if (!viewable(&in[i], ref)) {
            if (in[i].size)
                memcpy(p, in[i].data, (size_t)in[i].size);
            fv->data = (const unsigned char *)p;
            p += in[i].size;
        }
    }
    memcpy(p, key, strlen(key) + 1);
    *fields = out;
    *key_out = p;
    return block;
}

/* An owned copy of a sample view: data that lie in the mapping of ref's file stay views
 * (the item keeps the file open); the rest is copied. */
static Item *item_from_view(const ShardSampleView *v, uint32_t shard, FileRef *ref)
{
    Item *it = calloc(1, sizeof *it);
    if (!it || !(it->block = item_block(v->fields, v->nfields, v->key, ref, &it->fields, &it->key))) {
        free(it);
        return NULL;
    }
    it->kind = ITEM_SAMPLE;
    it->shard = shard;
    it->index = v->index;
    it->nfields = v->nfields;
    int views = 0;
    for (size_t i = 0; i < v->nfields; i++)
        views |= viewable(&v->fields[i], ref);
    if (views) {
        /* Fault the viewed pages in here, on the fetch thread, rather than on the consumer's
         * thread later, where the shuffle buffer makes the order random. */
        unsigned acc = 0;
        for (size_t i = 0; i < v->nfields; i++)
            if (viewable(&v->fields[i], ref))
                for (uint64_t off = 0; off < v->fields[i].size; off += 4096)
                    acc += ((const volatile unsigned char *)v->fields[i].data)[off];
        (void)acc;
        atomic_fetch_add(&ref->refs, 1);
        it->ref = ref;
    }
    return it;
}

/* Copies an item's mapped data into a block of its own and lets go of the file. */
static int item_detach(Item *it)
{
    ShardFieldView *fields;
    char *key;
    void *block = item_block(it->fields, it->nfields, it->key, NULL, &fields, &key);
    if (!block)
        return SHARD_ERR_NOMEM;
    free(it->block);
    it->block = block;
    it->fields = fields;
    it->key = key;
    fileref_put(it->ref);
    it->ref = NULL;
    return 0;
}

static Item *item_marker(int kind, const char *error)
{
    Item *it = calloc(1, sizeof *it);
    if (it) {
        it->kind = kind;
        it->error = error ? shard_strdup(error) : NULL;
    }
    return it;
}

/* ---- queues ---------------------------------------------------------------------------- */

static int queue_init(Queue *q, size_t cap)
{
    memset(q, 0, sizeof *q);
    q->v = calloc(cap, sizeof *q->v);
    q->cap = cap;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    return q->v ? 0 : SHARD_ERR_NOMEM;
}

static void queue_drain(Queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->n) {
        item_free(q->v[q->head]);
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
}

static void queue_destroy(Queue *q)
{
    if (!q->v)
        return;
    queue_drain(q);
    free(q->v);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    q->v = NULL;
}

/* Returns 0, or -1 when the reader is stopping (the item is then freed). */
static int queue_push(Queue *q, Item *it, atomic_int *stop)
{
    pthread_mutex_lock(&q->lock);
    while (q->n == q->cap && !atomic_load(stop))
        pthread_cond_wait(&q->not_full, &q->lock);
    if (atomic_load(stop)) {
        pthread_mutex_unlock(&q->lock);
        item_free(it);
        return -1;
    }
    q->v[(q->head + q->n) % q->cap] = it;
    q->n++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static Item *queue_pop(Queue *q, double *waited)
{
    pthread_mutex_lock(&q->lock);
    if (!q->n) {
        double t = now();
        while (!q->n)
            pthread_cond_wait(&q->not_empty, &q->lock);
        *waited += now() - t;
    }
    Item *it = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->lock);
    return it;
}

/* ---- the epoch's segments -------------------------------------------------------------- */

static uint64_t consumer_id(const ShardReader *r)
{
    return (uint64_t)r->s.rank * (uint64_t)r->s.num_workers + (uint64_t)r->s.worker;
}

/* Segment n of stream k, or NULL past its last. Resampled epochs draw them. */
static int stream_segment(ShardReader *r, size_t k, size_t n, ShardSegment *out)
{
    if (r->s.mode == SHARD_MODE_RESAMPLED) {
        if (!r->nurls)
            return 0;
        /* Draw n of stream k: a generator per (epoch, consumer, stream, n) keeps it O(1). */
        ShardRng g;
        shard_rng_init(&g, r->s.seed, SHARD_RNG_RESAMPLE, r->epoch, consumer_id(r),
                       ((uint64_t)k << 40) ^ n);
        out->shard = (uint32_t)shard_rng_below(&g, r->nurls);
        out->first = 0;
        out->count = r->counts[out->shard];
        return 1;
    }
    size_t i = k + n * r->nstreams;
    if (i >= r->nsegs)
        return 0;
    *out = r->segs[i];
    return 1;
}

static void keep_error(ShardReader *r, const char *msg)
{
    atomic_fetch_add(&r->errors, 1);
    pthread_mutex_lock(&r->kept_lock);
    if (r->nkept < KEPT_ERRORS)
        r->kept[r->nkept++] = shard_strdup(msg);
    pthread_mutex_unlock(&r->kept_lock);
}

/* Reads one segment into the stream's queue. Returns 0 to go on, -1 to stop the thread. */
static int fetch_segment(ShardReader *r, Stream *st, const ShardSegment *seg, uint64_t skip)
{
    const char *url = r->urls[seg->shard];
    ShardFile *f;
    ShardError err;
    if (seg->count != SHARD_COUNT_UNKNOWN && skip >= seg->count)
        return 0;
    uint64_t first = seg->first + skip;
    uint64_t count = seg->count == SHARD_COUNT_UNKNOWN ? SHARD_COUNT_UNKNOWN : seg->count - skip;
    atomic_fetch_add(&r->shards_opened, 1);
    if (shard_file_open(&f, url, NULL, &err)) {
        if (!r->s.skip_errors)
            return queue_push(&st->q, item_marker(ITEM_ERROR, err.message), &r->stop), -1;
        keep_error(r, err.message);
        atomic_fetch_add(&r->skipped_shards, 1);
        if (count != SHARD_COUNT_UNKNOWN)
            atomic_fetch_add(&r->skipped_samples, count);
        return 0;
    }
    FileRef *ref = NULL;
    if (!strcmp(shard_file_compression(f), "none") && shard_file_size(f) >= 0) {
        ref = calloc(1, sizeof *ref);
        if (ref) {
            ref->f = f;
            atomic_init(&ref->refs, 1);
        }
    }
    int rc = 0;
    /* Skip the samples before first: by index where there is one, else by reading. */
    if (first && shard_file_seek(f, first) != 0)
        for (uint64_t i = 0; i < first && rc == 0; i++) {
            const ShardSampleView *v;
            rc = shard_file_next(f, &v);
        }
    uint64_t got = 0;
    while (rc == 0 && got < count && !atomic_load(&r->stop)) {
        const ShardSampleView *v;
        rc = shard_file_next(f, &v);
        if (rc)
            break;
        Item *it = item_from_view(v, seg->shard, ref);
        if (!it) {
            rc = SHARD_ERR_NOMEM;
            snprintf(err.message, sizeof err.message, "out of memory");
            break;
        }
        if (queue_push(&st->q, it, &r->stop))
            break;
        got++;
    }
    int stop = 0;
    if (rc == SHARD_EOS && count != SHARD_COUNT_UNKNOWN && got < count) {
        char msg[SHARD_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s: offset %lld: the shard ends after %llu samples, %llu "
                                  "were expected (truncated, or the manifest or index is out of "
                                  "date)",
                 url, (long long)shard_file_size(f), (unsigned long long)(first + got),
                 (unsigned long long)(first + count));
        rc = SHARD_ERR_FORMAT;
        snprintf(err.message, sizeof err.message, "%s", msg);
    } else if (rc && rc != SHARD_EOS && rc != SHARD_ERR_NOMEM) {
        snprintf(err.message, sizeof err.message, "%s", shard_file_error(f));
    }
    if (rc && rc != SHARD_EOS) {
        if (!r->s.skip_errors) {
            queue_push(&st->q, item_marker(ITEM_ERROR, err.message), &r->stop);
            stop = 1;
        } else {
            keep_error(r, err.message);
            atomic_fetch_add(&r->skipped_shards, 1);
            if (count != SHARD_COUNT_UNKNOWN)
                atomic_fetch_add(&r->skipped_samples, count - got);
        }
    }
    if (ref)
        fileref_put(ref);
    else
        shard_file_free(&f);
    return stop || atomic_load(&r->stop) ? -1 : 0;
}

static void *fetch_main(void *arg)
{
    Stream *st = arg;
    ShardReader *r = st->r;
    ShardSegment seg;
    uint64_t skip = st->start_off;
    for (size_t n = st->start_seg; !atomic_load(&r->stop) && stream_segment(r, st->id, n, &seg); n++) {
        if (fetch_segment(r, st, &seg, skip))
            return NULL;
        skip = 0;
    }
    queue_push(&st->q, item_marker(ITEM_END, NULL), &r->stop);
    return NULL;
}

static void stop_threads(ShardReader *r)
{
    atomic_store(&r->stop, 1);
    for (size_t k = 0; k < r->nstreams; k++) {
        Stream *st = &r->streams[k];
        if (!st->running)
            continue;
        pthread_mutex_lock(&st->q.lock);
        pthread_cond_broadcast(&st->q.not_full);
        pthread_mutex_unlock(&st->q.lock);
        pthread_join(st->thread, NULL);
        st->running = 0;
    }
    for (size_t k = 0; k < r->nstreams; k++)
        queue_drain(&r->streams[k].q);
    atomic_store(&r->stop, 0);
}

static int start_threads(ShardReader *r)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    for (size_t k = 0; k < r->nstreams && !rc; k++) {
        Stream *st = &r->streams[k];
        if (!st->active)
            continue;
        if (pthread_create(&st->thread, NULL, fetch_main, st))
            rc = shard_fail(r->err, SHARD_ERR_NOMEM, "reader: cannot start a fetch thread");
        else
            st->running = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static void clear_buffer(ShardReader *r)
{
    for (size_t i = 0; i < r->nbuf; i++)
        item_free(r->buf[i]);
    r->nbuf = 0;
    for (size_t k = 0; r->streams && k < r->nstreams; k++) {
        fileref_put(r->streams[k].last_ref);
        r->streams[k].last_ref = NULL;
    }
    for (size_t i = 0; i < r->nfin; i++)
        fileref_put(r->fin[i]);
    r->nfin = 0;
    item_free(r->last);
    r->last = NULL;
}

/* Plans epoch e and resets every stream to its start (threads not started). */
static int plan_epoch(ShardReader *r, uint64_t e)
{
    stop_threads(r);
    r->start_due = 0; /* the caller says when the new plan may start */
    clear_buffer(r);
    free(r->segs);
    r->segs = NULL;
    r->nsegs = 0;
    r->epoch = e;
    r->position = 0;
    r->rr = 0;
    r->src_done = 0;
    shard_rng_init(&r->buf_rng, r->s.seed, SHARD_RNG_BUFFER, e, consumer_id(r), 0);
    if (r->s.mode != SHARD_MODE_RESAMPLED) {
        ShardPlanSettings p = {r->s.seed, e, r->s.rank, r->s.world_size, r->s.worker,
                               r->s.num_workers, r->s.mode, r->s.pad, r->s.shuffle_shards,
                               r->s.worker_align};
        int rc = shard_epoch_plan(r->counts, r->nurls, &p, &r->segs, &r->nsegs);
        if (rc == SHARD_ERR_UNSUPPORTED)
            return shard_fail(r->err, rc, "reader: equal mode needs the sample count of every "
                                          "shard (a manifest, or a .idx beside each shard)");
        if (rc)
            return shard_fail(r->err, rc, "reader: cannot plan the epoch");
    }
    r->counts_known = 1;
    uint64_t total = 0;
    for (size_t i = 0; i < r->nsegs; i++) {
        if (r->segs[i].count == SHARD_COUNT_UNKNOWN)
            r->counts_known = 0;
        else
            total += r->segs[i].count;
    }
    if (r->s.mode == SHARD_MODE_RESAMPLED) {
        for (size_t i = 0; i < r->nurls; i++)
            if (r->counts[i] == SHARD_COUNT_UNKNOWN)
                r->counts_known = 0;
        r->epoch_length = r->s.epoch_samples ? (int64_t)r->s.epoch_samples : -1;
    } else {
        r->epoch_length = r->counts_known ? (int64_t)total : -1;
    }
    for (size_t k = 0; k < r->nstreams; k++) {
        Stream *st = &r->streams[k];
        ShardSegment seg;
        st->start_seg = 0;
        st->start_off = 0;
        st->sim_seg = 0;
        st->sim_off = 0;
        st->active = stream_segment(r, k, 0, &seg);
    }
    return 0;
}

/* ---- the consumer's side --------------------------------------------------------------- */

/* The stream whose turn it is in the round-robin (the next one still active from rr);
 * NULL when every stream has ended. The data path and the replay share this order. */
static Stream *current_stream(ShardReader *r)
{
    for (size_t tries = 0; tries < r->nstreams; tries++) {
        if (r->streams[r->rr].active)
            return &r->streams[r->rr];
        r->rr = (r->rr + 1) % r->nstreams;
    }
    return NULL;
}

/* Samples wait in the shuffle buffer long after their shard was read, and each keeps its
 * shard mapped: left alone, every shard of the epoch could stay mapped and resident, and
 * memory would grow with the data set instead of with the buffers. So the consumer keeps
 * the shards its streams have moved past in a FIFO (holding them), and once more than
 * `nstreams` wait there, the oldest one's stragglers get copies of their bytes and the
 * shard is let go. By then few of its samples are left in the buffer, so little is copied
 * (the rest stay zero-copy views); a shard no sample holds any more goes at once. */
static void finished_trim(ShardReader *r, size_t keep)
{
    size_t o = 0;
    for (size_t i = 0; i < r->nfin; i++) {
        FileRef *f = r->fin[i];
        if (atomic_load(&f->refs) == 1) /* only ours: no sample holds it */
            fileref_put(f);
        else
            r->fin[o++] = f;
    }
    r->nfin = o;
    while (r->nfin > keep) {
        FileRef *f = r->fin[0];
        for (size_t i = 0; i < r->nbuf; i++)
            if (r->buf[i]->ref == f)
                item_detach(r->buf[i]); /* out of memory: it keeps its view */
        fileref_put(f);
        memmove(r->fin, r->fin + 1, --r->nfin * sizeof *r->fin);
    }
}

/* The consumer saw stream st's next item come from next's shard (NULL: no mapping). */
static void stream_moved_on(ShardReader *r, Stream *st, FileRef *next)
{
    FileRef *old = st->last_ref;
    if (old == next)
        return;
    if (next)
        atomic_fetch_add(&next->refs, 1);
    st->last_ref = next;
    if (old)
        r->fin[r->nfin++] = old; /* the reference moves to the FIFO */
    finished_trim(r, r->nstreams);
}

/* The next item in round-robin order; NULL at the end of the epoch's streams. */
static Item *pull(ShardReader *r, int *rc)
{
    *rc = 0;
    if (r->start_due) {
        r->start_due = 0;
        if ((*rc = start_threads(r)))
            return NULL;
    }
    Stream *st;
    while ((st = current_stream(r))) {
        Item *it = queue_pop(&st->q, &r->wait);
        if (it->kind == ITEM_END) {
            item_free(it);
            stream_moved_on(r, st, NULL);
            st->active = 0;
            r->rr = (r->rr + 1) % r->nstreams;
            continue;
        }
        if (it->kind == ITEM_SAMPLE && r->s.shuffle_buffer)
            stream_moved_on(r, st, it->ref);
        if (it->kind == ITEM_ERROR) {
            *rc = shard_fail(r->err, SHARD_ERR_FORMAT, "%s", it->error ? it->error : "read error");
            item_free(it);
            return NULL;
        }
        r->rr = (r->rr + 1) % r->nstreams;
        return it;
    }
    return NULL;
}

/* One step of the pipeline: the next item to yield, NULL at the end. The same code runs on
 * identities during a replay (pull_fn differs). */
typedef Item *(*PullFn)(ShardReader *r, int *rc);

/* Pulls one item into the shuffle buffer, or notes the source's end. Returns an error code. */
static int buffer_fill(ShardReader *r, PullFn pullf)
{
    int rc;
    Item *it = pullf(r, &rc);
    if (rc)
        return rc;
    if (!it)
        r->src_done = 1;
    else
        r->buf[r->nbuf++] = it;
    return 0;
}

static Item *step(ShardReader *r, PullFn pullf, int *rc)
{
    *rc = 0;
    size_t size = r->s.shuffle_buffer;
    if (r->s.mode == SHARD_MODE_RESAMPLED && r->s.epoch_samples && r->position >= r->s.epoch_samples)
        return NULL;
    if (!size) {
        if (r->src_done)
            return NULL;
        Item *it = pullf(r, rc);
        if (!it)
            r->src_done = 1;
        return it;
    }
    size_t initial = r->s.shuffle_initial && r->s.shuffle_initial < size ? r->s.shuffle_initial : size;
    while (!r->src_done && r->nbuf < initial)
        if ((*rc = buffer_fill(r, pullf)))
            return NULL;
    /* keep topping the buffer up by one per step until it is full */
    if (!r->src_done && r->nbuf < size && (*rc = buffer_fill(r, pullf)))
        return NULL;
    if (!r->nbuf)
        return NULL;
    size_t k = (size_t)shard_rng_below(&r->buf_rng, r->nbuf);
    Item *out = r->buf[k];
    Item *next = NULL;
    if (!r->src_done) {
        next = pullf(r, rc);
        if (*rc) {
            item_free(out);
            r->buf[k] = r->buf[--r->nbuf];
            return NULL;
        }
        if (!next)
            r->src_done = 1;
    }
    if (next)
        r->buf[k] = next;
    else
        r->buf[k] = r->buf[--r->nbuf];
    return out;
}

int shard_reader_next(ShardReader *r, const char **key, const char **url,
                      const ShardFieldView **fields, size_t *nfields)
{
    item_free(r->last);
    r->last = NULL;
    if (r->failed)
        return r->failed;
    int rc;
    Item *it = step(r, pull, &rc);
    if (rc) {
        r->failed = rc;
        return rc;
    }
    if (!it)
        return SHARD_EOS;
    r->last = it;
    r->position++;
    r->samples++;
    for (size_t i = 0; i < it->nfields; i++)
        r->bytes += it->fields[i].size;
    *key = it->key;
    *url = r->urls[it->shard];
    *fields = it->fields;
    *nfields = it->nfields;
    return 0;
}

int shard_reader_take(ShardReader *r, void **item, const char **key, const char **url,
                      const ShardFieldView **fields, size_t *nfields, uint64_t *position)
{
    *item = NULL;
    *position = r->position;
    int rc = shard_reader_next(r, key, url, fields, nfields);
    if (rc == 0) {
        *item = r->last;
        r->last = NULL;
    }
    return rc;
}

void shard_reader_item_free(void *item)
{
    item_free(item);
}

/* ---- replay on identities -------------------------------------------------------------- */

static uint64_t stream_seg_count(ShardReader *r, size_t k, size_t n, ShardSegment *seg, int *ok)
{
    *ok = stream_segment(r, k, n, seg);
    return *ok ? seg->count : 0;
}

/* The identity of the next sample of the round-robin, advancing the replay state. */
static Item *pull_sim(ShardReader *r, int *rc)
{
    *rc = 0;
    Stream *st;
    while ((st = current_stream(r))) {
        ShardSegment seg;
        int ok;
        uint64_t cnt = stream_seg_count(r, (size_t)st->id, st->sim_seg, &seg, &ok);
        while (ok && st->sim_off >= cnt) {
            st->sim_seg++;
            st->sim_off = 0;
            cnt = stream_seg_count(r, (size_t)st->id, st->sim_seg, &seg, &ok);
        }
        if (!ok) { /* the stream's END */
            st->active = 0;
            r->rr = (r->rr + 1) % r->nstreams;
            continue;
        }
        Item *it = calloc(1, sizeof *it);
        if (!it) {
            *rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
            return NULL;
        }
        it->kind = ITEM_SAMPLE;
        it->shard = seg.shard;
        it->index = seg.first + st->sim_off;
        st->sim_off++;
        r->rr = (r->rr + 1) % r->nstreams;
        return it;
    }
    return NULL;
}

/* Replaces each identity in the buffer by the sample itself, read by index. */
static int load_buffer(ShardReader *r)
{
    for (size_t i = 0; i < r->nbuf; i++) {
        if (r->buf[i]->block)
            continue;
        uint32_t shard = r->buf[i]->shard; /* buf[i] is replaced (freed) below */
        const char *url = r->urls[shard];
        ShardFile *f;
        ShardError err;
        if (shard_file_open(&f, url, NULL, &err))
            return shard_fail(r->err, err.code, "reader: restoring the shuffle buffer: %s",
                              err.message);
        /* Every identity of this shard in one pass, in buffer order. */
        for (size_t j = i; j < r->nbuf; j++) {
            Item *x = r->buf[j];
            if (x->block || x->shard != shard)
                continue;
            const ShardSampleView *v = NULL;
            int rc = shard_file_seek(f, x->index);
            if (rc == 0)
                rc = shard_file_next(f, &v);
            else {
                /* No index: read from the start up to it. */
                shard_file_free(&f);
                if (shard_file_open(&f, url, NULL, &err))
                    return shard_fail(r->err, err.code, "reader: %s", err.message);
                rc = 0;
                for (uint64_t k = 0; k <= x->index && rc == 0; k++)
                    rc = shard_file_next(f, &v);
            }
            if (rc) {
                int code = shard_fail(r->err, rc == SHARD_EOS ? SHARD_ERR_FORMAT : rc,
                                      "reader: restoring sample %llu of %s: %s",
                                      (unsigned long long)x->index, url,
                                      rc == SHARD_EOS ? "the shard is shorter" : shard_file_error(f));
                shard_file_free(&f);
                return code;
            }
            Item *full = item_from_view(v, x->shard, NULL);
            if (!full) {
                shard_file_free(&f);
                return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
            }
            item_free(x);
            r->buf[j] = full;
        }
        shard_file_free(&f);
    }
    return 0;
}

static int restore_to(ShardReader *r, uint64_t epoch, uint64_t position)
{
    int rc = plan_epoch(r, epoch);
    if (rc)
        return rc;
    if (!r->counts_known || r->s.skip_errors) {
        /* No counts to replay on, or errors may have changed them: read and drop, which
         * meets the same errors at the same places. */
        r->start_due = 1;
        const char *k, *u;
        const ShardFieldView *fv;
        size_t nf;
        for (uint64_t i = 0; i < position; i++) {
            rc = shard_reader_next(r, &k, &u, &fv, &nf);
            if (rc == SHARD_EOS)
                return shard_fail(r->err, SHARD_ERR_INVALID,
                                  "reader: the state's position %llu is past the epoch's end",
                                  (unsigned long long)position);
            if (rc)
                return rc;
        }
        r->samples -= position;
        return 0;
    }
    for (uint64_t i = 0; i < position; i++) {
        Item *it = step(r, pull_sim, &rc);
        if (rc)
            return rc;
        if (!it)
            return shard_fail(r->err, SHARD_ERR_INVALID,
                              "reader: the state's position %llu is past the epoch's end (%llu)",
                              (unsigned long long)position, (unsigned long long)i);
        item_free(it);
        r->position++;
    }
    /* Each stream starts where the replay left it. */
    for (size_t k = 0; k < r->nstreams; k++) {
        Stream *st = &r->streams[k];
        st->start_seg = st->sim_seg;
        st->start_off = st->sim_off;
    }
    if ((rc = load_buffer(r)))
        return rc;
    r->start_due = 1;
    return 0;
}

/* ---- open, epochs, state --------------------------------------------------------------- */

void shard_reader_default_settings(ShardReaderSettings *s)
{
    memset(s, 0, sizeof *s);
    s->urls = NULL;
    s->nurls = 0;
    s->seed = 0;
    s->have_seed = 0;
    s->epoch = 0;
    s->rank = -1;
    s->world_size = -1;
    s->worker = 0;
    s->num_workers = 1;
    s->mode = SHARD_MODE_EXACT;
    s->pad = 0;
    s->epoch_samples = 0;
    s->shuffle_shards = 1;
    s->shuffle_buffer = 0;
    s->shuffle_initial = 0;
    s->streams = 4;
    s->queue_depth = 64;
    s->skip_errors = 0;
    s->worker_align = 1;
}

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end;
    long x = strtol(v, &end, 10);
    return (*end || x < 0 || x > 1 << 30) ? -2 : (int)x;
}

/* The sample count of a local shard from its index's header line, or UNKNOWN. */
static uint64_t index_count(const char *url)
{
    if (!strncmp(url, "pipe:", 5) || strstr(url, "://"))
        return SHARD_COUNT_UNKNOWN;
    char *ip = shard_index_path(url);
    FILE *f = ip ? fopen(ip, "r") : NULL;
    free(ip);
    if (!f)
        return SHARD_COUNT_UNKNOWN;
    char line[64] = "";
    unsigned long long n;
    uint64_t out = SHARD_COUNT_UNKNOWN;
    if (fgets(line, sizeof line, f) &&
        (sscanf(line, "v1.2 %llu", &n) == 1 || sscanf(line, "v1.1 %llu", &n) == 1))
        out = n;
    fclose(f);
    return out;
}

static int add_url(ShardReader *r, const char *url, uint64_t count, size_t *cap)
{
    if (r->nurls == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        char **u = realloc(r->urls, *cap * sizeof *u);
        if (u)
            r->urls = u;
        uint64_t *c = u ? realloc(r->counts, *cap * sizeof *c) : NULL;
        if (!c)
            return SHARD_ERR_NOMEM;
        r->counts = c;
    }
    if (!(r->urls[r->nurls] = shard_strdup(url)))
        return SHARD_ERR_NOMEM;
    r->counts[r->nurls++] = count;
    return 0;
}

static int fail_open(ShardReader *r, ShardError *err, int rc)
{
    shard_report(err, rc, r->err);
    shard_reader_free(&r);
    return rc;
}

int shard_reader_open(ShardReader **out, const ShardReaderSettings *s, ShardError *err)
{
    *out = NULL;
    ShardReader *r = calloc(1, sizeof *r);
    if (!r)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    r->s = *s;
    r->s.urls = NULL;
    pthread_mutex_init(&r->kept_lock, NULL);
    if (r->s.rank < 0)
        r->s.rank = env_int("RANK", 0);
    if (r->s.world_size < 0)
        r->s.world_size = env_int("WORLD_SIZE", 1);
    if (r->s.rank < 0 || r->s.world_size < 1 || r->s.rank >= r->s.world_size)
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_INVALID,
                                            "reader: rank %d of world size %d is not valid "
                                            "(check $RANK and $WORLD_SIZE)",
                                            r->s.rank, r->s.world_size));
    if (r->s.num_workers < 1 || r->s.worker < 0 || r->s.worker >= r->s.num_workers)
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_INVALID,
                                            "reader: worker %d of %d is not valid", r->s.worker,
                                            r->s.num_workers));
    if (r->s.mode < SHARD_MODE_EXACT || r->s.mode > SHARD_MODE_RESAMPLED)
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_INVALID, "reader: unknown mode"));
    if (!r->s.streams)
        r->s.streams = 1;
    if (!r->s.queue_depth)
        r->s.queue_depth = 1;
    if (!r->s.have_seed) {
        uint64_t x;
        if (getrandom(&x, sizeof x, 0) != sizeof x)
            x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        r->s.seed = x;
        r->s.have_seed = 1;
    }
    size_t cap = 0;
    for (size_t i = 0; i < s->nurls; i++) {
        const char *spec = s->urls[i];
        ShardError e;
        if (shard_ends_with(spec, ".json") && strncmp(spec, "pipe:", 5)) {
            ShardManifest *m;
            if (shard_manifest_read(&m, spec, &e))
                return fail_open(r, err, shard_fail(r->err, e.code, "%s", e.message));
            for (size_t k = 0; k < shard_manifest_count(m); k++) {
                const ShardFileInfo *fi = shard_manifest_shard(m, k);
                if (add_url(r, fi->url, fi->nsamples, &cap)) {
                    shard_manifest_free(&m);
                    return fail_open(r, err, shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory"));
                }
            }
            shard_manifest_free(&m);
            continue;
        }
        char **urls;
        size_t n;
        if (shard_urls_expand(spec, &urls, &n, &e))
            return fail_open(r, err, shard_fail(r->err, e.code, "%s", e.message));
        for (size_t k = 0; k < n; k++) {
            if (add_url(r, urls[k], index_count(urls[k]), &cap)) {
                shard_urls_free(urls, n);
                return fail_open(r, err, shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory"));
            }
        }
        shard_urls_free(urls, n);
    }
    if (!r->nurls)
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_INVALID, "reader: no shards given"));
    r->nstreams = r->s.streams;
    r->streams = calloc(r->nstreams, sizeof *r->streams);
    r->fin = calloc(r->nstreams + 2, sizeof *r->fin); /* nstreams kept, plus one arriving */
    r->buf = calloc(r->s.shuffle_buffer ? r->s.shuffle_buffer : 1, sizeof *r->buf);
    if (!r->streams || !r->fin || !r->buf)
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory"));
    for (size_t k = 0; k < r->nstreams; k++) {
        r->streams[k].r = r;
        r->streams[k].id = (int)k;
        if (queue_init(&r->streams[k].q, r->s.queue_depth))
            return fail_open(r, err, shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory"));
    }
    int rc = plan_epoch(r, r->s.epoch);
    if (rc)
        return fail_open(r, err, rc);
    r->start_due = 1;
    *out = r;
    return 0;
}

int shard_reader_set_epoch(ShardReader *r, uint64_t e)
{
    r->failed = 0;
    int rc = plan_epoch(r, e);
    if (rc)
        r->failed = rc;
    else
        r->start_due = 1;
    return rc;
}

int shard_reader_state(const ShardReader *r, char *buf, size_t size)
{
    int n = snprintf(buf, size, "v1:%llu:%llu:%llu", (unsigned long long)r->epoch,
                     (unsigned long long)r->position, (unsigned long long)r->s.seed);
    return n < 0 || (size_t)n >= size ? SHARD_ERR_INVALID : 0;
}

int shard_reader_restore(ShardReader *r, const char *state)
{
    unsigned long long e, p, seed;
    char tail;
    if (sscanf(state, "v1:%llu:%llu:%llu%c", &e, &p, &seed, &tail) != 3)
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: '%s' is not a reader state (v1:EPOCH:POSITION:SEED)", state);
    if (seed != r->s.seed)
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: the state was taken with seed %llu, this reader has %llu", seed,
                          (unsigned long long)r->s.seed);
    r->failed = 0;
    int rc = restore_to(r, e, p);
    if (rc)
        r->failed = rc;
    return rc;
}

uint64_t shard_reader_seed(const ShardReader *r) { return r->s.seed; }

int64_t shard_reader_epoch_length(const ShardReader *r) { return r->epoch_length; }

void shard_reader_stats(const ShardReader *r, ShardReaderStats *st)
{
    st->samples = r->samples;
    st->bytes = r->bytes;
    st->shards_opened = atomic_load(&r->shards_opened);
    st->wait_seconds = r->wait;
    st->skipped_shards = atomic_load(&r->skipped_shards);
    st->skipped_samples = atomic_load(&r->skipped_samples);
    st->errors = atomic_load(&r->errors);
}

const char *shard_reader_kept_error(const ShardReader *r, size_t i)
{
    ShardReader *m = (ShardReader *)r;
    pthread_mutex_lock(&m->kept_lock);
    const char *e = i < m->nkept ? m->kept[i] : NULL;
    pthread_mutex_unlock(&m->kept_lock);
    return e;
}

const char *shard_reader_error(const ShardReader *r) { return r->err; }

void shard_reader_free(ShardReader **pr)
{
    if (!pr || !*pr)
        return;
    ShardReader *r = *pr;
    if (r->streams) {
        stop_threads(r);
        for (size_t k = 0; k < r->nstreams; k++)
            queue_destroy(&r->streams[k].q);
    }
    clear_buffer(r);
    free(r->fin);
    free(r->buf);
    free(r->streams);
    free(r->segs);
    for (size_t i = 0; i < r->nurls; i++)
        free(r->urls[i]);
    free(r->urls);
    free(r->counts);
    for (size_t i = 0; i < r->nkept; i++)
        free(r->kept[i]);
    pthread_mutex_destroy(&r->kept_lock);
    free(r);
    *pr = NULL;
}
