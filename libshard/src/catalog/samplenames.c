/*
 * Samples named from their shards' indexes (samplenames.h). A step's samples come from the
 * few shards the streams and the shuffle buffer hold at once, so a handful of indexes,
 * the least recently asked replaced, serve a whole epoch read in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "catalog/samplenames.h"
#include "shard/file.h"
#include "shard/names.h"
#include "tar/idx.h"

typedef struct NamesSlot {
    int64_t shard; /* -1: empty */
    uint64_t used; /* when last asked */
    ShardIndex idx;
} NamesSlot;

struct ShardNames {
    const ShardList *list;
    ShardRemote *remote;
    NamesSlot *slot;
    size_t n;
    uint64_t clock, reads;
    char *key; /* the last key given */
    size_t key_cap;
};

ShardNames *shard_names_new(const ShardList *l, ShardRemote *remote, size_t keep)
{
    ShardNames *n = calloc(1, sizeof *n);
    if (!n || !(n->slot = calloc(keep ? keep : 1, sizeof *n->slot))) {
        free(n);
        return NULL;
    }
    n->list = l;
    n->remote = remote;
    n->n = keep ? keep : 1;
    for (size_t i = 0; i < n->n; i++)
        n->slot[i].shard = -1;
    return n;
}

void shard_names_free(ShardNames **pn)
{
    ShardNames *n = *pn;
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++)
        if (n->slot[i].shard >= 0)
            shard_index_clear(&n->slot[i].idx);
    free(n->slot);
    free(n->key);
    free(n);
    *pn = NULL;
}

uint64_t shard_names_reads(const ShardNames *n) { return n->reads; }

/* The slot holding shard's index, read into the least recently asked one if none does. */
static NamesSlot *index_of(ShardNames *n, uint32_t shard, char *err)
{
    NamesSlot *old = &n->slot[0]; /* an empty slot, else the least recently asked */
    for (size_t i = 0; i < n->n; i++) {
        NamesSlot *s = &n->slot[i];
        if (s->shard == (int64_t)shard)
            return s;
        if (old->shard >= 0 && (s->shard < 0 || s->used < old->used))
            old = s;
    }
    if (old->shard >= 0) {
        shard_index_clear(&old->idx);
        old->shard = -1;
    }
    const ShardListEntry *e = shard_list_entry(n->list, shard);
    char *beside = e->index ? NULL : shard_index_path(e->url);
    const char *url = e->index ? e->index : beside;
    if (!url) {
        snprintf(err, SHARD_ERROR_MAX, "out of memory");
        return NULL;
    }
    char why[SHARD_ERROR_MAX];
    int rc = shard_index_load(&old->idx, url, n->remote, NULL, why);
    if (rc == SHARD_ERR_NOT_FOUND)
        snprintf(err, SHARD_ERROR_MAX, "%s has no index (%s) to name its samples from: "
                 "make one (shardcat index, or make_indexes 'always')", e->url, url);
    else if (rc)
        snprintf(err, SHARD_ERROR_MAX, "%.200s: %.800s", url, why);
    free(beside);
    if (rc)
        return NULL;
    n->reads++;
    old->shard = shard;
    return old;
}

int shard_names_key(ShardNames *n, uint32_t shard, uint64_t index, const char **key, char *err)
{
    NamesSlot *s = index_of(n, shard, err);
    if (!s)
        return SHARD_ERR_FORMAT;
    s->used = ++n->clock;
    const ShardIndex *x = &s->idx;
    const char *url = shard_list_entry(n->list, shard)->url;
    if (index >= x->nsamples) {
        snprintf(err, SHARD_ERROR_MAX, "%s: sample %llu asked of an index of %llu", url,
                 (unsigned long long)index, (unsigned long long)x->nsamples);
        return SHARD_ERR_FORMAT;
    }
    const char *member = x->entries[x->first[index]].name;
    if (!member) {
        snprintf(err, SHARD_ERROR_MAX, "%s: its index is DALI's v1.1, which names no member: "
                 "make a v1.2 one (shardcat index) to name its samples", url);
        return SHARD_ERR_UNSUPPORTED;
    }
    size_t at, len;
    const char *field;
    if (shard_name_split(member, &at, &len, &field)) {
        snprintf(err, SHARD_ERROR_MAX, "%s: sample %llu's member '%s' is no sample field", url,
                 (unsigned long long)index, member);
        return SHARD_ERR_FORMAT;
    }
    if (len + 1 > n->key_cap) {
        char *k = realloc(n->key, len + 1);
        if (!k) {
            snprintf(err, SHARD_ERROR_MAX, "out of memory");
            return SHARD_ERR_NOMEM;
        }
        n->key = k;
        n->key_cap = len + 1;
    }
    memcpy(n->key, member + at, len);
    n->key[len] = 0;
    *key = n->key;
    return 0;
}
