/*
 * The line's arithmetic (cut.h; formats/order.md, sections 3 to 5): canonical partitions,
 * and the cut of what is left of them. Its text is cuttext.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/text.h"
#include "resume/cut.h"
#include "shard/common.h"

/* ---- canonical partitions ------------------------------------------------------------ */

uint64_t shard_gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void shard_plan_split(uint64_t total, uint64_t m, uint64_t k, uint64_t *lo, uint64_t *hi)
{
    uint64_t q = total / m, r = total % m;
    *lo = k * q + (k < r ? k : r);
    *hi = *lo + q + (k < r);
}

uint64_t shard_partition_total(uint64_t t, uint32_t p, ShardMode mode, int pad)
{
    if (mode != SHARD_MODE_EQUAL || !p)
        return t;
    return pad ? (t + p - 1) / p * p : t - t % p;
}

/* The start of partition i: the remainder's extra samples spread evenly (i x r / p), so
 * that any run of partitions of a length holds as many of them as any other, one apart:
 * ranks and workers, whatever their count, get samples one apart. */
static uint64_t partition_start(uint64_t total, uint32_t p, uint64_t i)
{
    uint64_t q = total / p, r = total % p;
    return i * q + (uint64_t)((unsigned __int128)i * r / p);
}

void shard_partition_range(uint64_t total, uint32_t p, uint32_t i, uint64_t *a, uint64_t *b)
{
    *a = partition_start(total, p, i);
    *b = partition_start(total, p, (uint64_t)i + 1);
}

void shard_partition_block(uint32_t p, int world, int workers, int rank, int worker,
                           uint32_t *lo, uint32_t *hi)
{
    uint64_t rlo, rhi, wlo, whi;
    shard_plan_split(p, (uint64_t)world, (uint64_t)rank, &rlo, &rhi);
    shard_plan_split(rhi - rlo, (uint64_t)workers, (uint64_t)worker, &wlo, &whi);
    *lo = (uint32_t)(rlo + wlo);
    *hi = (uint32_t)(rlo + whi);
}

int shard_partition_check(uint32_t p, int world, int workers, ShardMode mode, char *msg)
{
    if (!p)
        return shard_fail(msg, SHARD_ERR_INVALID, "partitions: at least 1");
    if (world < 1 || workers < 1)
        return shard_fail(msg, SHARD_ERR_INVALID, "partitions: world_size and num_workers "
                                                  "are at least 1");
    uint64_t w = (uint64_t)world, lcm = p / shard_gcd(p, w) * w;
    if (mode == SHARD_MODE_EQUAL && p % w)
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "partitions=%" PRIu32 " do not divide among world_size=%d ranks "
                          "(equal mode gives every rank the same number of whole partitions): "
                          "set partitions to a multiple of %d, such as %" PRIu64,
                          p, world, world, lcm);
    if ((uint64_t)workers > p / w)
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "partitions=%" PRIu32 " over world_size=%d ranks leave %" PRIu64
                          " to a rank, fewer than its num_workers=%d: a worker would have "
                          "none (fewer workers, or partitions=%" PRIu64 ")",
                          p, world, p / w, workers, w * (uint64_t)workers);
    return 0;
}

int shard_partition_whole(uint32_t p, int world, int workers, ShardMode mode)
{
    uint64_t w = (uint64_t)world;
    return p >= w * (uint64_t)workers && (mode != SHARD_MODE_EQUAL || p % w == 0);
}

/* Partition counts with many divisors, largest first (2880 = 2^6 x 3^2 x 5). */
static const uint32_t AUTO_COUNTS[] = {2880, 1440, 720, 360, 240, 120, 60, 24, 12, 6, 2, 1};

/* Numbers with many divisors, for the partitions a rank takes where the count above does
 * not fit the world size. */
static const uint32_t PER_RANK[] = {1, 2, 3, 4, 6, 12, 24, 36, 48, 60, 120, 180, 240, 360,
                                    720, 1440, 2880, 5040, 10080};

/* Whether p gives every worker of every rank the same number of partitions. */
static int fits(uint64_t p, int world, int workers)
{
    return p % ((uint64_t)world * (uint64_t)workers) == 0;
}

