/*
 * The fetch stage (fetch.h).
 *
 * DESIGN
 * - One thread per stream, started by the consumer (shard_fetch_start) and joined by
 *   shard_fetch_stop; nothing else runs on it. It opens its segments in order, takes their
 *   samples from the shard as owned items (views into a mapped shard hold the shard's
 *   source; other bytes are copied once) and puts them into the stream's queue, which
 *   blocks it when the consumer is queue_depth samples behind. After the last segment it
 *   puts an END marker; in fail mode, a failure is an ERROR marker and the thread ends.
 * - Viewed pages are faulted in here, on the fetch thread, rather than on the consumer's
 *   thread later, where the shuffle buffer makes the order random.
 * - Stopping closes every queue: a thread blocked on a full queue wakes, drops its item and
 *   ends; the items left in the queues are released, and the queues reopened.
 * - Counters are atomics; kept error messages are under their own mutex.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/thread.h"
#include "base/trace.h"
#include "catalog/keyview.h"
#include "read/fetch.h"
#include "remote/store.h"
#include "tar/tar.h"
#include "shard/file.h"
#include "tar/shardfile.h"

#define KEPT_ERRORS 16
/* Freed samples' blocks kept for the next ones: as many as the queues hold when full (a
 * sample has two), since the consumer empties them in bursts while the network stalls and
 * the streams refill them in bursts after. Kept blocks were the queues' before, so that
 * keeps no more memory than the queues took; bounded in bytes too where they are not. */
#define POOL_BLOCKS_PER_SAMPLE 2
#define POOL_BLOCKS_MAX 4096
#define POOL_BYTES ((size_t)64 << 20)

typedef struct Stream {
    ShardFetch *f;
    size_t id;
    pthread_t thread;
    int running;
    ShardQueue q; /* ShardItem pointers */
    size_t first; /* where the thread starts: its segment first, skip samples in */
    uint64_t skip;
    ShardItem *last; /* the END or ERROR marker, made before the thread starts so that the
                        stream always ends with one, out of memory or not */
    double started; /* when the thread began, 0 once it ended (statistics; alive_lock) */
    ShardSourceThread *io; /* what the thread's sources share (its own network loop for
                              remote shards: source/open.h) */
} Stream;

struct ShardFetch {
    ShardFetchSettings s;
    Stream *streams;
    size_t nqueues; /* streams whose queue is set up */
    atomic_int stop;
    ShardBlockPool *pool; /* the streams' sample blocks, recycled */
    atomic_ullong shards_opened, skipped_shards, skipped_samples, errors;
    /* seconds of ended stream threads; with the streams' start times under one lock, so
     * that a thread ending while the statistics are read is counted once, not never */
    pthread_mutex_t alive_lock;
    double alive;
    atomic_ullong samples; /* put into the queues (markers not counted) */
    /* the streams' inline stages: reading (opening shards, their I/O, faulting in mapped
     * pages) and decompressing; the rest of their busy time is parsing */
    _Atomic double read_s, unpack_s;
    atomic_ullong read_bytes, unpack_bytes;
    struct ShardTrace *trace;
    pthread_mutex_t kept_lock;
    char *kept[KEPT_ERRORS];
    size_t nkept;
};

static void keep_error(ShardFetch *f, const char *msg)
{
    atomic_fetch_add(&f->errors, 1);
    pthread_mutex_lock(&f->kept_lock);
    if (f->nkept < KEPT_ERRORS)
        f->kept[f->nkept++] = strdup(msg);
    pthread_mutex_unlock(&f->kept_lock);
}

/* Puts it into the stream's queue; -1 (it released) when the stage is stopping. */
static int put(Stream *st, ShardItem *it)
{
    uint64_t bytes = it ? shard_item_bytes(it) : 0;
    int sample = it && it->kind == SHARD_ITEM_SAMPLE;
    if (sample) /* counted first: the consumer may count it before this thread goes on */
        atomic_fetch_add(&st->f->samples, 1);
    if (it && shard_queue_put(&st->q, &it, bytes) == 0)
        return 0;
    if (sample)
        atomic_fetch_sub(&st->f->samples, 1);
    shard_item_release(it);
    return -1;
}

