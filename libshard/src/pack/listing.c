/*
 * A folder's or a bucket prefix's names and sizes (listing.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/text.h"
#include "pack/listing.h"
#include "pack/packplandef.h"
#include "remote/store.h"

typedef struct Lister {
    ShardPackListing *l;
    const char *dir; /* as listed: a name is what follows it */
} Lister;

static int add_entry(void *cookie, const char *url, uint64_t size)
{
    Lister *x = cookie;
    ShardPackListing *l = x->l;
    size_t n = strlen(x->dir);
    /* a bucket lists a prefix without a delimiter: a nested object keeps its '/', so that
     * it never stands for an object of the folder itself */
    const char *rel = !strncmp(url, x->dir, n) ? url + n + (url[n] == '/') : shard_base_name(url);
    char *name = strdup(rel);
    if (!name || shard_array_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v, 64)) {
        free(name);
        return SHARD_ERR_NOMEM;
    }
    l->v[l->n++] = (ShardPackEntry){name, size};
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const ShardPackEntry *)a)->name, ((const ShardPackEntry *)b)->name);
}

int shard_pack_list(const ShardPackPlan *p, const char *dir, ShardPackListing *out, char *msg)
{
    memset(out, 0, sizeof *out);
    Lister x = {out, dir};
    int rc = shard_store_list(p->out, dir, add_entry, &x, msg);
    if (rc == 1)
        rc = 0; /* a folder not made yet: nothing in it */
    if (rc == SHARD_ERR_NOMEM)
        snprintf(msg, SHARD_ERROR_MAX, "%s: out of memory", dir);
    if (rc)
        shard_pack_listing_free(out);
    else if (out->n > 1) /* for lookups by name, whatever order the store lists in */
        qsort(out->v, out->n, sizeof *out->v, entry_cmp);
    return rc;
}

int shard_pack_listing_size(const ShardPackListing *l, const char *name, uint64_t *size)
{
    ShardPackEntry key = {(char *)name, 0};
    const ShardPackEntry *at = l->n ? bsearch(&key, l->v, l->n, sizeof *l->v, entry_cmp) : NULL;
    if (at && size)
        *size = at->size;
    return at != NULL;
}

void shard_pack_listing_free(ShardPackListing *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].name);
    free(l->v);
    memset(l, 0, sizeof *l);
}

