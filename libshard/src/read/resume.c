/*
 * A restore's replay (resume.h): the epoch's steps on sample identities alone, so that
 * the samples before the position are never read.
 */
#include <stdatomic.h>

#include "base/error.h"
#include "read/epoch.h"
#include "read/readerdef.h"
#include "read/resume.h"
#include "read/shuffle.h"
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

int shard_reader_replay(ShardReader *r, uint64_t epoch, uint64_t position)
{
    int rc = shard_reader_plan(r, epoch);
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
        ShardItem *it = shard_reader_step(r, pull_sim, &rc);
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
        ReaderStream *st = &r->streams[k];
        st->start_seg = st->sim_seg;
        st->start_off = st->sim_off;
    }
    if ((rc = shard_shuffle_load(&r->shuffle, r->list, r->s.remote, r->err)))
        return rc;
    r->start_due = 1;
    return 0;
}
