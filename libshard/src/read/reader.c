/*
 * The streaming reader (shard/reader.h): the shard list (list.c), the epoch plan (plan.c),
 * the fetch stage (fetch.c), round-robin interleaving, the shuffle buffer (shuffle.c),
 * epochs and resume.
 *
 * DESIGN
 * - Plan: shard_epoch_plan gives this consumer's segments for the epoch (resampled mode
 *   draws shards instead). A mix (mix.c) gives segments per source, each source read by
 *   streams of its own, and says which source each of the consumer's samples comes from;
 *   the round-robin then runs over that source's streams. Segments are dealt to S streams statically: stream k reads
 *   segments k, k+S, k+2S, ... in order. The consumer takes one sample from each stream
 *   in turn (round-robin over streams that still have samples), then passes them through
 *   the shuffle buffer. Which stream yields next, and which buffer slot is drawn, depend
 *   only on the plan, the sample counts and the seeded generator, never on timing.
 * - Threads: the fetch stage's, one per stream, started at the epoch's first pull (after
 *   any restore) and stopped when the epoch is left. Everything else, including the
 *   shuffle buffer, runs on the thread that calls shard_reader_next; samples cross threads
 *   only through the fetch stage's queues.
 * - Samples from local uncompressed tars are views into the shard's mapping, holding the
 *   shard's source open; other samples are copied once into a block of their own.
 * - Resume: with every count known, restoring position P replays the round-robin and the
 *   buffer on sample identities alone (shard, sample number) for P steps, then reads the
 *   buffered samples by index and starts each stream where the replay left it. Without
 *   counts it replays by reading (and dropping) P samples.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/rng.h"
#include "read/fetch.h"
#include "read/mix.h"
#include "read/shuffle.h"
#include "shard/reader.h"
#include "tar/item.h"

typedef struct Stream {
    size_t start_seg;  /* where its fetch thread starts: its n-th segment, */
    uint64_t start_off; /* at this many samples in */
    size_t sim_seg;    /* replay bookkeeping (identities): next segment, offset in it */
    uint64_t sim_off;
    int active;        /* it has samples left this epoch */
    ShardHold *last;   /* the storage its last sample came from (held) */
} Stream;

struct ShardReader {
    ShardReaderSettings s;
    ShardList *list;
    uint64_t *counts; /* samples per shard, SHARD_COUNT_UNKNOWN where not known */
    size_t nurls;
    double list_started, list_seconds; /* open_list: when, and how long */
    char err[SHARD_ERROR_MAX];
    int failed;

    uint64_t epoch;
    uint64_t position;
    ShardSegment *segs;
    size_t nsegs;
    ShardRemote *own_remote; /* made when the settings named none */
    int counts_known; /* every segment's count is known */
    int64_t epoch_length;

    ShardMix mix; /* several sources, or epoch_samples outside resampled mode */
    int mixing;

    Stream *streams; /* per source (one unless mixing), per streams of it */
    size_t nstreams;
    size_t per;      /* streams per source */
    size_t *rr;      /* per source: the stream whose turn it is */
    ShardFetch *fetch;
    ShardShuffle shuffle;
    ShardItem *last; /* handed out by shard_reader_next, released at the next call */
    int start_due;   /* the fetch threads start at the first pull: a restore or set_epoch
                        right after open or an epoch change reads nothing it drops */
    atomic_ullong samples, bytes; /* read by other threads' statistics (loader.c) */
};

/* ---- the epoch's segments -------------------------------------------------------------- */

static uint64_t consumer_id(const ShardReader *r)
{
    return (uint64_t)r->s.rank * (uint64_t)r->s.num_workers + (uint64_t)r->s.worker;
}

/* Segment n of stream k, or 0 past its last. Resampled epochs draw them. Called on the
 * fetch threads too: it only reads what plan_epoch set while they were stopped. */
static int stream_segment(void *cookie, size_t k, size_t n, ShardSegment *out)
{
    ShardReader *r = cookie;
    if (r->s.mode == SHARD_MODE_RESAMPLED) {
        if (!r->nurls)
            return 0;
        /* Draw n of stream k: a generator per (epoch, consumer, stream, n) keeps it O(1). */
        ShardRng g;
        shard_rng_init(&g, r->s.seed, SHARD_RNG_RESAMPLE, r->epoch, consumer_id(r),
                       ((uint64_t)k << 40) ^ n);
        out->shard = (uint32_t)shard_rng_below(&g, r->nurls);
        out->flags = 0;
        out->first = 0;
        out->count = r->counts[out->shard];
        return 1;
    }
    const ShardSegment *segs = r->segs;
    size_t nsegs = r->nsegs;
    if (r->mixing) {
        segs = r->mix.src[k / r->per].segs.v;
        nsegs = r->mix.src[k / r->per].segs.n;
        k %= r->per;
    }
    size_t i = k + n * r->per;
    if (i >= nsegs)
        return 0;
    *out = segs[i];
    return 1;
}