uint32_t shard_partition_auto(uint64_t t, int counted, size_t nshards, size_t shuffle,
                              size_t streams, int world, int workers, ShardMode mode)
{
    /* long enough to shuffle as the buffer can, and to interleave `streams` shards */
    uint64_t least = shuffle > 256 ? shuffle : 256;
    if (counted && nshards && streams * ((t + nshards - 1) / nshards) > least)
        least = streams * ((t + nshards - 1) / nshards);
    uint64_t p = 1;
    for (size_t i = 0; i < sizeof AUTO_COUNTS / sizeof *AUTO_COUNTS; i++) {
        uint64_t c = AUTO_COUNTS[i];
        if (counted ? t / c >= least : nshards / c >= 1) {
            p = c;
            break;
        }
    }
    (void)mode;
    if (world < 1 || workers < 1 || fits(p, world, workers))
        return (uint32_t)p;
    /* every worker the same number of partitions, a rank's count one with many divisors */
    uint64_t w = (uint64_t)world, k = (uint64_t)workers, per = (p + w - 1) / w;
    uint64_t chosen = (per + k - 1) / k * k;
    for (size_t i = 0; i < sizeof PER_RANK / sizeof *PER_RANK; i++)
        if (PER_RANK[i] >= per && PER_RANK[i] % k == 0) {
            chosen = PER_RANK[i];
            break;
        }
    p = chosen * w;
    return p > SHARD_PARTITIONS_MAX ? SHARD_PARTITIONS_MAX : (uint32_t)p;
}

/* ---- the cut ----------------------------------------------------------------------------- */

static size_t consumers(const ShardCut *c) { return (size_t)c->world * (size_t)c->workers; }

/* Appends [a, b) (nothing when empty), joined to the last span where they touch. */
int shard_cut_push(ShardCut *c, uint64_t a, uint64_t b)
{
    if (a >= b)
        return 0;
    if (c->n && c->left[c->n - 1].b == a) {
        c->left[c->n - 1].b = b;
        return 0;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        ShardSpan *v = realloc(c->left, cap * sizeof *v);
        if (!v)
            return SHARD_ERR_NOMEM;
        c->left = v;
        c->cap = cap;
    }
    c->left[c->n++] = (ShardSpan){a, b};
    return 0;
}

/* Regions for world x workers consumers, every edge at 0 but the last. */
int shard_cut_regions(ShardCut *c, int world, int workers)
{
    uint64_t *e = calloc((size_t)world * (size_t)workers + 1, sizeof *e);
    if (!e)
        return SHARD_ERR_NOMEM;
    free(c->edge);
    c->edge = e;
    c->world = world;
    c->workers = workers;
    e[consumers(c)] = c->length;
    return 0;
}

int shard_cut_init(ShardCut *c, uint64_t length)
{
    memset(c, 0, sizeof *c);
    c->length = length;
    return shard_cut_push(c, 0, length);
}

int shard_cut_copy(ShardCut *dst, const ShardCut *src)
{
    *dst = *src;
    dst->left = malloc((src->n ? src->n : 1) * sizeof *dst->left);
    dst->cap = src->n;
    dst->edge = src->edge ? malloc((consumers(src) + 1) * sizeof *dst->edge) : NULL;
    if (!dst->left || (src->edge && !dst->edge)) {
        shard_cut_free(dst);
        return SHARD_ERR_NOMEM;
    }
    if (src->n) /* an epoch with nothing left has no spans (and may have no array) */
        memcpy(dst->left, src->left, src->n * sizeof *dst->left);
    if (src->edge)
        memcpy(dst->edge, src->edge, (consumers(src) + 1) * sizeof *dst->edge);
    return 0;
}

void shard_cut_free(ShardCut *c)
{
    free(c->left);
    free(c->edge);
    memset(c, 0, sizeof *c);
}

/* The first span that ends past x. */
static size_t span_after(const ShardCut *c, uint64_t x)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->left[mid].b <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint64_t shard_cut_left_in(const ShardCut *c, uint64_t lo, uint64_t hi)
{
    uint64_t n = 0;
    for (size_t i = span_after(c, lo); i < c->n && c->left[i].a < hi; i++) {
        uint64_t a = c->left[i].a > lo ? c->left[i].a : lo;
        uint64_t b = c->left[i].b < hi ? c->left[i].b : hi;
        n += b - a;
    }
    return n;
}

uint64_t shard_cut_rest(const ShardCut *c, size_t consumer)
{
    return shard_cut_left_in(c, c->edge[consumer], c->edge[consumer + 1]);
}

int shard_cut_blocks(ShardCut *c, uint32_t parts, int world, int workers)
{
    if (shard_cut_regions(c, world, workers))
        return SHARD_ERR_NOMEM;
    for (int r = 0; r < world; r++)
        for (int w = 0; w < workers; w++) {
            uint32_t lo, hi;
            uint64_t a, b;
            shard_partition_block(parts, world, workers, r, w, &lo, &hi);
            shard_partition_range(c->length, parts, lo, &a, &b);
            c->edge[(size_t)r * (size_t)workers + (size_t)w] = a;
        }
    return 0;
}

/* The point past the first n points left from span i on (n within what is left): where a
 * region holding those n ends. */
