/*
 * Merging the states of a job's consumers into the job's one (shard/reader.h:
 * shard_reader_state_merge): the runs each consumer delivered, or the cut each was given.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "resume/cut.h"
#include "resume/order.h"
#include "resume/cuttext.h"
#include "resume/statetext.h"
#include "shard/reader.h"

/* The part of a state's settings every consumer's shares: up to ';' without the pairs of
 * the consumer that took it. */
static int common_part(const char *state, const ShardStateForm *f, char *out, size_t cap)
{
    const char *cut = f->pairs_end;
    if (!cut)
        return -1;
    size_t at = 0;
    for (const char *p = state; p < cut;) {
        const char *end = memchr(p, ',', (size_t)(cut - p));
        if (!end)
            end = cut;
        int mine = !strncmp(p, "rank=", 5) || !strncmp(p, "worker=", 7) ||
                   !strncmp(p, "delivered=", 10) || !strncmp(p, "step=", 5);
        size_t n = (size_t)(end - p);
        if (!mine) {
            if (at + n + 2 > cap)
                return -1;
            memcpy(out + at, p, n);
            at += n;
            out[at++] = ',';
        }
        p = end < cut ? end + 1 : end;
    }
    out[at] = 0;
    return 0;
}

/* What merging needs of a state: its topology, partitions, the line's length, and the
 * consumer that took it (-1 where it does not say). */
typedef struct Merging {
    unsigned long long parts, world, workers;
    uint64_t length;
    long long consumer;
} Merging;

static int merging_of(const ShardStateForm *f, Merging *m)
{
    ShardStatePair pairs[SHARD_STATE_PAIRS_MAX];
    int np = f->pairs_end ? shard_state_pairs_parse(f->pairs, f->pairs_end, pairs,
                                                    SHARD_STATE_PAIRS_MAX)
                          : -1;
    unsigned long long total, rank, worker, pad;
    const char *mode = np >= 0 ? shard_state_value(pairs, np, "mode") : NULL;
    if (np < 0 || shard_state_number(pairs, np, "partitions", 0, &m->parts) || !m->parts ||
        m->parts > SHARD_PARTITIONS_MAX || shard_state_number(pairs, np, "world_size", 1, &m->world) ||
        shard_state_number(pairs, np, "num_workers", 1, &m->workers) || !m->world || !m->workers ||
        m->world > (1u << 30) || m->workers > (1u << 30) ||
        shard_state_number(pairs, np, "total", 0, &total) || shard_state_number(pairs, np, "pad", 0, &pad))
        return -1;
    m->length = shard_partition_total(total, (uint32_t)m->parts,
                                      mode && !strcmp(mode, "equal") ? SHARD_MODE_EQUAL
                                                                     : SHARD_MODE_EXACT,
                                      pad != 0);
    m->consumer = -1;
    if (!shard_state_number(pairs, np, "rank", m->world, &rank) &&
        !shard_state_number(pairs, np, "worker", m->workers, &worker) && rank < m->world &&
        worker < m->workers)
        m->consumer = (long long)(rank * m->workers + worker);
    return 0;
}

/* Runs (without counts): each partition as the consumer whose block holds it says, else as
 * any state says; out: the merged runs. */
static int merge_runs(const ShardStateForm *forms, size_t n, const Merging *m0, char *out,
                      size_t cap, char *msg)
{
    uint64_t parts = m0->parts;
    uint64_t *len = malloc(parts * sizeof *len), *merged = malloc(parts * sizeof *merged),
             *vals = malloc(parts * sizeof *vals);
    unsigned char *owned = calloc(parts, 1);
    int rc = len && merged && vals && owned ? 0 : SHARD_ERR_NOMEM;
    for (uint64_t p = 0; !rc && p < parts; p++) {
        len[p] = SHARD_COUNT_UNKNOWN;
        merged[p] = SHARD_CUT_UNKNOWN;
    }
    for (size_t k = 0; !rc && k < n; k++) {
        if (!forms[k].runs) {
            rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: state %zu is not one "
                            "without counts, as state 0 is", k);
            break;
        }
        if (shard_runs_parse(forms[k].runs, len, (uint32_t)parts, vals, msg)) {
            rc = SHARD_ERR_INVALID;
            break;
        }
        Merging m;
        uint32_t lo = 0, hi = 0;
        if (!merging_of(&forms[k], &m) && m.consumer >= 0)
            shard_partition_block((uint32_t)parts, (int)m.world, (int)m.workers,
                                  (int)(m.consumer / (long long)m.workers),
                                  (int)(m.consumer % (long long)m.workers), &lo, &hi);
        /* a consumer's own partitions are exact; others' only fill what none says */
        for (uint64_t p = 0; p < parts && !rc; p++) {
            if (vals[p] == SHARD_CUT_UNKNOWN)
                continue;
            if (p >= lo && p < hi) {
                if (owned[p] && merged[p] != vals[p])
                    rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: two states of "
                                    "the consumer that reads partition %" PRIu64 " disagree "
                                    "on it (states of one point of the run, one per "
                                    "consumer)", p);
                merged[p] = vals[p];
                owned[p] = 1;
            } else if (!owned[p] && merged[p] == SHARD_CUT_UNKNOWN) {
                merged[p] = vals[p];
            }
        }
    }
    size_t tag = strlen(forms[0].runs_tag);
    if (!rc && (cap < tag + 1 ||
                shard_runs_format(merged, len, (uint32_t)parts, out + tag, cap - tag)))
        rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: the merged state does not "
                        "fit in the room given");
    if (!rc)
        memcpy(out, forms[0].runs_tag, tag);
    free(len);
    free(merged);
    free(vals);
    free(owned);
    return rc;
}

