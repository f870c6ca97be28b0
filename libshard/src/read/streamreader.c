/*
 * The streaming reader's handle (streamreader.h, shard/reader.h): opening (the shard list, a mix,
 * the fetch stage, the shuffle buffer), epochs and states, statistics, freeing. An epoch's
 * order is epoch.c's; a restore is restore.c's.
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
#include "read/bucketline.h"
#include "read/epoch.h"
#include "read/fetch.h"
#include "read/mix.h"
#include "resume/resume.h"
#include "read/streamreader.h"
#include "catalog/keyview.h"
#include "catalog/samplenames.h"
#include "read/readerdef.h"
#include "read/restore.h"
#include "read/shuffle.h"
#include "read/state.h"
#include "read/steps.h"
#include "shard/reader.h"
#include "tar/item.h"

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
    s->batch_size = 1;
    s->drop_last = 0;
    s->aspect_buckets = NULL;
    s->aspect_side = 256;
    s->partitions = 0;
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
/* The indexes the list makes (ShardListSettings.build_indexes) for what s reads. */
static int indexes_to_make(const ShardReaderSettings *s)
{
    int needs_counts = s->order_only || s->nsources > 1 || s->mode == SHARD_MODE_EQUAL ||
                       s->aspect_buckets || s->keys ||
                       (s->epoch_samples && s->mode != SHARD_MODE_RESAMPLED);
    if (s->keys && s->make_indexes != SHARD_READER_INDEXES_NEVER)
        return SHARD_INDEXES_FOR_SEEKING; /* a view: every shard's names, read by index */
    if (s->make_indexes == SHARD_READER_INDEXES_ALWAYS ||
        (s->make_indexes == SHARD_READER_INDEXES_AUTO && needs_counts))
        return SHARD_INDEXES_FOR_COUNTS;
    if (s->make_indexes == SHARD_READER_INDEXES_AUTO && s->mode != SHARD_MODE_RESAMPLED)
        return SHARD_INDEXES_WHERE_CHEAP; /* counts let a state move anywhere */
    return 0;
}

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
    ls.manifest_local = s->manifest_local;
    ls.columns = s->aspect_buckets != NULL;
    ls.build_indexes = indexes_to_make(s);
    ls.index_cache = s->index_cache;
    ls.threads = (unsigned)r->s.streams;
    ls.progress = 1;
    ShardError e;
    int rc = 0;
    if (shard_list_expand(&r->list, specs, nspecs, &ls, &e))
        rc = shard_fail(r->err, e.code, "%s", e.message);
    r->nurls = rc ? 0 : shard_list_count(r->list);
    if (!rc && !r->nurls)
        rc = shard_fail(r->err, SHARD_ERR_INVALID, "reader: no shards given");
    if (!rc && !(r->counts = malloc(r->nurls * sizeof *r->counts)))
        rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    if (!rc && s->keys)
        rc = shard_keyview_new(&r->view, r->list, s->keys, r->s.remote, r->err);
    for (size_t i = 0; !rc && i < r->nurls; i++)
        r->counts[i] = r->view ? shard_keyview_count(r->view, i)
                               : shard_list_entry(r->list, i)->nsamples;
    r->mixing = s->nsources > 1 || (s->epoch_samples && s->mode != SHARD_MODE_RESAMPLED);
    for (size_t i = 0; !rc && r->mixing && i < r->nurls; i++)
        if (r->counts[i] == SHARD_COUNT_UNKNOWN)
            rc = shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                            "reader: %s needs the sample count of every shard, and %s has none "
                            "(it is in no manifest and has no readable .idx beside it, and "
                            "make_indexes is 'never')",
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
        r->mix_own_total = r->mix.total;
    }
    free(flat);
    free(last_spec);
    return rc;
}

