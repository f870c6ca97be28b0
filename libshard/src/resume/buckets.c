/*
 * Aspect-ratio buckets (buckets.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "resume/buckets.h"

#define SIDE_MIN 8
#define SIDE_MAX 16384

/* n rounded to a multiple of a (at least a). */
static int aligned(double n, int a)
{
    long k = lround(n / a);
    return (int)(k < 1 ? a : k * a);
}

static int add(ShardBuckets *b, int h, int w)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].height == h && b->v[i].width == w)
            return 0; /* merged */
    if (b->n == SHARD_BUCKETS_MAX)
        return -1;
    b->v[b->n++] = (ShardBucket){h, w};
    return 0;
}

void shard_buckets_sdxl(ShardBuckets *b, int side)
{
    memset(b, 0, sizeof *b);
    /* heights 512 to 2048 in steps of 64, each with the 64-aligned width nearest to its
     * height's share of 1024 x 1024; then scaled to side, aligned to 8 */
    double s = side / 1024.0;
    for (int h = 512; h <= 2048; h += 64) {
        int w = aligned(1024.0 * 1024.0 / h, 64);
        if (w < 512 || w > 2048)
            continue;
        add(b, aligned(h * s, 8), aligned(w * s, 8));
    }
}

int shard_buckets_parse(ShardBuckets *b, const char *spec, int side, char *err)
{
    memset(b, 0, sizeof *b);
    if (side < SIDE_MIN || side > SIDE_MAX)
        return shard_fail(err, SHARD_ERR_INVALID, "aspect_buckets: an image size of %d pixels: "
                          "named sets and auto want one from %d to %d", side, SIDE_MIN, SIDE_MAX);
    if (!spec || !*spec)
        return shard_fail(err, SHARD_ERR_INVALID, "aspect_buckets: empty");
    if (!strcmp(spec, "sdxl")) {
        shard_buckets_sdxl(b, side);
        return 0;
    }
    if (!strncmp(spec, "auto", 4) && (!spec[4] || spec[4] == ':')) {
        char *end = NULL;
        long k = spec[4] ? strtol(spec + 5, &end, 10) : SHARD_BUCKETS_AUTO_DEFAULT;
        if (spec[4] && (end == spec + 5 || *end || k < 2 || k > SHARD_BUCKETS_MAX))
            return shard_fail(err, SHARD_ERR_INVALID, "aspect_buckets: '%.100s': auto:K wants K "
                              "from 2 to %d", spec, SHARD_BUCKETS_MAX);
        b->auto_k = (size_t)k;
        return 0;
    }
    for (const char *p = spec; *p;) {
        char *end;
        long h = strtol(p, &end, 10), w = 0;
        int ok = end != p && *p >= '0' && *p <= '9' && (*end == 'x' || *end == 'X');
        const char *q = end + 1;
        if (ok) {
            w = strtol(q, &end, 10);
            ok = end != q && *q >= '0' && *q <= '9' && (!*end || (*end == ',' && end[1]));
        }
        if (!ok || h < SIDE_MIN || h > SIDE_MAX || w < SIDE_MIN || w > SIDE_MAX)
            return shard_fail(err, SHARD_ERR_INVALID, "aspect_buckets: '%.100s': wants "
                              "HEIGHTxWIDTH sizes (%d to %d pixels a side) separated by commas, "
                              "'sdxl', or 'auto[:K]'", spec, SIDE_MIN, SIDE_MAX);
        for (size_t i = 0; i < b->n; i++)
            if (b->v[i].height == h && b->v[i].width == w)
                return shard_fail(err, SHARD_ERR_INVALID, "aspect_buckets: %ldx%ld given twice",
                                  h, w);
        if (add(b, (int)h, (int)w))
            return shard_fail(err, SHARD_ERR_INVALID, "aspect_buckets: more than %d sizes",
                              SHARD_BUCKETS_MAX);
        p = *end ? end + 1 : end;
    }
    return 0;
}