static int start_threads(ShardReader *r)
{
    for (size_t k = 0; k < r->nstreams; k++) {
        Stream *st = &r->streams[k];
        if (st->active && shard_fetch_start(r->fetch, k, st->start_seg, st->start_off))
            return shard_fail(r->err, SHARD_ERR_NOMEM, "reader: cannot start a fetch thread");
    }
    return 0;
}

static void clear_buffer(ShardReader *r)
{
    shard_shuffle_clear(&r->shuffle);
    for (size_t k = 0; r->streams && k < r->nstreams; k++) {
        shard_hold_put(r->streams[k].last);
        r->streams[k].last = NULL;
    }
    shard_item_release(r->last);
    r->last = NULL;
}

/* Plans epoch e and resets every stream to its start (threads not started). */
static int plan_epoch(ShardReader *r, uint64_t e)
{
    shard_fetch_stop(r->fetch);
    r->start_due = 0; /* the caller says when the new plan may start */
    clear_buffer(r);
    free(r->segs);
    r->segs = NULL;
    r->nsegs = 0;
    r->epoch = e;
    r->position = 0;
    memset(r->rr, 0, (r->mixing ? r->mix.n : 1) * sizeof *r->rr);
    ShardRng rng;
    shard_rng_init(&rng, r->s.seed, SHARD_RNG_BUFFER, e, consumer_id(r), 0);
    shard_shuffle_reset(&r->shuffle, &rng);
    ShardPlanSettings p;
    shard_plan_default_settings(&p);
    p.seed = r->s.seed;
    p.epoch = e;
    p.rank = r->s.rank;
    p.world_size = r->s.world_size;
    p.worker = r->s.worker;
    p.num_workers = r->s.num_workers;
    p.mode = r->s.mode;
    p.pad = r->s.pad;
    p.shuffle_shards = r->s.shuffle_shards;
    p.worker_align = r->s.worker_align;
    if (r->mixing) {
        int rc = shard_mix_plan(&r->mix, r->counts, &p);
        if (rc)
            return shard_fail(r->err, rc, "reader: cannot plan the epoch's mix");
    } else if (r->s.mode != SHARD_MODE_RESAMPLED) {
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
    } else if (r->mixing) {
        r->epoch_length = (int64_t)(r->mix.end - r->mix.pos);
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

/* Source src's stream whose turn it is in the round-robin (the next one still active from
 * its rr); NULL when all of them have ended. The data path and the replay share this order. */
static Stream *current_stream(ShardReader *r, size_t src)
{
    Stream *first = &r->streams[src * r->per];
    for (size_t tries = 0; tries < r->per; tries++) {
        if (first[r->rr[src]].active)
            return &first[r->rr[src]];
        r->rr[src] = (r->rr[src] + 1) % r->per;
    }
    return NULL;
}

/* The source of the next sample (always 0 unless mixing); -1 at the end of a mix. */
static int next_source(ShardReader *r) { return r->mixing ? shard_mix_next(&r->mix) : 0; }

/* The next item of source src in round-robin order over its streams; NULL when they
 * have all ended. */
static ShardItem *pull_from(ShardReader *r, size_t src, int *rc)
{
    Stream *st;
    while ((st = current_stream(r, src))) {
        ShardItem *it = shard_fetch_take(r->fetch, (size_t)(st - r->streams));
        if (!it) { /* only while stopping, which this thread does: never here */
            *rc = shard_fail(r->err, SHARD_ERR_STATE, "reader: the fetch stage stopped");
            return NULL;
        }
        if (it->kind == SHARD_ITEM_END) {
            shard_item_release(it);
            shard_shuffle_moved_on(&r->shuffle, &st->last, NULL);
            st->active = 0;
            r->rr[src] = (r->rr[src] + 1) % r->per;
            continue;
        }
        if (it->kind == SHARD_ITEM_ERROR) {
            *rc = shard_fail(r->err, SHARD_ERR_FORMAT, "%s", it->error ? it->error : "read error");
            shard_item_release(it);
            return NULL;
        }
        if (r->s.shuffle_buffer)
            shard_shuffle_moved_on(&r->shuffle, &st->last, it->hold);
        r->rr[src] = (r->rr[src] + 1) % r->per;
        return it;
    }
    return NULL;
}

/* The next item of the epoch before the shuffle buffer; NULL at its end. */
static ShardItem *pull(void *cookie, int *rc)
{
    ShardReader *r = cookie;
    *rc = 0;
    if (r->start_due) {
        r->start_due = 0;
        if ((*rc = start_threads(r)))
            return NULL;
    }
    int src;
    while ((src = next_source(r)) >= 0) {
        ShardItem *it = pull_from(r, (size_t)src, rc);
        /* A mixed source that ended early (skipped after an error) gives up its place. */
        if (it || *rc || !r->mixing)
            return it;
    }
    return NULL;
}

/* pull_from for the replay: the identity of source src's next sample. */
static ShardItem *pull_sim_from(ShardReader *r, size_t src, int *rc)
{
    Stream *st;
    while ((st = current_stream(r, src))) {
        size_t k = (size_t)(st - r->streams);
        ShardSegment seg;
        int ok = stream_segment(r, k, st->sim_seg, &seg);
        while (ok && st->sim_off >= seg.count) {
            st->sim_seg++;
            st->sim_off = 0;
            ok = stream_segment(r, k, st->sim_seg, &seg);
        }
        if (!ok) { /* the stream's END */
            st->active = 0;
            r->rr[src] = (r->rr[src] + 1) % r->per;
            continue;
        }
        ShardItem *it = shard_item_identity(seg.shard, seg.first + st->sim_off);
        if (it)
            it->repeat = (seg.flags & SHARD_SEGMENT_REPEAT) != 0;
        if (!it) {
            *rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
            return NULL;
        }
        st->sim_off++;
        r->rr[src] = (r->rr[src] + 1) % r->per;
        return it;
    }
    return NULL;
}

/* The identity of the next sample of the round-robin, advancing the replay state. */
static ShardItem *pull_sim(void *cookie, int *rc)
{
    ShardReader *r = cookie;
    *rc = 0;
    int src;
    while ((src = next_source(r)) >= 0) {
        ShardItem *it = pull_sim_from(r, (size_t)src, rc);
        if (it || *rc || !r->mixing)
            return it;
    }
    return NULL;
}

/* The next sample of the epoch through the shuffle buffer; NULL at its end. */
static ShardItem *step(ShardReader *r, ShardPullFn pullf, int *rc)
{
    *rc = 0;
    if (r->s.mode == SHARD_MODE_RESAMPLED && r->s.epoch_samples && r->position >= r->s.epoch_samples)
        return NULL;
    return shard_shuffle_step(&r->shuffle, pullf, r, rc);
}

int shard_reader_take(ShardReader *r, ShardItem **out)
{
    *out = NULL;
    shard_item_release(r->last);
    r->last = NULL;
    if (r->failed)
        return r->failed;
    int rc;
    ShardItem *it = step(r, pull, &rc);
    if (rc) {
        r->failed = rc;
        return rc;
    }
    if (!it)
        return SHARD_EOS;
    it->position = r->position++;
    uint64_t bytes = 0;
    for (size_t i = 0; i < it->v.nfields; i++)
        bytes += it->v.fields[i].size;
    atomic_fetch_add_explicit(&r->samples, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->bytes, bytes, memory_order_relaxed);
    *out = it;
    return 0;
}

int shard_reader_next(ShardReader *r, const char **key, const char **url,
                      const ShardFieldView **fields, size_t *nfields)
{
    ShardItem *it;
    int rc = shard_reader_take(r, &it);
    if (rc)
        return rc;
    r->last = it;
    *key = it->v.key;
    *url = shard_list_entry(r->list, it->shard)->url;
    *fields = it->v.fields;
    *nfields = it->v.nfields;
    return 0;
}

/* ---- resume ---------------------------------------------------------------------------- */

static int restore_to(ShardReader *r, uint64_t epoch, uint64_t position)
{
    int rc = plan_epoch(r, epoch);
    if (rc)
        return rc;
    if (!r->counts_known || r->s.skip_errors) {
        /* No counts to replay on, or errors may have changed them: read and drop, which
         * meets the same errors at the same places. */
        r->start_due = 1;
        for (uint64_t i = 0; i < position; i++) {
            ShardItem *it;
            rc = shard_reader_take(r, &it);
            if (rc == SHARD_EOS)
                return shard_fail(r->err, SHARD_ERR_INVALID,
                                  "reader: the state's position %llu is past the epoch's end",
                                  (unsigned long long)position);
            if (rc)
                return rc;
            shard_item_release(it);
        }
        atomic_fetch_sub(&r->samples, position);
        return 0;
    }
    for (uint64_t i = 0; i < position; i++) {
        ShardItem *it = step(r, pull_sim, &rc);
        if (rc)
            return rc;
        if (!it)
            return shard_fail(r->err, SHARD_ERR_INVALID,
                              "reader: the state's position %llu is past the epoch's end (%llu)",
                              (unsigned long long)position, (unsigned long long)i);
        shard_item_release(it);
        r->position++;
    }
    /* Each stream starts where the replay left it. */
    for (size_t k = 0; k < r->nstreams; k++) {
        Stream *st = &r->streams[k];
        st->start_seg = st->sim_seg;
        st->start_off = st->sim_off;
    }
    if ((rc = shard_shuffle_load(&r->shuffle, r->list, r->s.remote, r->err)))
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
    s->memory_budget = (size_t)256 << 20;
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

/* Expands the shard list (every source's specs in one list, in order) and sets up the mix
 * when there is one. */
static int open_list(ShardReader *r, const ShardReaderSettings *s)
{
    const char *const *specs = s->urls;
    size_t nspecs = s->nurls;
    const char **flat = NULL;
    size_t *last_spec = NULL; /* per source: one past its last spec */
    if (s->nsources) {
        if (s->nurls)
            return shard_fail(r->err, SHARD_ERR_INVALID,
                              "reader: give either urls or sources, not both");
        if (s->mode == SHARD_MODE_RESAMPLED)
            return shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                              "reader: mixing sources needs exact or equal mode (a mix already "
                              "repeats a small source as often as its weight asks)");
        nspecs = 0;
        for (size_t i = 0; i < s->nsources; i++)
            nspecs += s->sources[i].nurls;
        flat = malloc((nspecs ? nspecs : 1) * sizeof *flat);
        last_spec = malloc(s->nsources * sizeof *last_spec);
        if (!flat || !last_spec) {
            free(flat);
            free(last_spec);
            return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
        }
        nspecs = 0;
        for (size_t i = 0; i < s->nsources; i++) {
            for (size_t k = 0; k < s->sources[i].nurls; k++)
                flat[nspecs++] = s->sources[i].urls[k];
            last_spec[i] = nspecs;
        }
        specs = flat;
    }
    ShardListSettings ls;
    shard_list_default_settings(&ls);
    ls.remote = r->s.remote;
    ls.manifest_commands = s->manifest_commands;
    ShardError e;
    int rc = 0;
    if (shard_list_expand(&r->list, specs, nspecs, &ls, &e))
        rc = shard_fail(r->err, e.code, "%s", e.message);
    r->nurls = rc ? 0 : shard_list_count(r->list);
    if (!rc && !r->nurls)
        rc = shard_fail(r->err, SHARD_ERR_INVALID, "reader: no shards given");
    if (!rc && !(r->counts = malloc(r->nurls * sizeof *r->counts)))
        rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < r->nurls; i++)
        r->counts[i] = shard_list_entry(r->list, i)->nsamples;
    r->mixing = s->nsources > 1 || (s->epoch_samples && s->mode != SHARD_MODE_RESAMPLED);
    for (size_t i = 0; !rc && r->mixing && i < r->nurls; i++)
        if (r->counts[i] == SHARD_COUNT_UNKNOWN)
            rc = shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                            "reader: %s needs the sample count of every shard, and %s has none "
                            "(it is in no manifest and has no readable .idx beside it)",
                            s->nsources > 1 ? "mixing sources" : "epoch_samples outside resampled mode",
                            shard_list_entry(r->list, i)->url);
    if (!rc && r->mixing) {
        size_t n = s->nsources ? s->nsources : 1;
        if (shard_mix_init(&r->mix, n))
            rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
        /* The list keeps the specs' order, so each source's shards are a run of it. */
        for (size_t i = 0, at = 0; !rc && i < n; i++) {
            ShardMixSource *src = &r->mix.src[i];
            src->lo = (uint32_t)at;
            src->weight = s->nsources ? s->sources[i].weight : 1.0;
            while (at < r->nurls &&
                   (!s->nsources || shard_list_entry(r->list, at)->spec < last_spec[i]))
                at++;
            src->n = (uint32_t)(at - src->lo);
            if (!src->n)
                rc = shard_fail(r->err, SHARD_ERR_INVALID, "reader: source %zu names no shards",
                                i);
        }
        uint64_t consumers = (uint64_t)r->s.world_size * (uint64_t)r->s.num_workers;
        if (!rc && s->epoch_samples > UINT64_MAX / consumers)
            rc = shard_fail(r->err, SHARD_ERR_INVALID, "reader: epoch_samples is too large");
        if (!rc)
            rc = shard_mix_size(&r->mix, r->counts, s->epoch_samples * consumers, r->err);
    }
    free(flat);
    free(last_spec);
    return rc;
}

