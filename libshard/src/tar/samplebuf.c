/*
 * A sample being read (samplebuf.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "shard/common.h"
#include "tar/samplebuf.h"

void shard_sb_reset(ShardSampleBuf *sb)
{
    for (size_t i = 0; i < sb->n; i++)
        shard_hold_put(sb->recs[i].hold);
    sb->n = 0;
    sb->arena.len = 0;
    sb->key.len = 0;
}

static int arena_str(ShardSampleBuf *sb, const char *s, size_t *off, int lower)
{
    *off = sb->arena.len;
    if (shard_buf_append(&sb->arena, s, strlen(s) + 1))
        return SHARD_ERR_NOMEM;
    if (lower)
        for (char *p = (char *)sb->arena.data + *off; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
    return 0;
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
    if (arena_str(sb, name, &rec->name, lower) || arena_str(sb, member, &rec->member, 0))
        return NULL;
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
    memset(sb, 0, sizeof *sb);
}