size_t shard_aspect_bin(uint32_t width, uint32_t height)
{
    double r = log((double)width / (double)height);
    double at = (r + SHARD_ASPECT_LOG_MAX) / (2 * SHARD_ASPECT_LOG_MAX) * SHARD_ASPECT_BINS;
    if (!(at >= 0))
        return 0;
    return at >= SHARD_ASPECT_BINS ? SHARD_ASPECT_BINS - 1 : (size_t)at;
}

/* The log aspect at a bin's middle. */
static double bin_aspect(size_t i)
{
    return ((double)i + 0.5) / SHARD_ASPECT_BINS * (2 * SHARD_ASPECT_LOG_MAX) - SHARD_ASPECT_LOG_MAX;
}

void shard_buckets_fit(ShardBuckets *b, const uint64_t *hist, int side)
{
    size_t k = b->auto_k ? b->auto_k : SHARD_BUCKETS_AUTO_DEFAULT;
    b->n = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < SHARD_ASPECT_BINS; i++)
        total += hist[i];
    double area = (double)side * side;
    if (!total) {
        add(b, side, side);
        return;
    }
    /* group g holds the images of ranks [g * total / k, (g + 1) * total / k); its aspect is
     * the one of its middle rank */
    for (size_t g = 0; g < k; g++) {
        uint64_t lo = g * total / k, hi = (g + 1) * total / k;
        if (hi == lo)
            continue;
        uint64_t mid = lo + (hi - lo) / 2, seen = 0;
        size_t i = 0;
        while (i < SHARD_ASPECT_BINS - 1 && seen + hist[i] <= mid)
            seen += hist[i++];
        double r = exp(bin_aspect(i));
        add(b, aligned(sqrt(area / r), 8), aligned(sqrt(area * r), 8));
    }
}

size_t shard_bucket_of(const ShardBuckets *b, uint32_t width, uint32_t height)
{
    double r = log((double)width / (double)height);
    size_t best = 0;
    double bd = INFINITY;
    for (size_t i = 0; i < b->n; i++) {
        double d = fabs(r - log((double)b->v[i].width / (double)b->v[i].height));
        if (d < bd - 1e-12) {
            bd = d;
            best = i;
        }
    }
    return best;
}

/* ---- batches by bucket ------------------------------------------------------------------- */

int shard_grouper_init(ShardGrouper *g, size_t nbuckets, size_t batch)
{
    memset(g, 0, sizeof *g);
    if (!nbuckets || !batch || nbuckets > SIZE_MAX / batch / sizeof *g->pend)
        return SHARD_ERR_INVALID;
    g->pend = malloc(nbuckets * batch * sizeof *g->pend);
    g->npend = calloc(nbuckets, sizeof *g->npend);
    if (!g->pend || !g->npend) {
        shard_grouper_free(g);
        return SHARD_ERR_NOMEM;
    }
    g->nbuckets = nbuckets;
    g->batch = batch;
    return 0;
}

const ShardGroupItem *shard_grouper_add(ShardGrouper *g, size_t b, const ShardGroupItem *it)
{
    ShardGroupItem *p = g->pend + b * g->batch;
    p[g->npend[b]++] = *it;
    if (g->npend[b] < g->batch)
        return NULL;
    g->npend[b] = 0; /* the batch stays readable until the bucket's next item */
    return p;
}

const ShardGroupItem *shard_grouper_pending(const ShardGrouper *g, size_t b, size_t *n)
{
    *n = g->npend[b];
    return g->pend + b * g->batch;
}

void shard_grouper_clear(ShardGrouper *g)
{
    if (g->npend)
        memset(g->npend, 0, g->nbuckets * sizeof *g->npend);
}

void shard_grouper_free(ShardGrouper *g)
{
    free(g->pend);
    free(g->npend);
    memset(g, 0, sizeof *g);
}
