/*
 * Epoch plans. The epoch's sample sequence is the concatenation of the shards in a shuffled
 * order that depends only on (seed, epoch). Consumers are numbered rank-major
 * (c = rank * num_workers + worker) and each takes a contiguous range of that sequence:
 * in exact mode the ranges partition it (sizes differ by at most one sample per rank, then
 * per worker); in equal mode every rank's range has the same size (the remainder dropped,
 * or padded by wrapping around to the start). A range is cut at shard boundaries into
 * segments, so a consumer opens few shards and starts mid-shard at most at both ends.
 * Without sample counts (exact mode only) whole shards are dealt round-robin instead.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/rng.h"
#include "read/epochplan.h"
#include "resume/resume.h"
#include "shard/common.h"

int shard_seglist_push(ShardSegList *l, uint32_t shard, uint64_t first, uint64_t count,
                       uint32_t flags, uint32_t round)
{
    if (count == 0)
        return 0;
    if (shard_array_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v, 16))
        return SHARD_ERR_NOMEM;
    l->v[l->n++] = (ShardSegment){shard, flags, first, count, round};
    return 0;
}

uint32_t *shard_plan_order(size_t n, uint64_t seed, uint64_t pass, uint64_t source, int shuffle)
{
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return NULL;
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    if (shuffle) {
        ShardRng r;
        shard_rng_init(&r, seed, SHARD_RNG_SHARDS, pass, source, 0);
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)shard_rng_below(&r, i);
            uint32_t t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
    }
    return order;
}

int shard_plan_cover(ShardSegList *l, const uint32_t *order, const uint64_t *pre, size_t n,
                     uint64_t a, uint64_t b, uint32_t base, uint32_t flags, uint32_t round)
{
    if (a >= b)
        return 0;
    size_t lo = 0, hi = n; /* last i with pre[i] <= a */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (pre[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    for (size_t i = lo; i < n && pre[i] < b; i++) {
        uint64_t s = a > pre[i] ? a : pre[i];
        uint64_t e = b < pre[i + 1] ? b : pre[i + 1];
        int rc = shard_seglist_push(l, base + order[i], s - pre[i], e > s ? e - s : 0, flags,
                                    round);
        if (rc)
            return rc;
    }
    return 0;
}

void shard_plan_range(uint64_t total, const ShardPlanSettings *p, uint64_t *a, uint64_t *b)
{
    uint64_t rlo, rhi;
    if (p->mode == SHARD_MODE_EXACT) {
        shard_plan_split(total, (uint64_t)p->world_size, (uint64_t)p->rank, &rlo, &rhi);
    } else {
        uint64_t per = total / (uint64_t)p->world_size;
        if (p->pad && total % (uint64_t)p->world_size)
            per++;
        rlo = (uint64_t)p->rank * per;
        rhi = rlo + per;
    }
    uint64_t wlo, whi, align = p->worker_align > 1 ? p->worker_align : 1;
    /* whole multiples of align per worker: split the rank's batches, not its samples */
    uint64_t units = (rhi - rlo + align - 1) / align;
    shard_plan_split(units, (uint64_t)p->num_workers, (uint64_t)p->worker, &wlo, &whi);
    wlo *= align;
    whi *= align;
    if (whi > rhi - rlo)
        whi = rhi - rlo;
    if (wlo > whi)
        wlo = whi;
    *a = rlo + wlo;
    *b = rlo + whi;
}

int shard_plan_valid(const ShardPlanSettings *p)
{
    return p->world_size >= 1 && p->rank >= 0 && p->rank < p->world_size &&
           p->num_workers >= 1 && p->worker >= 0 && p->worker < p->num_workers &&
           (p->mode == SHARD_MODE_EXACT || p->mode == SHARD_MODE_EQUAL);
}

void shard_plan_default_settings(ShardPlanSettings *p)
{
    memset(p, 0, sizeof *p);
    p->world_size = 1;
    p->num_workers = 1;
    p->mode = SHARD_MODE_EXACT;
    p->shuffle_shards = 1;
    p->worker_align = 1;
}

/* The segments of [a, b) of the sequence of shards order[0..n) (counts known), padding past
 * its end wrapping around to its start, marked as repeats. */
static int cover_range(ShardSegList *l, const uint32_t *order, const uint64_t *counts, size_t n,
                       uint64_t a, uint64_t b)
{
    uint64_t *pre = malloc((n + 1) * sizeof *pre);
    if (!pre)
        return SHARD_ERR_NOMEM;
    pre[0] = 0;
    for (size_t i = 0; i < n; i++)
        pre[i + 1] = pre[i] + counts[order[i]];
    uint64_t total = pre[n];
    int rc = 0;
    while (!rc && a < b && total) {
        uint64_t sa = a % total, len = b - a;
        uint64_t take = len < total - sa ? len : total - sa;
        rc = shard_plan_cover(l, order, pre, n, sa, sa + take, 0,
                              a >= total ? SHARD_SEGMENT_REPEAT : 0, (uint32_t)(a / total));
        a += take;
    }
    free(pre);
    return rc;
}

int shard_epoch_plan_range(const uint64_t *counts, size_t n, const ShardPlanSettings *p, uint64_t a,
                           uint64_t b, ShardSegment **out, size_t *nseg)
{
    *out = NULL;
    *nseg = 0;
    for (size_t i = 0; i < n; i++)
        if (counts[i] == SHARD_COUNT_UNKNOWN)
            return SHARD_ERR_UNSUPPORTED;
    uint32_t *order = shard_plan_order(n, p->seed, p->epoch, 0, p->shuffle_shards);
    if (!order)
        return SHARD_ERR_NOMEM;
    ShardSegList l = {0};
    int rc = cover_range(&l, order, counts, n, a, b);
    free(order);
    if (rc) {
        free(l.v);
        return rc;
    }
    *out = l.v;
    *nseg = l.n;
    return 0;
}

int shard_epoch_plan(const uint64_t *counts, size_t n, const ShardPlanSettings *p,
                     ShardSegment **out, size_t *nseg)
{
    *out = NULL;
    *nseg = 0;
    if (!shard_plan_valid(p) || n > UINT32_MAX)
        return SHARD_ERR_INVALID;
    int known = 1;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (counts[i] == SHARD_COUNT_UNKNOWN)
            known = 0;
        else
            total += counts[i];
    }
    if (!known && p->mode == SHARD_MODE_EQUAL)
        return SHARD_ERR_UNSUPPORTED;
    if (known) {
        uint64_t a, b;
        shard_plan_range(total, p, &a, &b);
        return shard_epoch_plan_range(counts, n, p, a, b, out, nseg);
    }
    /* Without counts whole shards are dealt round-robin. */
    uint32_t *order = shard_plan_order(n, p->seed, p->epoch, 0, p->shuffle_shards);
    if (!order)
        return SHARD_ERR_NOMEM;
    ShardSegList l = {0};
    int rc = 0;
    uint64_t consumers = (uint64_t)p->world_size * (uint64_t)p->num_workers;
    uint64_t me = (uint64_t)p->rank * (uint64_t)p->num_workers + (uint64_t)p->worker;
    for (size_t i = me; i < n && !rc; i += consumers)
        rc = shard_seglist_push(&l, order[i], 0, SHARD_COUNT_UNKNOWN, 0, 0);
    free(order);
    if (rc) {
        free(l.v);
        return rc;
    }
    *out = l.v;
    *nseg = l.n;
    return 0;
}