/* The aspect buckets' plan and reading, and their fingerprint for states. */
static int open_buckets(ShardReader *r, const ShardReaderSettings *s)
{
    int rc = shard_bucketplan_new(&r->bucket_plan, r, s,
                                  &(ShardReplayOps){shard_reader_open, shard_reader_free});
    if (!rc)
        rc = shard_bucketline_new(&r->bucketed, r, r->bucket_plan);
    if (!rc && shard_reader_fingerprint_buckets(r))
        rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    return rc;
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
    int rank_env = r->s.rank < 0, world_env = r->s.world_size < 0;
    if (rank_env)
        r->s.rank = env_int("RANK", 0);
    if (world_env)
        r->s.world_size = env_int("WORLD_SIZE", 1);
    if ((rank_env && r->s.rank == -2) || (world_env && r->s.world_size == -2)) {
        const char *name = rank_env && r->s.rank == -2 ? "RANK" : "WORLD_SIZE";
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_INVALID,
                                            "reader: $%s='%.40s' is not a whole number (or set "
                                            "the rank and world size)",
                                            name, getenv(name)));
    }
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
    if (r->s.order_only && r->s.mode == SHARD_MODE_RESAMPLED)
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                                            "reader: order_only names an epoch's order, and "
                                            "resampled mode draws shards without one"));
    if (r->s.keys && (r->s.mode == SHARD_MODE_RESAMPLED || r->s.aspect_buckets)) {
        const char *with = r->s.mode == SHARD_MODE_RESAMPLED ? "resampled mode"
                                                            : "aspect_buckets";
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                                            "reader: keys (a view of the samples) with %s is "
                                            "not supported yet", with));
    }
    r->s.keys = NULL; /* borrowed: the view holds what it needs */
    if (!r->s.streams)
        r->s.streams = 1;
    if (!r->s.queue_depth)
        r->s.queue_depth = 1;
    if (!r->s.batch_size)
        r->s.batch_size = 1;
    if (!r->s.have_seed) {
        uint64_t x;
        if (getrandom(&x, sizeof x, 0) != sizeof x)
            x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        r->s.seed = x;
        r->s.have_seed = 1;
        r->seed_drawn = 1;
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
    if (!rc && shard_reader_fingerprint(r))
        rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    if (!rc && s->aspect_buckets)
        rc = open_buckets(r, s);
    r->s.aspect_buckets = NULL; /* borrowed: the bucketed reading keeps what it needs */
    if (rc)
        return fail_open(r, err, rc);
    r->per = r->s.streams;
    r->nstreams = r->per * (r->mixing ? r->mix.n : 1);
    r->streams = calloc(r->nstreams, sizeof *r->streams);
    r->rr = calloc(r->mixing ? r->mix.n : 1, sizeof *r->rr);
    ShardFetchSettings fs = {r->list, r->nstreams, r->s.queue_depth, r->s.skip_errors,
                             shard_reader_segment, r, r->s.remote, r->s.map_files,
                             r->s.memory_budget, r->view};
    if (!r->streams || !r->rr || shard_fetch_new(&r->fetch, &fs) ||
        shard_shuffle_init(&r->shuffle, r->s.shuffle_buffer, r->s.shuffle_initial, r->nstreams,
                           shard_shuffle_limit(&r->s)))
        return fail_open(r, err, shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory"));
    rc = shard_reader_plan(r, r->s.epoch, 0, 0);
    if (rc)
        return fail_open(r, err, rc);
    r->start_due = 1;
    *out = r;
    return 0;
}

int shard_reader_set_epoch(ShardReader *r, uint64_t e)
{
    r->failed = 0;
    int rc = shard_reader_plan(r, e, 0, 0);
    if (rc)
        r->failed = rc;
    else
        r->start_due = 1;
    return rc;
}

int shard_reader_state(const ShardReader *r, char *buf, size_t size)
{
    uint64_t at = r->bucketed ? shard_bucketline_position(r) : r->position;
    return shard_reader_state_at(r, r->order, at, 1, buf, size);
}

/* The restored order's step and readings: the state's, and this reading where it is on
 * another topology than the state's (on its own, the epoch goes on as though never
 * stopped). */
static int note_readings(ShardReader *r, const ShardStateIn *in)
{
    ShardOrder *o = r->order;
    o->step0 = in->step;
    int rc = in->resumes ? shard_history_parse(&o->history, in->resumes, r->err) : 0;
    int same = in->world == r->s.world_size && in->workers == r->s.num_workers;
    if (!rc && !same && in->cut) {
        if (!o->history.n) /* the epoch began on the state's topology */
            rc = shard_history_add(&o->history, 0, in->world, in->workers, NULL);
        if (!rc)
            rc = shard_history_add(&o->history, in->step, r->s.world_size, r->s.num_workers,
                                   in->cut);
        if (rc)
            rc = shard_fail(r->err, rc, "out of memory");
    }
    return rc;
}

int shard_reader_restore(ShardReader *r, const char *state)
{
    ShardStateIn in;
    int rc = shard_reader_state_check(r, state, &in);
    if (rc)
        return rc;
    r->failed = 0;
    shard_reader_reset(r, in.epoch); /* stopped before the restore plans from the state */
    rc = shard_reader_resume(r, &in);
    if (!rc)
        rc = note_readings(r, &in);
    free(in.text);
    if (rc) { /* refused: the state's epoch begun from its start, the refusal kept */
        int replanned = shard_reader_plan(r, in.epoch, 0, 0);
        r->failed = replanned == SHARD_ERR_NOMEM ? replanned : rc;
    }
    return rc;
}

int64_t shard_reader_rank_batches(const ShardReader *r, int rank, uint64_t batch_size,
                                  int drop_last)
{
    const ShardOrder *o = r->order;
    if (r->bucketed) /* the batches are planned: counted on the line */
        return shard_bucketplan_rank_batches(r->bucket_plan, (ShardReader *)r,
                                             rank < 0 ? o->rank : rank);
    return shard_order_rank_batches(o, rank < 0 ? o->rank : rank, batch_size, drop_last);
}

uint32_t shard_reader_partitions(const ShardReader *r) { return r->order->parts; }

uint64_t shard_reader_position(const ShardReader *r) { return r->position; }

ShardOrder *shard_reader_order(ShardReader *r) { return shard_order_ref(r->order); }

uint64_t shard_reader_seed(const ShardReader *r) { return r->s.seed; }

void shard_reader_set_wait(ShardReader *r, double seconds) { r->wait = seconds > 0 ? seconds : 0; }

uint32_t shard_reader_source_of(const ShardReader *r, size_t shard)
{
    for (size_t i = 0; r->mixing && i < r->mix.n; i++)
        if (shard >= r->mix.src[i].lo && shard < (size_t)r->mix.src[i].lo + r->mix.src[i].n)
            return (uint32_t)i;
    return 0;
}

int64_t shard_reader_epoch_length(const ShardReader *r) { return r->epoch_length; }

void shard_reader_interrupt(ShardReader *r) { shard_fetch_interrupt(r->fetch); }

void shard_reader_stop(ShardReader *r)
{
    shard_fetch_stop(r->fetch);
    r->failed = shard_fail(r->err, SHARD_ERR_STATE,
                           "reader: stopped (set_epoch or restore to go on)");
}

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
    shard_list_index_counts(r->list, &st->indexes_built, &st->indexes_cached);
    st->skipped_unsized = atomic_load(&((ShardReader *)r)->unsized);
    st->keys_given = r->view ? shard_keyview_keys(r->view) : 0;
    st->keys_missing = r->view ? shard_keyview_missing(r->view) : 0;
    st->keys_chosen = 0;
    for (size_t i = 0; r->view && i < r->nurls; i++)
        st->keys_chosen += r->counts[i];
}

