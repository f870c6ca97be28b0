/*
 * The owned sample (shard/sample.h's ShardItem) as the stages see it: the view first (so
 * a ShardItem * is its view), where it came from, and what keeps its bytes alive. Items
 * also carry the fetch stage's end and error markers through the same queues.
 */
#ifndef SHARD_TAR_ITEM_H
#define SHARD_TAR_ITEM_H

#include "base/attr.h"
#include "base/blockpool.h"
#include "base/buf.h"
#include "shard/sample.h"
#include "source/source.h"

enum { SHARD_ITEM_SAMPLE, SHARD_ITEM_END, SHARD_ITEM_ERROR };

struct ShardItem {
    ShardSampleView v;   /* first: key, url, index, offset, fields */
    int kind;            /* SHARD_ITEM_* */
    uint32_t shard;      /* the sample's shard in the reader's list */
    int repeat;          /* padding: a repeat of a sample from the start of the epoch */
    uint32_t round;      /* which reading of the sample in the epoch (ShardSegment.round) */
    uint64_t position;   /* samples the reader yielded before this one in the epoch */
    uint32_t bucket;     /* aspect bucket + 1 (read/bucketline.c), 0: none */
    int batch_end;       /* bucketed: the last of its batch */
    uint32_t stream;     /* the fetch stream that read it, and its segment's number there */
    uint64_t segno;
    void *block;         /* field views, names, members, key, url and copied data */
    size_t block_size, block_cap;
    void *arena;         /* a sample reader's arena taken over: copied data, or NULL */
    size_t arena_cap;
    ShardBlockPool *pool; /* where block and arena go back to (a reference), or NULL */
    ShardHold *hold;     /* keeps the viewed fields' bytes valid, or NULL */
    char *error;         /* SHARD_ITEM_ERROR: what went wrong */
    int code;            /* SHARD_ITEM_ERROR: its code (0: SHARD_ERR_FORMAT) */
};

/* An owned copy of v: field i stays a view where holds (NULL: none) gives it a hold, the
 * same as the first field's that has one (the item takes its own reference); the rest is
 * copied into the item's block, taken from pool (NULL: malloc; the item takes a reference).
 * NULL when out of memory. */
SHARD_HIDDEN ShardItem *shard_item_new(const ShardSampleView *v, ShardHold *const *holds,
                                       uint32_t shard, ShardBlockPool *pool);
/* shard_item_new, without copying the fields whose data lie in arena: the item takes
 * arena's buffer over (given back to pool when released), leaving arena empty. NULL when
 * out of memory (arena then unchanged). */
SHARD_HIDDEN ShardItem *shard_item_adopt(const ShardSampleView *v, ShardHold *const *holds,
                                         uint32_t shard, ShardBlockPool *pool, ShardBuf *arena);
/* A sample known only by its identity (shard, index in it), as a replay tracks it. */
SHARD_HIDDEN ShardItem *shard_item_identity(uint32_t shard, uint64_t index);
/* An end or error marker (error copied, may be NULL). */
SHARD_HIDDEN ShardItem *shard_item_marker(int kind, const char *error);
/* Whether field i is a view into held storage (not the item's own copy). */
SHARD_HIDDEN int shard_item_is_view(const ShardItem *it, size_t i);
/* The bytes of its fields, added up (0 for a marker or an identity). */
SHARD_HIDDEN uint64_t shard_item_bytes(const ShardItem *it);
/* Copies the viewed bytes into the item and lets go of the hold. */
SHARD_HIDDEN int shard_item_detach(ShardItem *it);
/* Frees an item; accepts NULL. */
SHARD_HIDDEN void shard_item_release(ShardItem *it);

#endif /* SHARD_TAR_ITEM_H */
