/*
 * Weighted mixing. An epoch is a sequence of `total` samples (all consumers together), of
 * which source i contributes its quota: total x weight / (sum of weights), rounded by
 * largest remainder so the quotas sum to total. A source's part of epoch e is k = quota / size
 * whole passes over its shards, each in a shard order of its own (seed, pass, source), then
 * r = quota % size samples more: the window [e x r, (e + 1) x r) of the source read round
 * and round in one order, drawn anew only when the windows have come back to their start
 * (after lcm(r, size) samples; an order of the pass's shards never straddles one). So in
 * each epoch every sample of a source comes k or k + 1 times, over epochs each as often as
 * any other, and a source larger than its quota (k = 0) gives the next part of it each
 * epoch.
 *
 * The sources are interleaved by placing sample j of source i at the point
 * (j + u) / quota of the epoch, u drawn in [0, 1) from (seed, epoch, i, j), and merging:
 * random, yet every stretch of the epoch holds each source in its proportion to within a
 * sample or two. The merge needs no table: the samples of each source before any point of
 * the sequence follow from the draws near that point, so a consumer, given its range of the
 * sequence as one source's would be (epochplan.c), starts there directly, keeping one counter
 * per source. Points are compared exactly, in 128-bit integers (u has 32 bits, quotas are
 * below 2^40), ties broken by source.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "read/mix.h"
#include "resume/resume.h"

#define MIX_MAX_TOTAL (1ull << 40)

int shard_mix_init(ShardMix *m, size_t n)
{
    memset(m, 0, sizeof *m);
    m->src = calloc(n ? n : 1, sizeof *m->src);
    if (!m->src)
        return SHARD_ERR_NOMEM;
    m->n = n;
    return 0;
}

void shard_mix_free(ShardMix *m)
{
    for (size_t i = 0; m->src && i < m->n; i++)
        free(m->src[i].segs.v);
    free(m->src);
    memset(m, 0, sizeof *m);
}

int shard_mix_size(ShardMix *m, const uint64_t *counts, uint64_t total, char *err)
{
    double wsum = 0;
    uint64_t sizes = 0;
    for (size_t i = 0; i < m->n; i++) {
        ShardMixSource *s = &m->src[i];
        s->size = 0;
        for (uint32_t k = 0; k < s->n; k++) {
            if (counts[s->lo + k] == SHARD_COUNT_UNKNOWN)
                return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                                  "reader: mixing sources (or epoch_samples outside resampled "
                                  "mode) needs the sample count of every shard (a manifest, "
                                  "or a .idx beside each shard); source %zu has none for some",
                                  i);
            s->size += counts[s->lo + k];
        }
        if (!s->size)
            return shard_fail(err, SHARD_ERR_INVALID, "reader: source %zu has no samples", i);
        if (!(s->weight > 0) || !isfinite(s->weight))
            return shard_fail(err, SHARD_ERR_INVALID,
                              "reader: source %zu has weight %g; weights must be positive", i,
                              s->weight);
        wsum += s->weight;
        sizes += s->size;
    }
    m->total = total ? total : sizes;
    if (m->total >= MIX_MAX_TOTAL)
        return shard_fail(err, SHARD_ERR_INVALID, "reader: an epoch of %llu samples is too long",
                          (unsigned long long)m->total);
    /* Largest remainder: floors first, then one more to the largest fractions (ties to the
     * first source), so the quotas sum to total. */
    uint64_t given = 0;
    for (size_t i = 0; i < m->n; i++) {
        m->src[i].quota = (uint64_t)floor((double)m->total * (m->src[i].weight / wsum));
        if (m->src[i].quota > m->total)
            m->src[i].quota = m->total;
        given += m->src[i].quota;
    }
    while (given < m->total) {
        size_t best = 0;
        double bf = -1;
        for (size_t i = 0; i < m->n; i++) {
            double f = (double)m->total * (m->src[i].weight / wsum) - (double)m->src[i].quota;
            if (f > bf) {
                bf = f;
                best = i;
            }
        }
        m->src[best].quota++;
        given++;
    }
    while (given > m->total) { /* rounding of the floors above, never in practice */
        size_t best = 0;
        for (size_t i = 1; i < m->n; i++)
            if (m->src[i].quota > m->src[best].quota)
                best = i;
        m->src[best].quota--;
        given--;
    }
    return 0;
}

