/*
 * A partition's streams and buffer stepped (steps.h): which segment each stream reads, the
 * round-robin over the streams (over a mix's sources first), the shuffle buffer's steps,
 * and the same steps on sample identities alone, a replay to where a resume goes on.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/rng.h"
#include "read/mix.h"
#include "resume/resume.h"
#include "read/readerdef.h"
#include "read/shuffle.h"
#include "read/steps.h"
#include "tar/item.h"

uint64_t shard_reader_consumer(const ShardReader *r)
{
    return (uint64_t)r->s.rank * (uint64_t)r->s.num_workers + (uint64_t)r->s.worker;
}

/* Segment n of stream k, or 0 past its last. Resampled epochs draw them. Called on the
 * fetch threads too: it only reads what plan_streams set while they were stopped. */
int shard_reader_segment(void *cookie, size_t k, size_t n, ShardSegment *out)
{
    ShardReader *r = cookie;
    if (r->s.mode == SHARD_MODE_RESAMPLED) {
        /* Draw j of the consumer is its block's partition j mod B, that partition's draw
         * (its start) + j / B: a generator per (epoch, partition, draw) keeps it O(1), and
         * a partition's draws the same on any topology. */
        const ShardOrder *o = r->order;
        uint64_t b = o->hi - o->lo;
        if (!r->nurls || !b)
            return 0;
        uint64_t j = (uint64_t)k + (uint64_t)n * r->per;
        uint32_t p = o->lo + (uint32_t)(j % b);
        uint64_t d = o->start[p] + j / b;
        ShardRng g;
        shard_rng_init(&g, r->s.seed, SHARD_RNG_RESAMPLE, r->epoch, p, d);
        out->shard = (uint32_t)shard_rng_below(&g, r->nurls);
        out->flags = 0;
        uint64_t x = ((uint64_t)p << 40) ^ d; /* a shard drawn again: another reading */
        out->round = (uint32_t)(shard_splitmix64(&x) & 0xffffff);
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

/* The next sample of the epoch through the shuffle buffer; NULL at its end. */
ShardItem *shard_reader_step(ShardReader *r, ShardPullFn pullf, int *rc)
{
    *rc = 0;
    if (r->s.mode == SHARD_MODE_RESAMPLED && r->s.epoch_samples && r->position >= r->s.epoch_samples)
        return NULL;
    return shard_shuffle_step(&r->shuffle, pullf, r, rc);
}

/* pull_from for the replay: the identity of source src's next sample. */
static ShardItem *pull_sim_from(ShardReader *r, size_t src, int *rc)
{
    ReaderStream *st;
    while ((st = shard_reader_turn(r, src))) {
        size_t k = (size_t)(st - r->streams);
        ShardSegment seg;
        int ok = shard_reader_segment(r, k, st->sim_seg, &seg);
        while (ok && st->sim_off >= seg.count) {
            st->sim_seg++;
            st->sim_off = 0;
            ok = shard_reader_segment(r, k, st->sim_seg, &seg);
        }
        if (!ok) { /* the stream's END */
            st->active = 0;
            r->rr[src] = (r->rr[src] + 1) % r->per;
            continue;
        }
        ShardItem *it = shard_item_identity(seg.shard, seg.first + st->sim_off);
        if (it) {
            it->repeat = (seg.flags & SHARD_SEGMENT_REPEAT) != 0;
            it->round = seg.round;
        }
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

ShardItem *shard_reader_pull_ids(void *cookie, int *rc)
{
    ShardReader *r = cookie;
    *rc = 0;
    int src;
    while ((src = shard_reader_source(r)) >= 0) {
        ShardItem *it = pull_sim_from(r, (size_t)src, rc);
        if (it || *rc || !r->mixing)
            return it;
    }
    return NULL;
}

int shard_reader_replay(ShardReader *r, uint64_t n)
{
    int rc = 0;
    for (uint64_t i = 0; i < n; i++) {
        ShardItem *it = shard_reader_step(r, shard_reader_pull_ids, &rc);
        if (rc)
            return rc;
        if (!it)
            return shard_fail(r->err, SHARD_ERR_INVALID,
                              "reader: the state delivers %llu samples of partition %lld, "
                              "which has %llu",
                              (unsigned long long)n,
                              r->cur < (int64_t)r->order->npieces
                                  ? (long long)r->order->piece[r->cur].p : -1LL,
                              (unsigned long long)i);
        shard_item_release(it);
    }
    /* Each stream starts where the replay left it. */
    for (size_t k = 0; k < r->nstreams; k++) {
        ReaderStream *st = &r->streams[k];
        st->start_seg = st->sim_seg;
        st->start_off = st->sim_off;
    }
    if (r->s.order_only)
        return 0;
    return shard_shuffle_load(&r->shuffle, r->list, r->view, r->s.remote, r->err);
}

