/*
 * A list's samples counted by aspect bucket (shard/image.h: shard_aspect_buckets), from the
 * shards' image sizes alone: a pass for the aspect histogram when the buckets are fitted to
 * it ("auto"), then a pass that puts each sample in its nearest bucket.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "resume/resume.h"
#include "shard/image.h"
#include "tar/columns.h"

/* Shard i's sizes into c, their width and height columns into k: 0, or an error with msg. */
static int load(const ShardList *l, size_t i, ShardRemote *remote, ShardColumns *c, int k[2],
                char *msg)
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

int shard_aspect_buckets(const ShardList *l, const char *spec, int side, ShardRemote *remote,
                         ShardAspectBucket **out, size_t *n, uint64_t *none, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    *out = NULL;
    *n = 0;
    ShardBuckets *b = malloc(sizeof *b);
    uint64_t *hist = calloc(SHARD_ASPECT_BINS, sizeof *hist), *count = NULL, empty = 0;
    int rc = b && hist ? shard_buckets_parse(b, spec, side, msg)
                       : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    for (int pass = b && b->auto_k ? 0 : 1; !rc && pass < 2; pass++) {
        if (pass == 1 && b->auto_k)
            shard_buckets_fit(b, hist, side);
        if (pass == 1 && !(count = calloc(b->n, sizeof *count)))
            rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !rc && i < shard_list_count(l); i++) {
            ShardColumns c;
            int k[2] = {-1, -1};
            if ((rc = load(l, i, remote, &c, k, msg)))
                break;
            for (uint64_t j = 0; j < c.n; j++) {
                uint32_t w = shard_columns_value(&c, j, k[0]), h = shard_columns_value(&c, j, k[1]);
                if (w == SHARD_COLUMN_NONE || h == SHARD_COLUMN_NONE || !w || !h)
                    empty += pass == 1;
                else if (pass == 0)
                    hist[shard_aspect_bin(w, h)]++;
                else
                    count[shard_bucket_of(b, w, h)]++;
            }
            shard_columns_clear(&c);
        }
    }
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
    free(hist);
    free(count);
    return rc ? shard_report(err, rc, msg) : 0;
}