/* The fraction u of sample j of source s's place, 32 bits. */
static uint64_t draw(const ShardMixSource *s, uint64_t j)
{
    uint64_t x = s->key + j * 0x9e3779b97f4a7c15ull;
    return shard_splitmix64(&x) >> 32;
}

/* Whether sample j of source i comes before sample l of source k in the sequence:
 * (j + u) / Q_i < (l + u') / Q_k, cross-multiplied. */
static int before(const ShardMix *m, size_t i, uint64_t j, size_t k, uint64_t l)
{
    __uint128_t x = (((__uint128_t)j << 32) | draw(&m->src[i], j)) * m->src[k].quota;
    __uint128_t y = (((__uint128_t)l << 32) | draw(&m->src[k], l)) * m->src[i].quota;
    return x < y || (x == y && i < k);
}

/* The source of the first sample not yet counted in the heads; n (none) past the end. */
static size_t first_after(const ShardMix *m)
{
    size_t best = m->n;
    for (size_t i = 0; i < m->n; i++) {
        const ShardMixSource *s = &m->src[i];
        if (s->head < s->quota &&
            (best == m->n || before(m, i, s->head, best, m->src[best].head)))
            best = i;
    }
    return best;
}

/* Sets every head to the samples of its source among the first a of the sequence. */
static void heads_at(ShardMix *m, uint64_t a)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < m->n; i++) {
        ShardMixSource *s = &m->src[i];
        /* Those before the point a / total: all j below j0, and j0 if its place is. */
        uint64_t j0 = (uint64_t)((__uint128_t)a * s->quota / m->total);
        if (j0 >= s->quota) {
            s->head = s->quota;
        } else {
            __uint128_t place = (((__uint128_t)j0 << 32) | draw(s, j0)) * m->total;
            s->head = j0 + (place < (((__uint128_t)a * s->quota) << 32));
        }
        sum += s->head;
    }
    /* Within a sample per source of a: step the merge back or forward to exactly a. */
    while (sum > a) {
        size_t last = m->n;
        for (size_t i = 0; i < m->n; i++)
            if (m->src[i].head &&
                (last == m->n ||
                 before(m, last, m->src[last].head - 1, i, m->src[i].head - 1)))
                last = i;
        m->src[last].head--;
        sum--;
    }
    while (sum < a) {
        m->src[first_after(m)].head++;
        sum++;
    }
}

int shard_mix_next(ShardMix *m)
{
    if (m->pos >= m->end || !m->total)
        return -1;
    if (m->pos % m->total == 0) /* padding wraps around to the start of the sequence */
        for (size_t i = 0; i < m->n; i++)
            m->src[i].head = 0;
    size_t i = first_after(m);
    m->src[i].head++;
    m->pos++;
    return (int)i;
}

/* Padding's rounds: past any source's passes in an epoch. */
#define MIX_REPEAT_ROUND (1u << 20)

/* Appends the samples [a, b) of source s read round and round to its segments, the shard
 * order drawn anew (from key) every period samples (a multiple of its size); the samples
 * of round first (a / size) get round number base, the next base + 1, ... */
