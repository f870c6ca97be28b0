/*
 * A list's samples counted by aspect bucket (shard/image.h: shard_aspect_buckets), from the
 * shards' image sizes alone: a pass for the aspect histogram when the buckets are fitted to
 * it ("auto"), then a pass that puts each sample in its nearest bucket.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "read/aspects.h"
#include "resume/resume.h"
#include "shard/image.h"
#include "tar/columns.h"

int shard_aspect_sizes(const ShardList *l, size_t i, ShardRemote *remote, ShardColumns *c,
                       int k[2], char *msg)
{
    const ShardListEntry *e = shard_list_entry(l, i);
    if (!e->columns)
        return shard_fail(msg, SHARD_ERR_NOT_FOUND, "%.300s has no image sizes beside its index "
                          "(make them: shardcat index --geometry; or let the list make indexes, "
                          "which keeps them in the index cache)", e->url);
    int rc = shard_columns_load(c, e->columns, remote, msg);
    if (rc == SHARD_ERR_NOT_FOUND)
        shard_fail(msg, rc, "%.300s: gone since the list was made", e->columns);
    if (rc)
        return rc;
    k[0] = shard_columns_find(c, "width");
    k[1] = shard_columns_find(c, "height");
    if (k[0] < 0 || k[1] < 0)
        rc = shard_fail(msg, SHARD_ERR_FORMAT, "%.300s: no width and height columns", e->columns);
    else if (e->nsamples != SHARD_COUNT_UNKNOWN && c->n != e->nsamples)
        rc = shard_fail(msg, SHARD_ERR_FORMAT, "%.300s lists %llu samples, the shard has %llu "
                        "(make them again: shardcat index --geometry)", e->columns,
                        (unsigned long long)c->n, (unsigned long long)e->nsamples);
    if (rc)
        shard_columns_clear(c);
    return rc;
}

/* Calls each(ctx, width, height) for every sample of the list with a size; *none counts
 * those without. 0, or an error with msg. */
static int each_size(const ShardList *l, ShardRemote *remote,
                     void (*each)(void *ctx, uint32_t w, uint32_t h), void *ctx, uint64_t *none,
                     char *msg)
{
    int rc = 0;
    for (size_t i = 0; !rc && i < shard_list_count(l); i++) {
        ShardColumns c;
        int k[2];
        if ((rc = shard_aspect_sizes(l, i, remote, &c, k, msg)))
            break;
        for (uint64_t j = 0; j < c.n; j++) {
            uint32_t w = shard_columns_value(&c, j, k[0]), h = shard_columns_value(&c, j, k[1]);
            if (w == SHARD_COLUMN_NONE || h == SHARD_COLUMN_NONE || !w || !h)
                *none += 1;
            else
                each(ctx, w, h);
        }
        shard_columns_clear(&c);
    }
    return rc;
}

static void to_histogram(void *ctx, uint32_t w, uint32_t h)
{
    ((uint64_t *)ctx)[shard_aspect_bin(w, h)]++;
}

int shard_aspect_fit(const ShardList *l, ShardBuckets *b, int side, ShardRemote *remote,
                     char *msg)
{
    uint64_t *hist = calloc(SHARD_ASPECT_BINS, sizeof *hist), none = 0;
    if (!hist)
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    int rc = each_size(l, remote, to_histogram, hist, &none, msg);
    if (!rc)
        shard_buckets_fit(b, hist, side);
    free(hist);
    return rc;
}

typedef struct Counting {
    const ShardBuckets *b;
    uint64_t *count;
} Counting;

static void to_bucket(void *ctx, uint32_t w, uint32_t h)
{
    Counting *c = ctx;
    c->count[shard_bucket_of(c->b, w, h)]++;
}

int shard_aspect_buckets(const ShardList *l, const char *spec, int side, ShardRemote *remote,
                         ShardAspectBucket **out, size_t *n, uint64_t *none, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    *out = NULL;
    *n = 0;
    ShardBuckets *b = malloc(sizeof *b);
    uint64_t *count = NULL, empty = 0;
    int rc = b ? shard_buckets_parse(b, spec, side, msg)
               : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    if (!rc && b->auto_k) /* a pass for the aspect histogram, then one to count */
        rc = shard_aspect_fit(l, b, side, remote, msg);
    if (!rc && !(count = calloc(b->n, sizeof *count)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = each_size(l, remote, to_bucket, &(Counting){b, count}, &empty, msg);
    if (!rc && !(*out = malloc(b->n * sizeof **out)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < b->n; i++)
        (*out)[i] = (ShardAspectBucket){b->v[i].height, b->v[i].width, count[i]};
    if (!rc) {
        *n = b->n;
        if (none)
            *none = empty;
    }
    free(b);
    free(count);
    return rc ? shard_report(err, rc, msg) : 0;
}

int shard_aspect_side(int width, int height)
{
    return (int)(sqrt((double)width * height) + 0.5);
}