/* Cuts (with counts): each consumer's region as its own state says, else as state 0 does. */
static int merge_cuts(const ShardStateForm *forms, size_t n, const Merging *m0, char *out,
                      size_t cap, char *msg)
{
    size_t nc = (size_t)(m0->world * m0->workers);
    ShardCut *cuts = calloc(n, sizeof *cuts);
    const ShardCut **from = calloc(nc, sizeof *from);
    int rc = cuts && from ? 0 : SHARD_ERR_NOMEM;
    for (size_t k = 0; !rc && k < n; k++) {
        Merging m;
        if (!forms[k].cut) {
            rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: state %zu is not one "
                            "with counts, as state 0 is", k);
            break;
        }
        if ((rc = shard_cut_parse(&cuts[k], forms[k].cut, m0->length, (int)m0->world,
                                  (int)m0->workers, msg)))
            break;
        if (memcmp(cuts[k].edge, cuts[0].edge, (nc + 1) * sizeof *cuts[k].edge)) {
            rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: state %zu reads the epoch "
                            "in other regions than state 0 (states of one run, one per "
                            "consumer)", k);
            break;
        }
        if (!merging_of(&forms[k], &m) && m.consumer >= 0) {
            if (from[m.consumer] && shard_cut_rest(from[m.consumer], (size_t)m.consumer) !=
                                        shard_cut_rest(&cuts[k], (size_t)m.consumer)) {
                rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: two states of "
                                "consumer %lld disagree on how far it is (states of one point "
                                "of the run, one per consumer)", m.consumer);
                break;
            }
            from[m.consumer] = &cuts[k];
        }
    }
    for (size_t c = 0; !rc && c < nc; c++)
        if (!from[c])
            from[c] = &cuts[0];
    ShardCut joined;
    if (!rc && !(rc = shard_cut_copy(&joined, &cuts[0]))) {
        rc = shard_cut_join(&joined, from);
        if (!rc && shard_cut_format(&joined, out, cap))
            rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: the merged state does not "
                            "fit in the room given");
        shard_cut_free(&joined);
    }
    for (size_t k = 0; cuts && k < n; k++)
        shard_cut_free(&cuts[k]);
    free(cuts);
    free(from);
    return rc;
}

static int merge_opened(char *const *states, const ShardStateForm *forms, size_t n, char *buf,
                        size_t size, ShardError *err)
{
    char msg[SHARD_ERROR_MAX] = "";
    char first[1024], other[1024];
    Merging m0;
    if (common_part(states[0], &forms[0], first, sizeof first) || merging_of(&forms[0], &m0)) {
        shard_fail(msg, SHARD_ERR_INVALID,
                   "merging states: '%.200s' is not a reader state saying its partitions and "
                   "topology", states[0]);
        return shard_report(err, SHARD_ERR_INVALID, msg);
    }
    for (size_t k = 1; k < n; k++)
        if (common_part(states[k], &forms[k], other, sizeof other) || strcmp(first, other)) {
            shard_fail(msg, SHARD_ERR_INVALID,
                       "merging states: state %zu is of another epoch, seed or settings than "
                       "state 0 ('%.200s')",
                       k, states[k]);
            return shard_report(err, SHARD_ERR_INVALID, msg);
        }
    size_t head = (size_t)(forms[0].pairs_end - states[0]) + 1;
    if (head >= size)
        return shard_report(err, SHARD_ERR_INVALID, "merging states: the merged state does "
                                                    "not fit in the room given");
    memcpy(buf, states[0], head);
    int rc = forms[0].cut ? merge_cuts(forms, n, &m0, buf + head, size - head, msg)
                          : merge_runs(forms, n, &m0, buf + head, size - head, msg);
    if (rc == SHARD_ERR_NOMEM)
        return shard_report(err, rc, "out of memory");
    return rc ? shard_report(err, rc, msg) : 0;
}

int shard_reader_state_merge(const char *const *states, size_t n, char *buf, size_t size,
                             ShardError *err)
{
    if (!n)
        return shard_report(err, SHARD_ERR_INVALID, "merging states: none given");
    char **texts = calloc(n, sizeof *texts), msg[SHARD_ERROR_MAX];
    ShardStateForm *forms = calloc(n, sizeof *forms);
    int rc = texts && forms ? 0 : shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n && !rc; k++)
        if (!(texts[k] = shard_state_open(states[k], &forms[k], msg)))
            rc = shard_report(err, SHARD_ERR_INVALID, msg);
    if (!rc)
        rc = merge_opened(texts, forms, n, buf, size, err);
    if (!rc && shard_state_seal(buf, size))
        rc = shard_report(err, SHARD_ERR_INVALID, "merging states: the merged state does not "
                                                  "fit in the room given");
    for (size_t k = 0; texts && k < n; k++)
        free(texts[k]);
    free(texts);
    free(forms);
    return rc;
}