/* Ends the stream with its marker: END, or ERROR with msg and code (NULL: END). */
static void put_last(Stream *st, const char *msg, int code)
{
    ShardItem *it = st->last;
    st->last = NULL;
    it->kind = msg ? SHARD_ITEM_ERROR : SHARD_ITEM_END;
    it->error = msg ? strdup(msg) : NULL; /* out of memory: "read error" */
    it->code = code;
    put(st, it);
}

/* A failure in fail mode ends the stream with an ERROR marker; in skip mode it is kept and
 * counted, with lost samples when known. Returns -1 to end the thread. */
static int failed(Stream *st, const char *msg, uint64_t lost, int code)
{
    ShardFetch *f = st->f;
    if (atomic_load(&f->stop))
        return -1; /* a read the stop cut short: no error of the data's */
    if (!f->s.skip_errors) {
        put_last(st, msg, code);
        return -1;
    }
    keep_error(f, msg);
    atomic_fetch_add(&f->skipped_shards, 1);
    if (lost != SHARD_COUNT_UNKNOWN)
        atomic_fetch_add(&f->skipped_samples, lost);
    return 0;
}

static void prefault(const ShardItem *it)
{
    unsigned acc = 0;
    for (size_t i = 0; i < it->v.nfields; i++)
        if (shard_item_is_view(it, i))
            for (uint64_t off = 0; off < it->v.fields[i].size; off += 4096)
                acc += ((const volatile unsigned char *)it->v.fields[i].data)[off];
    (void)acc;
}

/* Adds what reading the shard cost since *seen to the stage's counters. */
static void count_cost(ShardFetch *f, ShardFile *file, ShardReadCost *seen)
{
    ShardReadCost c;
    shard_file_cost(file, &c);
    shard_add_seconds(&f->read_s, c.read_seconds - seen->read_seconds);
    shard_add_seconds(&f->unpack_s, c.unpack_seconds - seen->unpack_seconds);
    atomic_fetch_add(&f->read_bytes, c.read_bytes - seen->read_bytes);
    atomic_fetch_add(&f->unpack_bytes, c.unpack_bytes - seen->unpack_bytes);
    *seen = c;
}

/* Frees the shard, its cost counted. */
static void close_shard(ShardFetch *f, ShardFile **file, ShardReadCost *seen)
{
    if (*file)
        count_cost(f, *file, seen);
    shard_file_free(file);
}

/* Each stream's share of the memory budget, halved: its queue holds at most that, and the
 * sample it is reading at most that again (0: no budget). At least a byte. */
static uint64_t stream_budget(const ShardFetchSettings *s)
{
    if (!s->memory_budget)
        return 0;
    uint64_t b = s->memory_budget / s->streams / 2;
    return b ? b : 1;
}

/* The largest sample a stream may read: the file's own limit, or less, its share of the
 * budget, so that the streams hold memory_budget at most whatever the samples weigh. */
static uint64_t sample_limit(const ShardFetchSettings *s)
{
    uint64_t b = stream_budget(s);
    return b && b < SHARD_DEFAULT_MAX_SAMPLE ? b : SHARD_DEFAULT_MAX_SAMPLE;
}

/* A shard's failure with the reader's own reason for a sample limit beside it. */
static const char *explain(ShardFetch *f, const char *msg, char *buf, size_t n)
{
    if (sample_limit(&f->s) == SHARD_DEFAULT_MAX_SAMPLE || !strstr(msg, "(max_sample_size)"))
        return msg;
    snprintf(buf, n, "%.800s; the reader's limit is memory_budget (%llu bytes) / (2 x %zu "
             "streams): raise memory_budget to read larger samples",
             msg, (unsigned long long)f->s.memory_budget, f->s.streams);
    return buf;
}

static int open_shard(Stream *st, const ShardListEntry *e, ShardFile **file, ShardError *err)
{
    ShardFetch *f = st->f;
    double t = shard_seconds(); /* opening is reading: a file's open, an index */
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.remote = f->s.remote;
    fs.map = f->s.map;
    fs.max_sample_size = sample_limit(&f->s);
    fs.index = e->index; /* one made at open for a shard without its own */
    int rc = shard_file_open_on(file, e->url, &fs, st->io, err);
    double spent = shard_seconds() - t;
    if (rc == 0) { /* what its source read and unpacked is counted with the file's cost */
        ShardReadCost c;
        shard_file_cost(*file, &c);
        spent -= c.read_seconds + c.unpack_seconds;
    }
    shard_add_seconds(&f->read_s, spent > 0 ? spent : 0);
    return rc;
}