const char *shard_reader_kept_error(const ShardReader *r, size_t i)
{
    return shard_fetch_kept_error(r->fetch, i);
}

const char *shard_reader_error(const ShardReader *r) { return r->err; }

size_t shard_reader_buckets(const ShardReader *r, int *heights, int *widths, size_t n)
{
    size_t have = r->bucket_plan ? shard_bucketplan_count(r->bucket_plan) : 0;
    for (size_t i = 0; i < have && i < n; i++) {
        int h, w;
        shard_bucketplan_size(r->bucket_plan, i, &h, &w);
        if (heights)
            heights[i] = h;
        if (widths)
            widths[i] = w;
    }
    return have;
}

int shard_reader_bucket(const ShardReader *r, const ShardItem *it, int *height, int *width,
                        int *batch_end)
{
    if (!it)
        it = r->last;
    if (!r->bucketed || !it || !it->bucket)
        return -1;
    int h, w;
    shard_bucketplan_size(r->bucket_plan, it->bucket - 1, &h, &w);
    if (height)
        *height = h;
    if (width)
        *width = w;
    if (batch_end)
        *batch_end = it->batch_end;
    return (int)it->bucket - 1;
}

const ShardList *shard_reader_list(const ShardReader *r) { return r->list; }

ShardRemote *shard_reader_remote(const ShardReader *r) { return r->s.remote; }

void shard_reader_free(ShardReader **pr)
{
    if (!pr || !*pr)
        return;
    ShardReader *r = *pr;
    shard_bucketline_free(&r->bucketed);
    shard_bucketplan_free(&r->bucket_plan); /* its replay reads through r's remote */
    shard_fetch_free(&r->fetch); /* stops the threads first */
    shard_keyview_free(&r->view);
    shard_reader_clear(r);
    shard_shuffle_free(&r->shuffle);
    free(r->streams);
    free(r->rr);
    shard_mix_free(&r->mix);
    shard_order_put(r->order);
    free(r->segs);
    free(r->counts);
    shard_names_free(&r->names);
    shard_list_free(&r->list);
    shard_remote_free(&r->own_remote);
    free(r);
    *pr = NULL;
}

int shard_reader_take(ShardReader *r, ShardItem **out)
{
    *out = NULL;
    if (r->s.order_only)
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: an order_only reader names its "
                          "samples (shard_reader_name_next) and reads none");
    if (r->bucketed) {
        shard_item_release(r->last);
        r->last = NULL;
        return shard_bucketline_take(r, out);
    }
    return shard_reader_take_next(r, out);
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