static uint64_t point_after(const ShardCut *c, size_t *i, uint64_t *used, uint64_t n)
{
    uint64_t at = *i < c->n ? c->left[*i].a + *used : c->length;
    while (n && *i < c->n) {
        uint64_t room = c->left[*i].b - c->left[*i].a - *used;
        uint64_t take = room < n ? room : n;
        n -= take;
        *used += take;
        at = c->left[*i].a + *used;
        if (*used == c->left[*i].b - c->left[*i].a) {
            (*i)++;
            *used = 0;
        }
    }
    return at;
}

int shard_cut_spread(ShardCut *c, int world, int workers)
{
    if (shard_cut_regions(c, world, workers))
        return SHARD_ERR_NOMEM;
    uint64_t total = shard_cut_left_in(c, 0, c->length);
    size_t i = 0;
    uint64_t used = 0;
    for (int r = 0; r < world; r++) {
        uint64_t rlo, rhi, wlo, whi;
        shard_plan_split(total, (uint64_t)world, (uint64_t)r, &rlo, &rhi);
        for (int w = 0; w < workers; w++) {
            size_t k = (size_t)r * (size_t)workers + (size_t)w;
            c->edge[k] = k ? point_after(c, &i, &used, 0) : 0;
            shard_plan_split(rhi - rlo, (uint64_t)workers, (uint64_t)w, &wlo, &whi);
            point_after(c, &i, &used, whi - wlo);
        }
    }
    /* an edge past the last point left would leave its consumer the gap after it */
    c->edge[consumers(c)] = c->length;
    return 0;
}

/* The partition holding point g of a line of length in parts partitions (g < length). */
static uint32_t partition_of(uint64_t length, uint32_t parts, uint64_t g)
{
    uint64_t p = (uint64_t)((unsigned __int128)g * parts / length), a, b;
    for (;;) {
        shard_partition_range(length, parts, (uint32_t)p, &a, &b);
        if (g < a)
            p--;
        else if (g >= b)
            p++;
        else
            return (uint32_t)p;
    }
}

int shard_cut_pieces(const ShardCut *c, size_t consumer, uint32_t parts, ShardPiece **out,
                     size_t *n)
{
    uint64_t lo = c->edge[consumer], hi = c->edge[consumer + 1];
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    for (size_t i = span_after(c, lo); i < c->n && c->left[i].a < hi; i++) {
        uint64_t g = c->left[i].a > lo ? c->left[i].a : lo;
        uint64_t end = c->left[i].b < hi ? c->left[i].b : hi;
        while (g < end) {
            uint32_t p = partition_of(c->length, parts, g);
            uint64_t a, b;
            shard_partition_range(c->length, parts, p, &a, &b);
            uint64_t z = b < end ? b : end;
            if (*n == cap) {
                cap = cap ? cap * 2 : 4;
                ShardPiece *v = realloc(*out, cap * sizeof *v);
                if (!v) {
                    free(*out);
                    *out = NULL;
                    *n = 0;
                    return SHARD_ERR_NOMEM;
                }
                *out = v;
            }
            (*out)[(*n)++] = (ShardPiece){p, g - a, z - a};
            g = z;
        }
    }
    return 0;
}

uint64_t shard_cut_batches(uint64_t n, uint64_t bs, int drop_last)
{
    return drop_last ? n / bs : (n + bs - 1) / bs;
}

uint64_t shard_cut_rank_batches(const ShardCut *c, int rank, uint64_t bs, int drop_last,
                                const uint64_t *pads)
{
    uint64_t sum = 0;
    for (int w = 0; w < c->workers; w++) {
        size_t k = (size_t)rank * (size_t)c->workers + (size_t)w;
        sum += shard_cut_batches(shard_cut_rest(c, k) + (pads ? pads[k] : 0), bs, drop_last);
    }
    return sum;
}

void shard_cut_pads(const ShardCut *c, uint64_t bs, int drop_last, uint64_t *pads)
{
    uint64_t most = 0;
    memset(pads, 0, consumers(c) * sizeof *pads);
    bs = bs ? bs : 1;
    for (int r = 0; r < c->world; r++) {
        uint64_t b = shard_cut_rank_batches(c, r, bs, drop_last, NULL);
        most = b > most ? b : most;
    }
    for (int r = 0; r < c->world; r++) {
        uint64_t b = shard_cut_rank_batches(c, r, bs, drop_last, NULL);
        if (b == most)
            continue;
        size_t k = (size_t)r * (size_t)c->workers + (size_t)c->workers - 1;
        for (int w = c->workers - 1; w >= 0; w--) { /* its last worker with samples */
            k = (size_t)r * (size_t)c->workers + (size_t)w;
            if (shard_cut_rest(c, k))
                break;
        }
        if (!shard_cut_rest(c, k))
            k = (size_t)r * (size_t)c->workers + (size_t)c->workers - 1;
        /* the fewest repeats after its n samples that make its batches m */
        uint64_t n = shard_cut_rest(c, k);
        uint64_t m = shard_cut_batches(n, bs, drop_last) + (most - b);
        pads[k] = (drop_last ? m * bs : (m - 1) * bs + 1) - n;
    }
}

