/*
 * A sample being read (tar.c, seek.c), published to callers as a ShardSampleView: field
 * names, members and copied data in one arena reused from sample to sample, or data viewed
 * where the source keeps them (with a hold, released when the next sample begins).
 */
#ifndef SHARD_TAR_SAMPLEBUF_H
#define SHARD_TAR_SAMPLEBUF_H

#include "base/attr.h"
#include "base/blockpool.h"
#include "base/buf.h"
#include "shard/sample.h"
#include "source/source.h"

typedef struct ShardFieldRec {
    size_t name, member; /* offsets into the arena */
    size_t data;         /* offset into the arena, or SIZE_MAX when view is set */
    const unsigned char *view;
    ShardHold *hold;     /* keeps view valid, or NULL */
    uint64_t size, offset;
} ShardFieldRec;

typedef struct ShardSampleBuf {
    ShardBuf arena;
    ShardBlockPool *pool; /* where the arena grows from (borrowed), or NULL: realloc */
    ShardBuf key;        /* the key, NUL-terminated once set */
    ShardFieldRec *recs;
    ShardFieldView *views;
    size_t n, cap;
    uint64_t declared;    /* the fields' declared sizes added up (the sample limit's) */
    ShardSampleView sample;
    uint32_t *ftab;       /* the fields by name hash (index + 1; 0 empty), for many fields */
    size_t fcap, findexed; /* its size, and how many of the fields it holds */
    int ftab_stale;       /* it holds the last sample's */
} ShardSampleBuf;

/* Starts a new sample: drops the last one's fields, key and holds. */
SHARD_HIDDEN void shard_sb_reset(ShardSampleBuf *sb);
/* Adds a field named name (lower-cased when lower) for member; its data still to come.
 * Returns the record, or NULL when out of memory. */
SHARD_HIDDEN ShardFieldRec *shard_sb_add(ShardSampleBuf *sb, const char *name, const char *member,
                                         int lower);
/* Makes room for extra more bytes in the arena, in one step. */
SHARD_HIDDEN int shard_sb_reserve(ShardSampleBuf *sb, size_t extra);
/* Where the next n bytes of the field being read go (room made for them), to be written
 * there and then counted with shard_sb_grew; NULL when out of memory. */
SHARD_HIDDEN unsigned char *shard_sb_room(ShardSampleBuf *sb, size_t n);
/* The n bytes written at shard_sb_room are the field's. */
static inline void shard_sb_grew(ShardSampleBuf *sb, size_t n) { sb->arena.len += n; }
/* Appends n bytes to the field being read: copied from p, or zeros (p NULL). */
SHARD_HIDDEN int shard_sb_append(ShardSampleBuf *sb, const void *p, size_t n);
/* The bytes of rec (the field being read) copied into the arena so far. */
static inline uint64_t shard_sb_copied(const ShardSampleBuf *sb, const ShardFieldRec *rec)
{
    return sb->arena.len - rec->data;
}
/* rec's data, a view so far, copied into the arena (its hold let go): the field's next bytes
 * follow them there. */
SHARD_HIDDEN int shard_sb_unview(ShardSampleBuf *sb, ShardFieldRec *rec);
/* Sets the key from n bytes at key. */
SHARD_HIDDEN int shard_sb_set_key(ShardSampleBuf *sb, const char *key, size_t n);
/* The sample's field named field (compared as lowercase says), or -1; -2 when out of
 * memory. A sample of many fields is searched through a hash table kept up to date. */
SHARD_HIDDEN long shard_sb_find(ShardSampleBuf *sb, const char *field, int lowercase);
/* The name of field i as added (lower-cased when asked). */
SHARD_HIDDEN const char *shard_sb_name(const ShardSampleBuf *sb, size_t i);
/* Whether the sample has a key yet. */
static inline int shard_sb_has_key(const ShardSampleBuf *sb) { return sb->key.len != 0; }
/* Points the views at the records' bytes and fills the sample view. */
SHARD_HIDDEN const ShardSampleView *shard_sb_publish(ShardSampleBuf *sb, const char *url,
                                                     uint64_t index, uint64_t offset);
SHARD_HIDDEN void shard_sb_free(ShardSampleBuf *sb);

#endif /* SHARD_TAR_SAMPLEBUF_H */
