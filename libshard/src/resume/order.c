/*
 * An epoch's order as one consumer reads it (order.h).
 */
#include <stdlib.h>
#include <string.h>

#include "resume/order.h"
#include "shard/common.h"
#include "shard/list.h"

ShardOrder *shard_order_new(uint64_t epoch, ShardMode mode, int world, int workers, int rank,
                            int worker, uint32_t parts, uint64_t total, uint64_t length,
                            const uint64_t *len)
{
    ShardOrder *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    atomic_init(&o->refs, 1);
    o->epoch = epoch;
    o->mode = mode;
    o->world = world;
    o->workers = workers;
    o->rank = rank;
    o->worker = worker;
    o->self = (size_t)rank * (size_t)workers + (size_t)worker;
    o->parts = parts;
    o->total = total;
    o->length = length;
    o->counted = len != NULL;
    shard_partition_block(parts, world, workers, rank, worker, &o->lo, &o->hi);
    o->len = malloc(parts * sizeof *o->len);
    o->start = calloc(parts, sizeof *o->start);
    atomic_init(&o->taken, 0);
    if (!o->len || !o->start) {
        shard_order_put(o);
        return NULL;
    }
    for (uint32_t i = 0; i < parts; i++)
        o->len[i] = len ? len[i] : SHARD_COUNT_UNKNOWN;
    return o;
}

ShardOrder *shard_order_ref(ShardOrder *o)
{
    if (o)
        atomic_fetch_add(&o->refs, 1);
    return o;
}

void shard_order_put(ShardOrder *o)
{
    if (!o || atomic_fetch_sub(&o->refs, 1) != 1)
        return;
    free(o->len);
    free(o->start);
    free(o->piece);
    free(o->entered);
    shard_cut_free(&o->cut);
    shard_history_free(&o->history);
    free(o);
}

/* Whether partition p was delivered whole before the reading began (without counts). */
static int started_done(const ShardOrder *o, uint32_t p)
{
    return o->start[p] == SHARD_CUT_DONE ||
           (o->len[p] != SHARD_COUNT_UNKNOWN && o->start[p] >= o->len[p]);
}

/* Without counts, and resampled: the block's partitions, whole, from where each stands. */
static int block_pieces(ShardOrder *o)
{
    o->piece = malloc(((size_t)(o->hi - o->lo) + 1) * sizeof *o->piece);
    if (!o->piece)
        return SHARD_ERR_NOMEM;
    for (uint32_t p = o->lo; p < o->hi; p++)
        if (o->mode == SHARD_MODE_RESAMPLED || !started_done(o, p))
            o->piece[o->npieces++] = (ShardPiece){p, o->mode == SHARD_MODE_RESAMPLED ? 0 : o->start[p],
                                                  SHARD_COUNT_UNKNOWN};
    return 0;
}

/* With counts: the cut (begun afresh when cut is NULL) and this consumer's pieces of it. */
static int cut_pieces(ShardOrder *o, const ShardCut *cut)
{
    int rc;
    if (cut) {
        rc = shard_cut_copy(&o->cut, cut);
    } else if (!(rc = shard_cut_init(&o->cut, o->length))) {
        rc = shard_partition_whole(o->parts, o->world, o->workers, o->mode)
                 ? shard_cut_blocks(&o->cut, o->parts, o->world, o->workers)
                 : shard_cut_spread(&o->cut, o->world, o->workers);
    }
    if (rc)
        return rc;
    size_t c = o->self;
    if ((rc = shard_cut_pieces(&o->cut, c, o->parts, &o->piece, &o->npieces)))
        return rc;
    o->base = o->cut.edge[c + 1] - o->cut.edge[c] - shard_cut_rest(&o->cut, c);
    return 0;
}

int shard_order_begin(ShardOrder *o, const ShardCut *cut, const uint64_t *start, uint64_t bs,
                      int drop_last)
{
    free(o->piece);
    free(o->entered);
    shard_cut_free(&o->cut);
    o->piece = NULL;
    o->npieces = 0;
    o->base = o->pad = 0;
    int rc;
    if (o->counted) {
        rc = cut_pieces(o, cut);
    } else {
        if (start)
            memcpy(o->start, start, o->parts * sizeof *o->start);
        rc = block_pieces(o);
    }
    if (rc)
        return rc;
    o->entered = malloc((o->npieces + 1) * sizeof *o->entered);
    uint64_t *pads = shard_order_pads(o, bs, drop_last);
    if (!o->entered || !pads) {
        free(pads);
        return SHARD_ERR_NOMEM;
    }
    for (size_t i = 0; i <= o->npieces; i++)
        atomic_init(&o->entered[i], UINT64_MAX);
    o->pad = pads[o->self];
    free(pads);
    return 0;
}

