/*
 * An epoch of the streaming reader (epoch.h): its plan (segments dealt to the streams, or
 * drawn in resampled mode), the round-robin over the streams (over a mix's sources first),
 * and the shuffle buffer's steps, on the consumer's thread.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "read/epoch.h"
#include "read/fetch.h"
#include "read/mix.h"
#include "read/readerdef.h"
#include "read/shuffle.h"
#include "tar/item.h"

uint64_t shard_reader_consumer(const ShardReader *r)
{
    return (uint64_t)r->s.rank * (uint64_t)r->s.num_workers + (uint64_t)r->s.worker;
}

/* Segment n of stream k, or 0 past its last. Resampled epochs draw them. Called on the
 * fetch threads too: it only reads what plan_epoch set while they were stopped. */
int shard_reader_segment(void *cookie, size_t k, size_t n, ShardSegment *out)
{
    ShardReader *r = cookie;
    if (r->s.mode == SHARD_MODE_RESAMPLED) {
        if (!r->nurls)
            return 0;
        /* Draw n of stream k: a generator per (epoch, consumer, stream, n) keeps it O(1). */
        ShardRng g;
        shard_rng_init(&g, r->s.seed, SHARD_RNG_RESAMPLE, r->epoch, shard_reader_consumer(r),
                       ((uint64_t)k << 40) ^ n);
        out->shard = (uint32_t)shard_rng_below(&g, r->nurls);
        out->flags = 0;
        out->round = (uint32_t)((k << 24) ^ n); /* a shard drawn again: another reading */
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

int shard_reader_start(ShardReader *r)
{
    for (size_t k = 0; k < r->nstreams; k++) {
        ReaderStream *st = &r->streams[k];
        if (st->active && shard_fetch_start(r->fetch, k, st->start_seg, st->start_off))
            return shard_fail(r->err, SHARD_ERR_NOMEM, "reader: cannot start a fetch thread");
    }
    return 0;
}

void shard_reader_clear(ShardReader *r)
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
int shard_reader_plan(ShardReader *r, uint64_t e)
{
    shard_fetch_stop(r->fetch);
    r->start_due = 0; /* the caller says when the new plan may start */
    shard_reader_clear(r);
    free(r->segs);
    r->segs = NULL;
    r->nsegs = 0;
    r->epoch = e;
    r->position = 0;
    r->pending_src = -1;
    memset(r->rr, 0, (r->mixing ? r->mix.n : 1) * sizeof *r->rr);
    ShardRng rng;
    shard_rng_init(&rng, r->s.seed, SHARD_RNG_BUFFER, e, shard_reader_consumer(r), 0);
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
        if (rc == SHARD_ERR_UNSUPPORTED) {
            size_t i = 0;
            while (i + 1 < r->nurls && r->counts[i] != SHARD_COUNT_UNKNOWN)
                i++;
            return shard_fail(r->err, rc, "reader: equal mode needs the sample count of every "
                                          "shard, and %s has none (a manifest, a .idx beside "
                                          "each shard, or make_indexes not 'never')",
                              shard_list_entry(r->list, i)->url);
        }
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
        ReaderStream *st = &r->streams[k];
        ShardSegment seg;
        st->start_seg = 0;
        st->start_off = 0;
        st->sim_seg = 0;
        st->sim_off = 0;
        st->active = shard_reader_segment(r, k, 0, &seg);
    }
    return 0;
}

/* Source src's stream whose turn it is in the round-robin (the next one still active from
 * its rr); NULL when all of them have ended. The data path and the replay share this order. */
ReaderStream *shard_reader_turn(ShardReader *r, size_t src)
{
    ReaderStream *first = &r->streams[src * r->per];
    for (size_t tries = 0; tries < r->per; tries++) {
        if (first[r->rr[src]].active)
            return &first[r->rr[src]];
        r->rr[src] = (r->rr[src] + 1) % r->per;
    }
    return NULL;
}

/* The source of the next sample (always 0 unless mixing); -1 at the end of a mix. */
int shard_reader_source(ShardReader *r) { return r->mixing ? shard_mix_next(&r->mix) : 0; }

/* The next item of source src in round-robin order over its streams; NULL when they
 * have all ended. */
static ShardItem *pull_from(ShardReader *r, size_t src, int *rc)
{
    ReaderStream *st;
    while ((st = shard_reader_turn(r, src))) {
        ShardItem *it;
        int got = shard_fetch_take_for(r->fetch, (size_t)(st - r->streams), r->wait, &it);
        if (got == SHARD_AGAIN) { /* nothing changed: the caller takes the step again */
            *rc = SHARD_AGAIN;
            return NULL;
        }
        if (got) { /* only while stopping, which this thread does: never here */
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
            *rc = shard_fail(r->err, it->code ? it->code : SHARD_ERR_FORMAT, "%s",
                             it->error ? it->error : "read error");
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
        if ((*rc = shard_reader_start(r)))
            return NULL;
    }
    int src;
    /* a source drawn for a pull that had to wait is the next pull's */
    while ((src = r->pending_src >= 0 ? r->pending_src : shard_reader_source(r)) >= 0) {
        r->pending_src = -1;
        ShardItem *it = pull_from(r, (size_t)src, rc);
        if (*rc == SHARD_AGAIN)
            r->pending_src = src;
        /* A mixed source that ended early (skipped after an error) gives up its place. */
        if (it || *rc || !r->mixing)
            return it;
    }
    return NULL;
}

/* The next sample of the epoch through the shuffle buffer; NULL at its end. */
ShardItem *shard_reader_step(ShardReader *r, ShardPullFn pullf, int *rc)
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
    ShardItem *it = shard_reader_step(r, pull, &rc);
    if (rc == SHARD_AGAIN)
        return rc; /* shard_reader_set_wait's wait passed: nothing taken */
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