/* The stream's next segment, opened ahead when it is a remote shard read from its start:
 * its request then goes out while this one is read, so per-request latency stays hidden
 * (a local shard gains nothing, and would only stay mapped longer). NULL when there is
 * none, or the open failed (it is opened again in turn, and reported). */
static ShardFile *open_ahead(Stream *st, size_t n)
{
    ShardFetch *f = st->f;
    ShardSegment next;
    ShardFile *file = NULL;
    ShardError err;
    const ShardListEntry *e;
    if (!f->s.view && /* a view reads by index: a stream from the start would be wasted */
        f->s.segment(f->s.cookie, st->id, n, &next) && next.first == 0 && next.count != 0 &&
        (shard_store_can((e = shard_list_entry(f->s.list, next.shard))->url) &
         SHARD_STORE_COSTLY) &&
        open_shard(st, e, &file, &err) == 0)
        shard_file_prefetch(file);
    return file;
}

/* A shard that did not open: the stream's error, a manifest copied away from its shards
 * named as such. Returns what failed does. */
static int open_failed(Stream *st, const ShardListEntry *entry, const ShardError *err,
                       uint64_t count)
{
    char msg[SHARD_ERROR_MAX];
    if (err->code == SHARD_ERR_NOT_FOUND && entry->info &&
        (~shard_store_can(entry->url) & (SHARD_STORE_PRIVATE | SHARD_STORE_BESIDE)) == 0) {
        snprintf(msg, sizeof msg, "%.700s (a manifest's shard names resolve against the "
                                  "manifest's own folder)", err->message);
        return failed(st, msg, count, err->code);
    }
    return failed(st, explain(st->f, err->message, msg, sizeof msg), count, err->code);
}

/* A shard whose index counts other than its manifest or count says. */
static int counts_differ(Stream *st, const ShardListEntry *entry, uint64_t indexed,
                         uint64_t count)
{
    char msg[SHARD_ERROR_MAX];
    shard_fail(msg, SHARD_ERR_FORMAT, "%s: its %s says %llu samples and its index %llu "
               "(one of them is out of date: 'shardcat verify' says which)", entry->url,
               entry->info ? "manifest" : "count", (unsigned long long)entry->nsamples,
               (unsigned long long)indexed);
    return failed(st, msg, count, SHARD_ERR_FORMAT);
}

enum { STOPPED = 1 }; /* put_sample: the stream stops */

/* Takes file's next sample into st's queue, marked as segment n's (seg). 0, STOPPED, or
 * the file's error (SHARD_EOS at its end). */
static int put_sample(Stream *st, const ShardSegment *seg, size_t n, ShardFile *file,
                      ShardReadCost *seen)
{
    ShardFetch *f = st->f;
    ShardItem *it;
    double t0 = f->trace ? shard_seconds() : 0;
    int rc = shard_file_take_pooled(file, f->pool, &it);
    if (rc)
        return rc;
    if (f->trace) /* its reading and decompressing inside: they interleave by the block */
        shard_trace_span(f->trace, "parse", t0, shard_seconds(), 1);
    it->shard = seg->shard;
    it->repeat = (seg->flags & SHARD_SEGMENT_REPEAT) != 0;
    it->round = seg->round;
    it->stream = (uint32_t)st->id;
    it->segno = n;
    double t = shard_seconds();
    prefault(it);
    shard_add_seconds(&f->read_s, shard_seconds() - t);
    count_cost(f, file, seen);
    return put(st, it) ? STOPPED : 0;
}

/* Reads one segment into the stream's queue (from *ahead when it was opened ahead, then
 * opening the segment after it ahead); a view's (keys), its shard's chosen samples, each
 * through the index. Returns 0 to go on, -1 to end the thread. */