int shard_cut_take(ShardCut *c, const uint64_t *took)
{
    size_t nc = consumers(c);
    uint64_t *want = malloc(nc * sizeof *want);
    ShardSpan *old = c->left;
    size_t n = c->n;
    if (!want)
        return SHARD_ERR_NOMEM;
    memcpy(want, took, nc * sizeof *want);
    c->left = NULL;
    c->n = c->cap = 0;
    int rc = 0;
    size_t k = 0;
    /* each span walked through the regions it lies in, each region's first points dropped */
    for (size_t i = 0; i < n && !rc; i++) {
        uint64_t g = old[i].a;
        while (g < old[i].b && !rc) {
            while (k + 1 < nc && c->edge[k + 1] <= g)
                k++;
            uint64_t end = k + 1 < nc && c->edge[k + 1] < old[i].b ? c->edge[k + 1] : old[i].b;
            uint64_t drop = end - g < want[k] ? end - g : want[k];
            want[k] -= drop;
            rc = shard_cut_push(c, g + drop, end);
            g = end;
        }
    }
    free(old);
    free(want);
    return rc;
}

void shard_cut_deal(const uint64_t *left, int workers, uint64_t batches, int first,
                    uint64_t *got)
{
    memset(got, 0, (size_t)workers * sizeof *got);
    /* whole turns over the workers that still have batches, each giving one; a worker
     * ends only at a turn's end, so the last, partial turn starts at `first` again */
    uint64_t todo = batches;
    for (;;) {
        uint64_t active = 0, least = UINT64_MAX;
        for (int w = 0; w < workers; w++)
            if (got[w] < left[w]) {
                active++;
                least = left[w] - got[w] < least ? left[w] - got[w] : least;
            }
        if (!active || !todo)
            break;
        uint64_t turns = todo / active < least ? todo / active : least;
        if (!turns) { /* a partial turn, from first */
            for (int j = 0; j < workers && todo; j++) {
                int w = (first + j) % workers;
                if (got[w] < left[w]) {
                    got[w]++;
                    todo--;
                }
            }
            break;
        }
        for (int w = 0; w < workers; w++)
            if (got[w] < left[w])
                got[w] += turns;
        todo -= turns * active;
    }
}

int shard_cut_advance(ShardCut *c, uint64_t bs, int drop_last, uint64_t batches, int first,
                      const uint64_t *pads)
{
    int workers = c->workers;
    if (!bs || first < 0 || first >= workers)
        return SHARD_ERR_INVALID;
    uint64_t *left = malloc((size_t)workers * 2 * sizeof *left);
    uint64_t *took = calloc(consumers(c), sizeof *took);
    if (!left || !took) {
        free(left);
        free(took);
        return SHARD_ERR_NOMEM;
    }
    uint64_t *got = left + workers;
    for (int r = 0; r < c->world; r++) {
        size_t k0 = (size_t)r * (size_t)workers;
        for (int w = 0; w < workers; w++) /* each worker's batches, none delivered yet */
            left[w] = shard_cut_batches(shard_cut_rest(c, k0 + (size_t)w) +
                                            (pads ? pads[k0 + (size_t)w] : 0),
                                        bs, drop_last);
        shard_cut_deal(left, workers, batches, first, got);
        for (int w = 0; w < workers; w++)
            took[k0 + (size_t)w] = got[w] > UINT64_MAX / bs ? UINT64_MAX : got[w] * bs;
    }
    int rc = shard_cut_take(c, took);
    free(left);
    free(took);
    return rc;
}

int shard_cut_join(ShardCut *dst, const ShardCut *const *from)
{
    ShardSpan *old = dst->left;
    dst->left = NULL;
    dst->n = dst->cap = 0;
    int rc = 0;
    for (size_t k = 0; k < consumers(dst) && !rc; k++) {
        const ShardCut *c = from[k];
        uint64_t lo = dst->edge[k], hi = dst->edge[k + 1];
        for (size_t i = span_after(c, lo); i < c->n && c->left[i].a < hi && !rc; i++)
            rc = shard_cut_push(dst, c->left[i].a > lo ? c->left[i].a : lo,
                      c->left[i].b < hi ? c->left[i].b : hi);
    }
    free(old);
    return rc;
}
