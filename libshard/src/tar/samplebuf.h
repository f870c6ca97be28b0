/*
 * A sample being read (tar.c, indexed.c), published to callers as a ShardSampleView: field
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
    ShardSampleView sample;
} ShardSampleBuf;

/* Starts a new sample: drops the last one's fields, key and holds. */
SHARD_HIDDEN void shard_sb_reset(ShardSampleBuf *sb);
/* Adds a field named name (lower-cased when lower) for member; its data still to come.
 * Returns the record, or NULL when out of memory. */
SHARD_HIDDEN ShardFieldRec *shard_sb_add(ShardSampleBuf *sb, const char *name, const char *member,
                                         int lower);
/* Makes room for extra more bytes in the arena, in one step. */
SHARD_HIDDEN int shard_sb_reserve(ShardSampleBuf *sb, size_t extra);
/* Sets the key from n bytes at key. */
SHARD_HIDDEN int shard_sb_set_key(ShardSampleBuf *sb, const char *key, size_t n);
/* The name of field i as added (lower-cased when asked). */
SHARD_HIDDEN const char *shard_sb_name(const ShardSampleBuf *sb, size_t i);
/* Whether the sample has a key yet. */
static inline int shard_sb_has_key(const ShardSampleBuf *sb) { return sb->key.len != 0; }
/* Points the views at the records' bytes and fills the sample view. */
SHARD_HIDDEN const ShardSampleView *shard_sb_publish(ShardSampleBuf *sb, const char *url,
                                                     uint64_t index, uint64_t offset);
SHARD_HIDDEN void shard_sb_free(ShardSampleBuf *sb);

#endif /* SHARD_TAR_SAMPLEBUF_H */