static int fetch_segment(Stream *st, const ShardSegment *seg, size_t n, uint64_t skip,
                         ShardFile **ahead)
{
    ShardFetch *f = st->f;
    const ShardListEntry *entry = shard_list_entry(f->s.list, seg->shard);
    const char *url = entry->url;
    ShardFile *file = *ahead;
    ShardReadCost seen = {0};
    *ahead = NULL;
    if (seg->count != SHARD_COUNT_UNKNOWN && skip >= seg->count) {
        close_shard(f, &file, &seen);
        return 0;
    }
    uint64_t first = seg->first + skip;
    uint64_t count = seg->count == SHARD_COUNT_UNKNOWN ? SHARD_COUNT_UNKNOWN : seg->count - skip;
    atomic_fetch_add(&f->shards_opened, 1);
    ShardError err;
    if (!file && open_shard(st, entry, &file, &err))
        return open_failed(st, entry, &err, count);
    *ahead = open_ahead(st, n + 1);
    int rc = 0;
    /* Skip the samples before first: by index where there is one, else by reading. */
    int seeked = f->s.view || (first && shard_file_seek_in_order(file, first) == 0);
    int64_t indexed = seeked ? shard_file_count(file) : -1;
    if (f->s.view && indexed < 0) { /* the index the view was made from: why it is not */
        char msg[SHARD_ERROR_MAX], buf[SHARD_ERROR_MAX];
        const char *why = explain(f, shard_file_error(file), buf, sizeof buf);
        if (*why)
            snprintf(msg, sizeof msg, "%s", why);
        else
            shard_fail(msg, SHARD_ERR_FORMAT, "%s: no index to read its chosen samples by",
                       entry->url);
        close_shard(f, &file, &seen);
        return failed(st, msg, count, SHARD_ERR_FORMAT);
    }
    if (indexed >= 0 && entry->nsamples != SHARD_COUNT_UNKNOWN &&
        (uint64_t)indexed != entry->nsamples) { /* read by the index: the counts must agree */
        close_shard(f, &file, &seen);
        return counts_differ(st, entry, (uint64_t)indexed, count);
    }
    if (first && !seeked)
        for (uint64_t i = 0; i < first && rc == 0; i++) {
            const ShardSampleView *v;
            rc = shard_file_next(file, &v);
        }
    uint64_t got = 0, next = UINT64_MAX;
    while (rc == 0 && got < count && !atomic_load(&f->stop)) {
        uint64_t at = f->s.view ? shard_keyview_sample(f->s.view, seg->shard, first + got) : 0;
        if (f->s.view && at != next) { /* by index, sought where not consecutive: a run */
            if ((rc = shard_file_seek(file, at)))
                break;
            uint64_t j = got + 1;
            while (j < count && shard_keyview_sample(f->s.view, seg->shard, first + j) ==
                                    at + (j - got))
                j++;
            shard_file_run_to(file, at + (j - got) - 1);
        }
        next = at + 1;
        if ((rc = put_sample(st, seg, n, file, &seen)) == STOPPED) {
            close_shard(f, &file, &seen);
            return -1;
        }
        got += rc == 0;
    }
    /* Read through the tar to the count that says where it ends: the shard must end there
     * too, or the samples past the count would be lost without a word. */
    uint64_t known = shard_list_entry(f->s.list, seg->shard)->nsamples;
    if (rc == 0 && count != SHARD_COUNT_UNKNOWN && got == count && !seeked &&
        first + count == known && !atomic_load(&f->stop)) {
        const ShardSampleView *v;
        rc = shard_file_next(file, &v);
        if (rc == 0) {
            char msg[SHARD_ERROR_MAX];
            shard_fail(msg, SHARD_ERR_FORMAT,
                       "%s: offset %llu: sample '%s' is past the end the count says: the shard "
                       "has more than %llu samples (the manifest or index is out of date)",
                       url, (unsigned long long)v->offset, v->key, (unsigned long long)known);
            close_shard(f, &file, &seen);
            return failed(st, msg, 0, SHARD_ERR_FORMAT);
        }
        if (rc == SHARD_EOS)
            rc = 0;
    }
    int out = 0;
    if (rc == SHARD_EOS && count != SHARD_COUNT_UNKNOWN && got < count) {
        char msg[SHARD_ERROR_MAX];
        shard_fail(msg, SHARD_ERR_FORMAT,
                   "%s: offset %lld: the shard ends after %llu samples, %llu were expected "
                   "(truncated, or the manifest or index is out of date)",
                   url, (long long)shard_file_size(file), (unsigned long long)(first + got),
                   (unsigned long long)(first + count));
        out = failed(st, msg, count - got, SHARD_ERR_FORMAT);
    } else if (rc && rc != SHARD_EOS) {
        char msg[SHARD_ERROR_MAX];
        out = failed(st, explain(f, shard_file_error(file), msg, sizeof msg),
                     count == SHARD_COUNT_UNKNOWN ? count : count - got, SHARD_ERR_FORMAT);
    }
    close_shard(f, &file, &seen);
    return out;
}

