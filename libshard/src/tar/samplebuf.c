/*
 * A sample being read (samplebuf.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "shard/common.h"
#include "shard/names.h"
#include "tar/samplebuf.h"

void shard_sb_reset(ShardSampleBuf *sb)
{
    for (size_t i = 0; i < sb->n; i++)
        shard_hold_put(sb->recs[i].hold);
    sb->n = 0;
    sb->declared = 0;
    sb->arena.len = 0;
    sb->key.len = 0;
    sb->ftab_stale = 1;
}

ShardFieldRec *shard_sb_add(ShardSampleBuf *sb, const char *name, const char *member, int lower)
{
    if (sb->n == sb->cap) {
        size_t cap = sb->cap, vcap = sb->cap; /* the two grow alike */
        if (shard_array_grow(&sb->recs, &cap, sb->n + 1, sizeof *sb->recs, 8) ||
            shard_array_grow(&sb->views, &vcap, sb->n + 1, sizeof *sb->views, 8))
            return NULL;
        sb->cap = cap;
    }
    ShardFieldRec *rec = &sb->recs[sb->n];
    memset(rec, 0, sizeof *rec);
    size_t nlen = strlen(name) + 1, mlen = strlen(member) + 1;
    if (nlen > SIZE_MAX - mlen || shard_sb_reserve(sb, nlen + mlen))
        return NULL;
    char *at = (char *)sb->arena.data + sb->arena.len;
    memcpy(at, name, nlen);
    memcpy(at + nlen, member, mlen);
    if (lower)
        for (char *c = at; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
    rec->name = sb->arena.len;
    rec->member = sb->arena.len + nlen;
    sb->arena.len += nlen + mlen;
    rec->data = sb->arena.len;
    sb->n++;
    return rec;
}

int shard_sb_reserve(ShardSampleBuf *sb, size_t extra)
{
    ShardBuf *a = &sb->arena;
    if (a->cap - a->len >= extra)
        return 0;
    if (!sb->pool || extra > SIZE_MAX - a->len)
        return shard_buf_reserve(a, extra);
    size_t cap;
    unsigned char *b = shard_block_get(sb->pool, a->len + extra, &cap);
    if (!b)
        return SHARD_ERR_NOMEM;
    if (a->len)
        memcpy(b, a->data, a->len);
    shard_block_put(sb->pool, a->data, a->cap);
    a->data = b;
    a->cap = cap;
    return 0;
}

unsigned char *shard_sb_room(ShardSampleBuf *sb, size_t n)
{
    return shard_sb_reserve(sb, n) ? NULL : sb->arena.data + sb->arena.len;
}

int shard_sb_append(ShardSampleBuf *sb, const void *p, size_t n)
{
    unsigned char *dst = shard_sb_room(sb, n);
    if (!dst)
        return SHARD_ERR_NOMEM;
    if (p)
        memcpy(dst, p, n);
    else
        memset(dst, 0, n);
    shard_sb_grew(sb, n);
    return 0;
}

int shard_sb_unview(ShardSampleBuf *sb, ShardFieldRec *rec)
{
    size_t at = sb->arena.len;
    if (shard_sb_append(sb, rec->view, (size_t)rec->size))
        return SHARD_ERR_NOMEM; /* the record is still the view it was */
    rec->data = at;
    rec->view = NULL;
    shard_hold_put(rec->hold);
    rec->hold = NULL;
    return 0;
}

int shard_sb_set_key(ShardSampleBuf *sb, const char *key, size_t n)
{
    sb->key.len = 0;
    if (shard_buf_append(&sb->key, key, n) || shard_buf_append(&sb->key, "", 1))
        return SHARD_ERR_NOMEM;
    return 0;
}

const char *shard_sb_name(const ShardSampleBuf *sb, size_t i)
{
    return (const char *)sb->arena.data + sb->recs[i].name;
}

/* fields of one sample compared one by one; past this many, found through a hash table */
#define FIELD_SCAN 16

static uint64_t name_hash(const char *s, int lower)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (lower && c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        h = (h ^ c) * 0x100000001b3ull;
    }
    return h;
}

long shard_sb_find(ShardSampleBuf *sb, const char *field, int lowercase)
{
    if (sb->n < FIELD_SCAN) {
        for (size_t i = 0; i < sb->n; i++)
            if (shard_field_equal(shard_sb_name(sb, i), field, lowercase))
                return (long)i;
        return -1;
    }
    if (sb->ftab_stale || sb->n * 2 > sb->fcap) {
        size_t cap = shard_grow_cap(sb->fcap, sb->n * 2, 64, sizeof *sb->ftab);
        uint32_t *tab = cap == sb->fcap ? sb->ftab : cap ? realloc(sb->ftab, cap * sizeof *tab) : NULL;
        if (!tab)
            return -2;
        sb->ftab = tab;
        sb->fcap = cap;
        memset(tab, 0, cap * sizeof *tab);
        sb->ftab_stale = 0;
        sb->findexed = 0;
    }
    for (; sb->findexed < sb->n; sb->findexed++) { /* the fields added since */
        size_t j = name_hash(shard_sb_name(sb, sb->findexed), lowercase) & (sb->fcap - 1);
        while (sb->ftab[j])
            j = (j + 1) & (sb->fcap - 1);
        sb->ftab[j] = (uint32_t)sb->findexed + 1;
    }
    for (size_t j = name_hash(field, lowercase) & (sb->fcap - 1); sb->ftab[j];
         j = (j + 1) & (sb->fcap - 1))
        if (shard_field_equal(shard_sb_name(sb, sb->ftab[j] - 1), field, lowercase))
            return (long)sb->ftab[j] - 1;
    return -1;
}

const ShardSampleView *shard_sb_publish(ShardSampleBuf *sb, const char *url, uint64_t index,
                                        uint64_t offset)
{
    for (size_t i = 0; i < sb->n; i++) {
        ShardFieldRec *r = &sb->recs[i];
        ShardFieldView *v = &sb->views[i];
        v->name = (const char *)sb->arena.data + r->name;
        v->member = (const char *)sb->arena.data + r->member;
        v->data = r->data == SIZE_MAX ? r->view : sb->arena.data + r->data;
        v->size = r->size;
        v->offset = r->offset;
    }
    sb->sample.key = sb->key.len ? (const char *)sb->key.data : "";
    sb->sample.url = url;
    sb->sample.index = index;
    sb->sample.offset = offset;
    sb->sample.fields = sb->views;
    sb->sample.nfields = sb->n;
    return &sb->sample;
}

void shard_sb_free(ShardSampleBuf *sb)
{
    shard_sb_reset(sb);
    shard_buf_free(&sb->arena);
    shard_buf_free(&sb->key);
    free(sb->recs);
    free(sb->views);
    free(sb->ftab);
    memset(sb, 0, sizeof *sb);
}
