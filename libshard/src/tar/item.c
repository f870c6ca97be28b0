/*
 * Owned samples (item.h, shard/sample.h): one block per item holds the field views, their
 * names and members, the key, the url and every byte that is not a view into held storage.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "shard/common.h"
#include "tar/item.h"

/* Builds it's block from v: field i's data are copied unless keep[i]. */
static int build_block(ShardItem *it, const ShardSampleView *v, const unsigned char *keep)
{
    size_t n = v->nfields;
    size_t need = n * sizeof(ShardFieldView) + strlen(v->key) + 1 + strlen(v->url) + 1;
    for (size_t i = 0; i < n; i++)
        need += strlen(v->fields[i].name) + 1 + strlen(v->fields[i].member) + 1 +
                (keep[i] ? 0 : (size_t)v->fields[i].size);
    size_t cap;
    char *block = shard_block_get(it->pool, need, &cap);
    if (!block)
        return SHARD_ERR_NOMEM;
    ShardFieldView *out = (ShardFieldView *)block;
    char *p = block + n * sizeof(ShardFieldView);
    for (size_t i = 0; i < n; i++) {
        ShardFieldView *fv = &out[i];
        *fv = v->fields[i];
        size_t k = strlen(v->fields[i].name) + 1;
        memcpy(p, v->fields[i].name, k);
        fv->name = p;
        p += k;
        k = strlen(v->fields[i].member) + 1;
        memcpy(p, v->fields[i].member, k);
        fv->member = p;
        p += k;
        if (!keep[i]) {
            if (v->fields[i].size)
                memcpy(p, v->fields[i].data, (size_t)v->fields[i].size);
            fv->data = (const unsigned char *)p;
            p += v->fields[i].size;
        }
    }
    size_t k = strlen(v->key) + 1;
    memcpy(p, v->key, k);
    memcpy(p + k, v->url, strlen(v->url) + 1);
    shard_block_put(it->pool, it->block, it->block_cap); /* v may view it: read above */
    it->v.key = p;
    it->v.url = p + k;
    it->v.index = v->index;
    it->v.offset = v->offset;
    it->v.fields = out;
    it->v.nfields = n;
    it->block = block;
    it->block_size = need;
    it->block_cap = cap;
    return 0;
}

/* An item for v whose block copies every field except those with the first hold found
 * and those whose data lie in [lo, hi). */
static ShardItem *make(const ShardSampleView *v, ShardHold *const *holds, uint32_t shard,
                       ShardBlockPool *pool, const unsigned char *lo, const unsigned char *hi)
{
    ShardItem *it = calloc(1, sizeof *it);
    unsigned char small[16] = {0};
    unsigned char *keep = v->nfields <= sizeof small ? small : calloc(v->nfields, 1);
    if (!it || !keep) {
        free(it);
        if (keep != small)
            free(keep);
        return NULL;
    }
    it->pool = shard_block_pool_ref(pool);
    ShardHold *hold = NULL;
    for (size_t i = 0; i < v->nfields; i++) {
        ShardHold *h = holds ? holds[i] : NULL;
        if (h && !hold)
            hold = h;
        const unsigned char *d = v->fields[i].data;
        keep[i] = !d || (h && h == hold) || (d >= lo && d < hi); /* !d: headers only */
    }
    int rc = build_block(it, v, keep);
    if (keep != small)
        free(keep);
    if (rc) {
        shard_block_pool_unref(it->pool);
        free(it);
        return NULL;
    }
    it->kind = SHARD_ITEM_SAMPLE;
    it->shard = shard;
    it->hold = shard_hold_ref(hold);
    return it;
}

ShardItem *shard_item_new(const ShardSampleView *v, ShardHold *const *holds, uint32_t shard,
                          ShardBlockPool *pool)
{
    return make(v, holds, shard, pool, NULL, NULL);
}

ShardItem *shard_item_adopt(const ShardSampleView *v, ShardHold *const *holds, uint32_t shard,
                            ShardBlockPool *pool, ShardBuf *arena)
{
    ShardItem *it = make(v, holds, shard, pool, arena->data, arena->data + arena->len);
    if (it) {
        it->arena = arena->data;
        it->arena_cap = arena->cap;
        *arena = (ShardBuf){0};
    }
    return it;
}

ShardItem *shard_item_identity(uint32_t shard, uint64_t index)
{
    ShardItem *it = calloc(1, sizeof *it);
    if (it) {
        it->kind = SHARD_ITEM_SAMPLE;
        it->shard = shard;
        it->v.index = index;
        it->v.key = it->v.url = "";
    }
    return it;
}

ShardItem *shard_item_marker(int kind, const char *error)
{
    ShardItem *it = calloc(1, sizeof *it);
    if (it) {
        it->kind = kind;
        it->v.key = it->v.url = "";
        it->error = error ? strdup(error) : NULL;
    }
    return it;
}

int shard_item_is_view(const ShardItem *it, size_t i)
{
    const unsigned char *d = it->v.fields[i].data, *b = it->block;
    return it->hold && !(d >= b && d < b + it->block_size) && it->v.fields[i].size;
}

uint64_t shard_item_bytes(const ShardItem *it)
{
    uint64_t n = 0;
    for (size_t i = 0; i < it->v.nfields; i++)
        n += it->v.fields[i].size;
    return n;
}

int shard_item_detach(ShardItem *it)
{
    if (!it->hold)
        return 0;
    unsigned char none[16] = {0};
    unsigned char *keep = it->v.nfields <= sizeof none ? none : calloc(it->v.nfields, 1);
    ShardSampleView v = it->v; /* build_block rewrites it->v */
    int rc = keep ? build_block(it, &v, keep) : SHARD_ERR_NOMEM;
    if (keep != none)
        free(keep);
    if (rc)
        return rc;
    shard_hold_put(it->hold);
    it->hold = NULL;
    return 0;
}

void shard_item_release(ShardItem *it)
{
    if (!it)
        return;
    shard_hold_put(it->hold);
    shard_block_put(it->pool, it->block, it->block_cap);
    shard_block_put(it->pool, it->arena, it->arena_cap);
    shard_block_pool_unref(it->pool);
    free(it->error);
    free(it);
}

const ShardSampleView *shard_item_sample(const ShardItem *it) { return &it->v; }

void shard_item_free(ShardItem **it)
{
    if (it) {
        shard_item_release(*it);
        *it = NULL;
    }
}
