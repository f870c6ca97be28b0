/*
 * A restore (resume.h): the state's epoch planned with its partitions and cut; the
 * partitions entered in their middle are replayed when the reading reaches them
 * (steps.c), so that the samples delivered before are never read.
 */
#include <stdlib.h>

#include "base/error.h"
#include "read/epoch.h"
#include "read/order.h"
#include "read/partition.h"
#include "read/readerdef.h"
#include "read/resume.h"
#include "read/state.h"

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