uint64_t *shard_order_pads(const ShardOrder *o, uint64_t bs, int drop_last)
{
    size_t n = (size_t)o->world * (size_t)o->workers;
    uint64_t *pads = calloc(n, sizeof *pads);
    if (pads && o->mode == SHARD_MODE_EQUAL && o->counted)
        shard_cut_pads(&o->cut, bs ? bs : 1, drop_last, pads);
    return pads;
}

int64_t shard_order_rank_batches(const ShardOrder *o, int rank, uint64_t bs, int drop_last)
{
    if (!o->counted || !bs || rank < 0 || rank >= o->world)
        return -1;
    uint64_t *pads = shard_order_pads(o, bs, drop_last);
    if (!pads)
        return -1;
    int64_t n = (int64_t)shard_cut_rank_batches(&o->cut, rank, bs, drop_last, pads);
    free(pads);
    return n;
}

void shard_order_draws_after(const uint64_t *start, uint32_t parts, int world, int workers,
                             uint64_t taken, uint64_t *next)
{
    for (int r = 0; r < world; r++)
        for (int w = 0; w < workers; w++) {
            uint32_t lo, hi;
            shard_partition_block(parts, world, workers, r, w, &lo, &hi);
            uint64_t b = hi - lo;
            for (uint64_t i = 0; i < b; i++) /* draws j < taken with j mod b = i */
                next[lo + i] = start[lo + i] + (taken > i ? (taken - i + b - 1) / b : 0);
        }
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

void shard_order_draws_resumed(const uint64_t *start, uint32_t parts, int world, int workers,
                               uint64_t taken, uint32_t nparts, uint64_t *next)
{
    shard_order_draws_after(start, parts, world, workers, taken, next);
    if (parts != nparts)
        draws_past(next, parts, nparts, next);
}

int64_t shard_order_consumer_length(const ShardOrder *o)
{
    if (!o->counted)
        return -1;
    size_t c = o->self;
    return (int64_t)(o->cut.edge[c + 1] - o->cut.edge[c] + o->pad);
}

int shard_order_cut_at(const ShardOrder *o, uint64_t position, uint64_t unit, ShardCut *out)
{
    size_t n = (size_t)o->world * (size_t)o->workers, c = o->self;
    uint64_t *took = malloc(n * sizeof *took);
    if (!took || shard_cut_copy(out, &o->cut)) {
        free(took);
        return SHARD_ERR_NOMEM;
    }
    uint64_t done = position > o->base ? position - o->base : 0, u = unit ? unit : 1;
    uint64_t units = (done + u - 1) / u;
    for (size_t k = 0; k < n; k++)
        took[k] = units > UINT64_MAX / u ? UINT64_MAX : units * u;
    took[c] = done;
    int rc = shard_cut_take(out, took);
    free(took);
    if (rc)
        shard_cut_free(out);
    return rc;
}

void shard_order_runs_at(const ShardOrder *o, uint64_t position, uint64_t *pos)
{
    memcpy(pos, o->start, o->parts * sizeof *pos);
    if (o->mode == SHARD_MODE_RESAMPLED)
        return;
    for (uint32_t p = 0; p < o->parts; p++)
        if (p < o->lo || p >= o->hi)
            pos[p] = o->start[p] == SHARD_CUT_DONE ? SHARD_CUT_DONE : SHARD_CUT_UNKNOWN;
    /* its own: where it entered each piece, and whether it has entered a later one */
    for (size_t i = 0; i < o->npieces; i++) {
        uint32_t p = o->piece[i].p;
        uint64_t at = atomic_load(&o->entered[i]);
        if (at == UINT64_MAX || position < at)
            continue;
        int done = 0;
        for (size_t j = i + 1; j <= o->npieces && !done; j++) {
            uint64_t next = atomic_load(&o->entered[j]);
            done = next != UINT64_MAX && next <= position;
        }
        pos[p] = done ? SHARD_CUT_DONE : o->start[p] + (position - at);
    }
}