static int fail_open(ShardReader *r, ShardError *err, int rc)
{
    shard_report(err, rc, r->err);
    shard_reader_free(&r);
    return rc;
}

/* Each stream's share of the memory budget: at least a byte, so a budget is never none. */
static uint64_t stream_budget(const ShardReaderSettings *s, size_t streams)
{
    if (!s->memory_budget)
        return 0;
    uint64_t b = s->memory_budget / (streams ? streams : 1);
    return b ? b : 1;
}

int shard_reader_open(ShardReader **out, const ShardReaderSettings *s, ShardError *err)
{
    *out = NULL;
    ShardReader *r = calloc(1, sizeof *r);
    if (!r)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    r->s = *s;
    r->s.urls = NULL;
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
    ShardError e;
    if (!r->s.remote) {
        if (shard_remote_new(&r->own_remote, NULL, &e))
            return fail_open(r, err, shard_fail(r->err, e.code, "%s", e.message));
        r->s.remote = r->own_remote;
    }
    r->list_started = shard_seconds();
    int rc = open_list(r, s);
    r->list_seconds = shard_seconds() - r->list_started;
    if (rc)
        return fail_open(r, err, rc);
    r->per = r->s.streams;
    r->nstreams = r->per * (r->mixing ? r->mix.n : 1);
    r->streams = calloc(r->nstreams, sizeof *r->streams);
    r->rr = calloc(r->mixing ? r->mix.n : 1, sizeof *r->rr);
    ShardFetchSettings fs = {r->list, r->nstreams, r->s.queue_depth, r->s.skip_errors,
                             stream_segment, r, r->s.remote, r->s.map_files,
                             stream_budget(&r->s, r->nstreams)};
    if (!r->streams || !r->rr || shard_fetch_new(&r->fetch, &fs) ||
        shard_shuffle_init(&r->shuffle, r->s.shuffle_buffer, r->s.shuffle_initial, r->nstreams))
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory"));
    rc = plan_epoch(r, r->s.epoch);
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

void shard_reader_set_trace(ShardReader *r, struct ShardTrace *trace)
{
    shard_fetch_set_trace(r->fetch, trace);
}

void shard_reader_list_time(const ShardReader *r, double *start, double *seconds)
{
    *start = r->list_started;
    *seconds = r->list_seconds;
}

void shard_reader_fetch_counters(const ShardReader *r, ShardFetchCounters *c)
{
    shard_fetch_counters(r->fetch, c);
}

void shard_reader_stats(const ShardReader *r, ShardReaderStats *st)
{
    ShardFetchCounters c;
    shard_fetch_counters(r->fetch, &c);
    st->samples = atomic_load(&((ShardReader *)r)->samples);
    st->bytes = atomic_load(&((ShardReader *)r)->bytes);
    st->shards_opened = c.shards_opened;
    st->wait_seconds = c.take_wait;
    st->skipped_shards = c.skipped_shards;
    st->skipped_samples = c.skipped_samples;
    st->errors = c.errors;
    st->list_seconds = r->list_seconds;
    st->shards = r->nurls;
    st->read_seconds = c.read;
    st->decompress_seconds = c.unpack;
    double parse = c.alive - c.put_wait - c.read - c.unpack;
    st->parse_seconds = parse > 0 ? parse : 0;
    st->read_bytes = c.read_bytes;
    st->decompressed_bytes = c.unpack_bytes;
}

const char *shard_reader_kept_error(const ShardReader *r, size_t i)
{
    return shard_fetch_kept_error(r->fetch, i);
}

const char *shard_reader_error(const ShardReader *r) { return r->err; }

const ShardList *shard_reader_list(const ShardReader *r) { return r->list; }

ShardRemote *shard_reader_remote(const ShardReader *r) { return r->s.remote; }

void shard_reader_free(ShardReader **pr)
{
    if (!pr || !*pr)
        return;
    ShardReader *r = *pr;
    shard_fetch_free(&r->fetch); /* stops the threads first */
    clear_buffer(r);
    shard_shuffle_free(&r->shuffle);
    free(r->streams);
    free(r->rr);
    shard_mix_free(&r->mix);
    free(r->segs);
    free(r->counts);
    shard_list_free(&r->list);
    shard_remote_free(&r->own_remote);
    free(r);
    *pr = NULL;
}