static void *fetch_main(void *arg)
{
    pthread_setname_np(pthread_self(), "shard-fetch"); /* for top -H, perf and gdb */
    Stream *st = arg;
    ShardFetch *f = st->f;
    pthread_mutex_lock(&f->alive_lock);
    st->started = shard_seconds();
    pthread_mutex_unlock(&f->alive_lock);
    ShardSourceThread *io = shard_source_thread_new(); /* out of memory: the network thread */
    pthread_mutex_lock(&f->alive_lock); /* shard_fetch_stop aborts it */
    st->io = io;
    pthread_mutex_unlock(&f->alive_lock);
    ShardSegment seg;
    uint64_t skip = st->skip;
    ShardFile *ahead = NULL;
    int ended = 0; /* by an error the stream's last item reports, or a stop */
    for (size_t n = st->first; !atomic_load(&f->stop) && f->s.segment(f->s.cookie, st->id, n, &seg);
         n++) {
        double t0 = f->trace ? shard_seconds() : 0;
        uint64_t before = atomic_load(&f->samples);
        ended = fetch_segment(st, &seg, n, skip, &ahead);
        if (f->trace) /* samples: all streams' in that time, near enough for a span */
            shard_trace_span(f->trace, "fetch", t0, shard_seconds(),
                             atomic_load(&f->samples) - before);
        if (ended)
            break;
        skip = 0;
    }
    shard_file_free(&ahead);
    pthread_mutex_lock(&f->alive_lock);
    shard_source_thread_free(&st->io);
    pthread_mutex_unlock(&f->alive_lock);
    if (!ended && !atomic_load(&f->stop))
        put_last(st, NULL, 0);
    pthread_mutex_lock(&f->alive_lock);
    f->alive += shard_seconds() - st->started;
    st->started = 0;
    pthread_mutex_unlock(&f->alive_lock);
    return NULL;
}

int shard_fetch_new(ShardFetch **out, const ShardFetchSettings *s)
{
    *out = NULL;
    ShardFetch *f = calloc(1, sizeof *f);
    if (!f)
        return SHARD_ERR_NOMEM;
    f->s = *s;
    pthread_mutex_init(&f->kept_lock, NULL);
    pthread_mutex_init(&f->alive_lock, NULL);
    f->streams = calloc(s->streams, sizeof *f->streams);
    size_t blocks = s->queue_depth < POOL_BLOCKS_MAX ? s->queue_depth : POOL_BLOCKS_MAX;
    blocks *= POOL_BLOCKS_PER_SAMPLE * s->streams;
    uint64_t bytes = s->memory_budget ? s->memory_budget : POOL_BYTES;
    f->pool = shard_block_pool_new(blocks < POOL_BLOCKS_MAX ? blocks : POOL_BLOCKS_MAX,
                                   bytes < SIZE_MAX ? (size_t)bytes : SIZE_MAX);
    if (!f->streams || !f->pool) {
        shard_fetch_free(&f);
        return SHARD_ERR_NOMEM;
    }
    for (size_t k = 0; k < s->streams; k++) {
        f->streams[k].f = f;
        f->streams[k].id = k;
        if (shard_queue_init(&f->streams[k].q, s->queue_depth, sizeof(ShardItem *))) {
            shard_fetch_free(&f);
            return SHARD_ERR_NOMEM;
        }
        f->nqueues++;
        /* a stream refills its queue in bursts: one wake per burst, not one per sample
         * taken (while the consumer waits on another stream's turn, the others are full) */
        shard_queue_set_wake(&f->streams[k].q, s->queue_depth / 2);
        if (shard_queue_set_byte_cap(&f->streams[k].q, stream_budget(s))) {
            shard_fetch_free(&f);
            return SHARD_ERR_NOMEM;
        }
    }
    *out = f;
    return 0;
}

int shard_fetch_start(ShardFetch *f, size_t k, size_t first, uint64_t skip)
{
    Stream *st = &f->streams[k];
    st->first = first;
    st->skip = skip;
    if (!(st->last = shard_item_marker(SHARD_ITEM_END, NULL)))
        return SHARD_ERR_NOMEM;
    int rc = shard_thread_start(&st->thread, fetch_main, st);
    if (rc) {
        shard_item_release(st->last);
        st->last = NULL;
        return SHARD_ERR_NOMEM;
    }
    st->running = 1;
    return 0;
}