static int cover_series(ShardMixSource *s, uint64_t key, uint64_t period, const uint64_t *counts,
                        const ShardPlanSettings *p, uint64_t a, uint64_t b, uint32_t flags,
                        uint64_t first, uint32_t base)
{
    uint64_t *pre = malloc(((size_t)s->n + 1) * sizeof *pre);
    uint32_t *order = NULL;
    uint64_t have = UINT64_MAX;
    int rc = pre ? 0 : SHARD_ERR_NOMEM;
    while (!rc && a < b) {
        uint64_t pass = a / period, off = a % s->size;
        uint64_t take = b - a < s->size - off ? b - a : s->size - off;
        if (pass != have) {
            free(order);
            order = shard_plan_order(s->n, p->seed, pass, key, p->shuffle_shards);
            if (!order) {
                rc = SHARD_ERR_NOMEM;
                break;
            }
            pre[0] = 0;
            for (uint32_t k = 0; k < s->n; k++)
                pre[k + 1] = pre[k] + counts[s->lo + order[k]];
            have = pass;
        }
        rc = shard_plan_cover(&s->segs, order, pre, s->n, off, off + take, s->lo, flags,
                              base + (uint32_t)(a / s->size - first));
        a += take;
    }
    free(order);
    free(pre);
    return rc;
}

/* Appends the samples [a, b) of source s's part of the epoch (which in [0, quota)); round
 * counts the epoch's readings of a sample: its whole passes 0 ... k - 1, then the window
 * (k, and k + 1 where it crosses a round of its series), past them padding's repeats. */
static int cover_epoch(ShardMixSource *s, size_t which, const uint64_t *counts,
                       const ShardPlanSettings *p, uint64_t a, uint64_t b, uint32_t flags,
                       uint32_t round)
{
    uint64_t k = s->quota / s->size, whole = k * s->size, r = s->quota % s->size;
    int rc = 0;
    if (a < whole) /* whole passes: the epoch's k are passes e x k ... e x k + k - 1 */
        rc = cover_series(s, which, s->size, counts, p, p->epoch * whole + a,
                          p->epoch * whole + (b < whole ? b : whole), flags, p->epoch * k,
                          round);
    if (!rc && b > whole) { /* the windows, their orders seeded apart from whole passes' */
        uint64_t from = a > whole ? a - whole : 0, g = shard_gcd(s->size, r);
        __uint128_t lcm = (__uint128_t)s->size / g * r;
        uint64_t period = lcm > UINT64_MAX / 2 ? UINT64_MAX : (uint64_t)lcm;
        rc = cover_series(s, which | 1ull << 32, period, counts, p, p->epoch * r + from,
                          p->epoch * r + (b - whole), flags, p->epoch * r / s->size,
                          round + (uint32_t)k);
    }
    return rc;
}

int shard_mix_plan(ShardMix *m, const uint64_t *counts, const ShardPlanSettings *p)
{
    if (!shard_plan_valid(p))
        return SHARD_ERR_INVALID;
    uint64_t a, b;
    shard_plan_range(m->total, p, &a, &b);
    return shard_mix_plan_range(m, counts, p, a, b);
}

int shard_mix_plan_range(ShardMix *m, const uint64_t *counts, const ShardPlanSettings *p,
                         uint64_t a, uint64_t b)
{
    for (size_t i = 0; i < m->n; i++) {
        ShardRng g;
        shard_rng_init(&g, p->seed, SHARD_RNG_MIX, p->epoch, i, 0);
        m->src[i].key = shard_rng_next(&g);
        m->src[i].segs.n = 0;
    }
    m->pos = a;
    m->end = b;
    if (!m->total)
        return 0;
    uint64_t *from = malloc(m->n * sizeof *from);
    if (!from)
        return SHARD_ERR_NOMEM;
    int rc = 0;
    /* The range in pieces within one pass of the sequence; past total is padding. */
    while (!rc && a < b) {
        uint64_t x = a % m->total, len = b - a;
        uint64_t y = len < m->total - x ? x + len : m->total;
        heads_at(m, x);
        for (size_t i = 0; i < m->n; i++)
            from[i] = m->src[i].head;
        heads_at(m, y);
        for (size_t i = 0; i < m->n && !rc; i++) {
            rc = cover_epoch(&m->src[i], i, counts, p, from[i], m->src[i].head,
                             a >= m->total ? SHARD_SEGMENT_REPEAT : 0,
                             a >= m->total ? MIX_REPEAT_ROUND : 0);
        }
        a += y - x;
    }
    free(from);
    if (!rc)
        heads_at(m, m->pos % m->total);
    return rc;
}
