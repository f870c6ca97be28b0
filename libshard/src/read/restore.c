/*
 * A restore (restore.h): the state's epoch planned with its partitions and cut, this
 * consumer's pieces of what is left (the regions it was read in, on the topology it was
 * taken on; spread over this one otherwise); the pieces that begin inside a partition are
 * replayed when the reading reaches them (steps.c), so that the samples delivered before
 * are never read.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "resume/resume.h"
#include "read/epoch.h"
#include "read/readerdef.h"
#include "read/restore.h"
#include "read/state.h"

/* With counts: the state's cut, in its regions on the topology it was taken on, else
 * spread over this one. */
static int begin_cut(ShardReader *r, const ShardStateIn *in, int same)
{
    ShardOrder *o = r->order;
    char msg[SHARD_ERROR_MAX];
    ShardCut cut;
    int rc = in->cut ? shard_cut_parse(&cut, in->cut, o->length, in->world, in->workers, msg)
                     : shard_cut_of_runs(&cut, in->runs, o->len, o->parts, o->length,
                                         in->world, in->workers, msg);
    if (rc == SHARD_ERR_NOMEM)
        return shard_fail(r->err, rc, "out of memory");
    if (rc)
        return shard_fail(r->err, rc, "reader: %s", msg);
    if (!same)
        rc = shard_cut_spread(&cut, r->s.world_size, r->s.num_workers);
    if (!rc)
        rc = shard_order_begin(o, &cut, NULL, r->s.batch_size, r->s.drop_last);
    shard_cut_free(&cut);
    if (rc)
        return shard_fail(r->err, rc, "out of memory");
    r->position = o->base;
    return 0;
}

/* Without counts, and resampled: the runs, each partition from where it stands. */
static int begin_runs(ShardReader *r, const ShardStateIn *in, int same, uint32_t state_parts)
{
    ShardOrder *o = r->order;
    int resampled = r->s.mode == SHARD_MODE_RESAMPLED;
    if (!in->runs)
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: the state's cut is a line's, "
                          "taken with every sample count known, which this reader's epoch "
                          "does not have");
    uint32_t np = state_parts > o->parts ? state_parts : o->parts;
    uint64_t *start = malloc(np * sizeof *start), *next = malloc(np * sizeof *next);
    if (!start || !next) {
        free(start);
        free(next);
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    }
    char msg[SHARD_ERROR_MAX];
    if (shard_runs_parse(in->runs, resampled ? NULL : o->len, state_parts, start, msg)) {
        free(start);
        free(next);
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: %s", msg);
    }
    uint32_t lo = o->hi, hi = o->lo; /* the first and last partition of ours not said */
    for (uint32_t p = o->lo; p < o->hi && !resampled; p++)
        if (start[p] == SHARD_CUT_UNKNOWN) {
            lo = p < lo ? p : lo;
            hi = p + 1;
        }
    if (lo < hi) {
        free(start);
        free(next);
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: the state does not say how far partitions %u-%u (of rank %d, "
                          "worker %d here) were delivered: without every shard's sample count "
                          "a consumer's state says only its own partitions; restore on each "
                          "consumer the state it took, merge the consumers' states "
                          "(shard_reader_state_merge), or give the shards counts (a "
                          "manifest, .idx files, make_indexes 'always')",
                          lo, hi - 1, r->s.rank, r->s.worker);
    }
    if (resampled && !same) { /* every old consumer took as many draws as the one saving */
        shard_order_draws_resumed(start, state_parts, in->world, in->workers, in->taken,
                                  o->parts, next);
        memcpy(start, next, o->parts * sizeof *start);
    }
    int rc = shard_order_begin(o, NULL, start, r->s.batch_size, r->s.drop_last);
    free(start);
    free(next);
    if (rc)
        return shard_fail(r->err, rc, "out of memory");
    r->position = resampled ? in->delivered : o->base;
    if (resampled) { /* on its own topology: the same draws from their start, passed over */
        r->resume_skip = same ? in->since : 0;
        o->base = same ? in->delivered - in->since : in->delivered;
    }
    return 0;
}

int shard_reader_resume(ShardReader *r, const ShardStateIn *in)
{
    int same = in->world == r->s.world_size && in->workers == r->s.num_workers;
    uint32_t parts = in->parts;
    char msg[SHARD_ERROR_MAX];
    /* resampled mode draws by whole partitions: on a topology they do not fit, its own */
    if (r->s.mode == SHARD_MODE_RESAMPLED && !same &&
        shard_partition_check(parts, r->s.world_size, r->s.num_workers, r->s.mode, msg))
        parts = 0;
    int rc = shard_reader_plan_order(r, parts, r->mixing ? in->total : 0);
    if (rc)
        return rc;
    ShardOrder *o = r->order;
    if (!r->mixing && o->total && in->total != o->total)
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: the state's epoch has %llu samples, this one %llu",
                          (unsigned long long)in->total, (unsigned long long)o->total);
    rc = o->counted ? begin_cut(r, in, same) : begin_runs(r, in, same, in->parts);
    if (!rc)
        shard_reader_set_length(r);
    return rc;
}
