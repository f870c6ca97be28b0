/*
 * An epoch's order as one consumer reads it (order.h).
 */
#include <stdlib.h>
#include <string.h>

#include "read/order.h"
#include "read/partition.h"
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
    o->parts = parts;
    o->total = total;
    o->length = length;
    o->counted = len != NULL;
    shard_partition_block(parts, world, workers, rank, worker, &o->lo, &o->hi);
    size_t b = o->hi - o->lo;
    o->len = malloc(parts * sizeof *o->len);
    o->start = calloc(parts, sizeof *o->start);
    o->draws = calloc(parts, sizeof *o->draws);
    o->entered = malloc((b + 1) * sizeof *o->entered);
    atomic_init(&o->taken, 0);
    if (!o->len || !o->start || !o->draws || !o->entered) {
        shard_order_put(o);
        return NULL;
    }
    for (uint32_t i = 0; i < parts; i++)
        o->len[i] = len ? len[i] : SHARD_COUNT_UNKNOWN;
    for (size_t i = 0; i <= b; i++)
        atomic_init(&o->entered[i], UINT64_MAX);
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
    free(o->entered);
    free(o->draws);
    free(o);
}

int shard_order_begin_at(ShardOrder *o, const uint64_t *start, uint64_t bs, int drop_last)
{
    if (o->mode == SHARD_MODE_RESAMPLED) {
        memcpy(o->draws, start, o->parts * sizeof *o->draws);
        return 0;
    }
    memcpy(o->start, start, o->parts * sizeof *o->start);
    o->base = 0;
    for (uint32_t i = o->lo; i < o->hi && o->counted; i++)
        o->base += start[i] < o->len[i] ? start[i] : o->len[i];
    uint64_t *pads = shard_order_pads(o, bs, drop_last);
    if (!pads)
        return SHARD_ERR_NOMEM;
    o->pad = pads[(size_t)o->rank * (size_t)o->workers + (size_t)o->worker];
    free(pads);
    return 0;
}

uint64_t *shard_order_pads(const ShardOrder *o, uint64_t bs, int drop_last)
{
    size_t n = (size_t)o->world * (size_t)o->workers;
    uint64_t *pads = calloc(n, sizeof *pads);
    if (pads && o->mode == SHARD_MODE_EQUAL && o->counted)
        shard_cut_pads(o->start, o->len, o->parts, o->world, o->workers, bs ? bs : 1, drop_last,
                       pads);
    return pads;
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

int64_t shard_order_consumer_length(const ShardOrder *o)
{
    if (!o->counted)
        return -1;
    uint64_t n = o->pad;
    for (uint32_t i = o->lo; i < o->hi; i++)
        n += o->len[i];
    return (int64_t)n;
}

/* This consumer's block at position, exact. */
static void own_block(const ShardOrder *o, uint64_t position, uint64_t *pos)
{
    uint32_t b = o->hi - o->lo;
    if (o->counted) {
        uint64_t left = position > o->base ? position - o->base : 0;
        for (uint32_t i = o->lo; i < o->hi; i++) {
            uint64_t rest = o->start[i] < o->len[i] ? o->len[i] - o->start[i] : 0;
            uint64_t take = rest < left ? rest : left;
            pos[i] = o->start[i] + take;
            left -= take;
        }
        return;
    }
    /* without counts: where it entered each, and whether it has entered a later one */
    for (uint32_t i = 0; i < b; i++) {
        uint32_t p = o->lo + i;
        uint64_t at = atomic_load(&o->entered[i]);
        pos[p] = o->start[p];
        if (at == UINT64_MAX || position < at)
            continue;
        int done = 0;
        for (uint32_t j = i + 1; j <= b && !done; j++) {
            uint64_t next = atomic_load(&o->entered[j]);
            done = next != UINT64_MAX && next <= position;
        }
        pos[p] = done ? SHARD_CUT_DONE : o->start[p] + (position - at);
    }
}

void shard_order_cut(const ShardOrder *o, uint64_t position, uint64_t unit, uint64_t *pos)
{
    if (o->mode == SHARD_MODE_RESAMPLED) {
        memcpy(pos, o->draws, o->parts * sizeof *pos);
        return;
    }
    memcpy(pos, o->start, o->parts * sizeof *pos);
    if (o->counted) {
        uint64_t done = position > o->base ? position - o->base : 0;
        uint64_t u = unit ? unit : 1;
        shard_cut_advance_each(pos, o->len, o->parts, o->world, o->workers, u, (done + u - 1) / u);
    } else {
        for (uint32_t p = 0; p < o->parts; p++)
            if (p < o->lo || p >= o->hi)
                pos[p] = o->start[p] == SHARD_CUT_DONE ? SHARD_CUT_DONE : SHARD_CUT_UNKNOWN;
    }
    own_block(o, position, pos);
}
