/*
 * A restore (resume.h): the state's epoch planned with its partitions and cut; and the
 * replay of a partition entered in its middle, on sample identities alone, so that the
 * samples delivered before are never read.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "base/error.h"
#include "read/epoch.h"
#include "read/readerdef.h"
#include "read/resume.h"
#include "read/partition.h"
#include "read/shuffle.h"
#include "read/state.h"
#include "tar/item.h"

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

/* The identity of the next sample of the round-robin, advancing the replay state. */
static ShardItem *pull_sim(void *cookie, int *rc)
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
        ShardItem *it = shard_reader_step(r, pull_sim, &rc);
        if (rc)
            return rc;
        if (!it)
            return shard_fail(r->err, SHARD_ERR_INVALID,
                              "reader: the state delivers %llu samples of partition %lld, "
                              "which has %llu",
                              (unsigned long long)n, (long long)(r->order->lo + r->cur),
                              (unsigned long long)i);
        shard_item_release(it);
    }
    /* Each stream starts where the replay left it. */
    for (size_t k = 0; k < r->nstreams; k++) {
        ReaderStream *st = &r->streams[k];
        st->start_seg = st->sim_seg;
        st->start_off = st->sim_off;
    }
    return shard_shuffle_load(&r->shuffle, r->list, r->s.remote, r->err);
}

int shard_reader_resume(ShardReader *r, const ShardStateIn *in)
{
    int rc = shard_reader_plan(r, in->epoch, in->parts, r->mixing ? in->total : 0);
    if (rc)
        return rc;
    ShardOrder *o = r->order;
    if (!r->mixing && o->total && in->total != o->total)
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: the state's epoch has %llu samples, this one %llu",
                          (unsigned long long)in->total, (unsigned long long)o->total);
    uint64_t *start = malloc(o->parts * sizeof *start);
    if (!start)
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    char msg[SHARD_ERROR_MAX];
    int resampled = r->s.mode == SHARD_MODE_RESAMPLED;
    if (shard_cut_parse(in->cut, resampled ? NULL : o->len, o->parts, start, msg)) {
        free(start);
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: %s", msg);
    }
    uint32_t lo = o->hi, hi = o->lo; /* the first and last partition of ours not said */
    for (uint32_t p = o->lo; p < o->hi; p++)
        if (start[p] == SHARD_CUT_UNKNOWN) {
            lo = p < lo ? p : lo;
            hi = p + 1;
        }
    if (lo < hi) {
        free(start);
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: the state does not say how far partitions %u-%u (of rank %d, "
                          "worker %d here) were delivered: without every shard's sample count "
                          "a consumer's state says only its own partitions; restore on each "
                          "consumer the state it took, merge the consumers' states "
                          "(shard_reader_state_merge), or give the shards counts (a "
                          "manifest, .idx files, make_indexes 'always')",
                          lo, hi - 1, r->s.rank, r->s.worker);
    }
    int same = in->world == r->s.world_size && in->workers == r->s.num_workers;
    if (resampled && !same) { /* every old consumer took as many draws as the one saving */
        uint64_t *next = malloc(o->parts * sizeof *next);
        if (!next) {
            free(start);
            return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
        }
        shard_order_draws_after(start, o->parts, in->world, in->workers, in->taken, next);
        free(start);
        start = next;
    }
    rc = shard_order_begin_at(o, start, r->s.batch_size, r->s.drop_last);
    free(start);
    if (rc)
        return shard_fail(r->err, rc, "out of memory");
    r->position = resampled ? in->delivered : o->base;
    if (resampled) { /* on its own topology: the same draws from their start, passed over */
        r->resume_skip = same ? in->since : 0;
        o->base = same ? in->delivered - in->since : in->delivered;
    }
    shard_reader_set_length(r);
    return 0;
}