void shard_fetch_interrupt(ShardFetch *f)
{
    atomic_store(&f->stop, 1);
    /* threads waiting on the network, a backoff or a command's output stop waiting */
    pthread_mutex_lock(&f->alive_lock);
    for (size_t k = 0; k < f->nqueues; k++)
        if (f->streams[k].io)
            shard_source_thread_abort(f->streams[k].io);
    pthread_mutex_unlock(&f->alive_lock);
    for (size_t k = 0; k < f->nqueues; k++)
        shard_queue_close(&f->streams[k].q);
}

void shard_fetch_stop(ShardFetch *f)
{
    shard_fetch_interrupt(f);
    for (size_t k = 0; k < f->nqueues; k++) {
        Stream *st = &f->streams[k];
        if (st->running)
            pthread_join(st->thread, NULL);
        st->running = 0;
        shard_item_release(st->last); /* a thread stopped before its end */
        st->last = NULL;
        ShardItem *it;
        while (shard_queue_try_take(&st->q, &it) == 0)
            shard_item_release(it);
        shard_queue_reopen(&st->q);
    }
    atomic_store(&f->stop, 0);
}

void shard_fetch_set_trace(ShardFetch *f, struct ShardTrace *trace) { f->trace = trace; }

int shard_fetch_take_for(ShardFetch *f, size_t k, double seconds, ShardItem **out)
{
    *out = NULL;
    return shard_queue_take_for(&f->streams[k].q, out, seconds);
}

void shard_fetch_counters(ShardFetch *f, ShardFetchCounters *c)
{
    c->shards_opened = atomic_load(&f->shards_opened);
    c->skipped_shards = atomic_load(&f->skipped_shards);
    c->skipped_samples = atomic_load(&f->skipped_samples);
    c->errors = atomic_load(&f->errors);
    c->take_wait = c->put_wait = 0;
    c->items = c->bytes = 0;
    c->fill = c->capacity = 0;
    c->threads = f->s.streams;
    c->items = atomic_load(&f->samples);
    c->read = atomic_load(&f->read_s);
    c->unpack = atomic_load(&f->unpack_s);
    c->read_bytes = atomic_load(&f->read_bytes);
    c->unpack_bytes = atomic_load(&f->unpack_bytes);
    for (size_t k = 0; k < f->nqueues; k++) {
        ShardQueueStats st;
        shard_queue_stats(&f->streams[k].q, &st);
        c->take_wait += st.take_wait;
        c->put_wait += st.put_wait;

        c->bytes += st.bytes;
        c->fill += st.fill;
        c->capacity += st.capacity;
    }
    pthread_mutex_lock(&f->alive_lock);
    double now = shard_seconds();
    c->alive = f->alive;
    for (size_t k = 0; k < f->nqueues; k++)
        if (f->streams[k].started > 0)
            c->alive += now - f->streams[k].started;
    pthread_mutex_unlock(&f->alive_lock);
}

void shard_fetch_keep_error(ShardFetch *f, const char *msg) { keep_error(f, msg); }

uint64_t shard_fetch_skipped_shards(ShardFetch *f) { return atomic_load(&f->skipped_shards); }

const char *shard_fetch_kept_error(ShardFetch *f, size_t i)
{
    pthread_mutex_lock(&f->kept_lock);
    const char *e = i < f->nkept ? f->kept[i] : NULL;
    pthread_mutex_unlock(&f->kept_lock);
    return e;
}

void shard_fetch_free(ShardFetch **pf)
{
    if (!pf || !*pf)
        return;
    ShardFetch *f = *pf;
    if (f->streams) {
        shard_fetch_stop(f);
        for (size_t k = 0; k < f->nqueues; k++)
            shard_queue_destroy(&f->streams[k].q);
        free(f->streams);
    }
    for (size_t i = 0; i < f->nkept; i++)
        free(f->kept[i]);
    shard_block_pool_unref(f->pool); /* samples still out keep it */
    pthread_mutex_destroy(&f->kept_lock);
    pthread_mutex_destroy(&f->alive_lock);
    free(f);
    *pf = NULL;
}
