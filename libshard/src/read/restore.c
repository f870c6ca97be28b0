/*
 * A restore (resume.h): the state's epoch planned with its partitions and cut, this
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

/* A cut of runs of partitions delivered from their start (a v3 state's with counts), as a
 * line's cut in the blocks of the topology it was taken on. */
static int cut_of_runs(const ShardOrder *o, const ShardStateIn *in, ShardCut *cut, char *msg)
{
    uint64_t *pos = malloc(o->parts * sizeof *pos);
    if (!pos)
        return SHARD_ERR_NOMEM;
    int rc = shard_runs_parse(in->runs, o->len, o->parts, pos, msg);
    for (uint32_t p = 0; !rc && p < o->parts; p++)
        if (pos[p] == SHARD_CUT_UNKNOWN)
            rc = shard_fail(msg, SHARD_ERR_INVALID, "the state does not say how far partition "
                            "%u was delivered", p);
    if (!rc) {
        ShardCut all;
        rc = shard_cut_init(&all, o->length);
        if (!rc) {
            /* all left but what each partition delivered from its start */
            uint64_t *took = calloc(o->parts, sizeof *took);
            all.world = 1;
            all.workers = (int)o->parts;
            all.edge = malloc(((size_t)o->parts + 1) * sizeof *all.edge);
            rc = took && all.edge ? 0 : SHARD_ERR_NOMEM;
            for (uint32_t p = 0; !rc && p < o->parts; p++) {
                uint64_t b;
                shard_partition_range(o->length, o->parts, p, &all.edge[p], &b);
                took[p] = pos[p];
            }
            if (!rc) {
                all.edge[o->parts] = o->length;
                rc = shard_cut_take(&all, took);
            }
            free(took);
        }
        if (!rc)
            rc = shard_cut_blocks(&all, o->parts, in->world, in->workers);
        if (!rc)
            *cut = all;
        else
            shard_cut_free(&all);
    }
    free(pos);
    return rc;
}

/* With counts: the state's cut, in its regions on the topology it was taken on, else
 * spread over this one. */
static int begin_cut(ShardReader *r, const ShardStateIn *in, int same)
{
    ShardOrder *o = r->order;
    char msg[SHARD_ERROR_MAX];
    ShardCut cut;
    int rc = in->cut ? shard_cut_parse(&cut, in->cut, o->length, in->world, in->workers, msg)
                     : cut_of_runs(o, in, &cut, msg);
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

/* Resampled mode on a topology its partitions do not fit: every partition of this one's
 * count starts past the last draw any had taken (no exactly-once in this mode). */
static void draws_past(const uint64_t *next, uint32_t parts, uint32_t nparts, uint64_t *start)
{
    uint64_t most = 0;
    for (uint32_t p = 0; p < parts; p++)
        most = next[p] > most ? next[p] : most;
    for (uint32_t p = 0; p < nparts; p++)
        start[p] = most;
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
        shard_order_draws_after(start, state_parts, in->world, in->workers, in->taken, next);
        if (state_parts != o->parts)
            draws_past(next, state_parts, o->parts, start);
        else
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

/* A partition of a mix is planned shard reading by shard reading: the most a state may ask
 * for (its total is trusted for nothing more). */
#define MIX_READINGS_MAX (1u << 22)

/* Whether a state's total fits this mix: its sources' sizes without epoch_samples; with it,
 * a multiple of epoch_samples (times the consumers the epoch began on) whose partitions
 * each take at most MIX_READINGS_MAX readings of a shard of the mean size. */
static int mix_total_plausible(const ShardReader *r, const ShardStateIn *in)
{
    if (!r->s.epoch_samples)
        return in->total == r->mix_own_total;
    uint64_t samples = 0;
    for (size_t i = 0; i < r->nurls; i++)
        samples += r->counts[i];
    uint64_t mean = samples / (r->nurls ? r->nurls : 1);
    mean = mean ? mean : 1;
    return in->total && in->total % r->s.epoch_samples == 0 &&
           in->total / in->parts / mean <= MIX_READINGS_MAX;
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
    if (r->mixing && !mix_total_plausible(r, in))
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: the state's epoch of %llu samples in %u partitions is not "
                          "this mix's (its sources' sizes without epoch_samples; with it, a "
                          "multiple of epoch_samples that plans at most %u shard readings a "
                          "partition)",
                          (unsigned long long)in->total, in->parts, MIX_READINGS_MAX);
    int rc = shard_reader_plan(r, in->epoch, parts, r->mixing ? in->total : 0);
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
