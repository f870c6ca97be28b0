/*
 * Reusable buffers for decoding and resampling, one set per decode thread (scratch.c): no
 * allocation per sample once they have grown to the largest image the thread has seen.
 */
#ifndef SHARD_DECODE_SCRATCH_H
#define SHARD_DECODE_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"

enum {
    SHARD_SCR_PIXELS, /* the decoded image (or box of it) */
    SHARD_SCR_ROWS,   /* row pointers for libjpeg */
    SHARD_SCR_CMYK,   /* one CMYK row */
    SHARD_SCR_RESIZED, SHARD_SCR_HB, SHARD_SCR_HK, SHARD_SCR_VB, SHARD_SCR_VK, SHARD_SCR_KD,
    SHARD_SCR_BAND, SHARD_SCR_START, SHARD_SCR_KV, SHARD_SCR_ROWF, SHARD_SCR_VW, SHARD_SCR_VROW,
    SHARD_SCR_ROWOUT, SHARD_SCR_KH, SHARD_SCR_TMP, SHARD_SCR_ACC, SHARD_SCR_RGB,
    SHARD_SCRATCH_N
};

/* Zero-initialize. */
struct ShardGate;
typedef struct ShardScratch {
    void *buf[SHARD_SCRATCH_N];
    size_t cap[SHARD_SCRATCH_N];
    void *jpeg;                   /* a reusable libjpeg decompressor (transform.c), or NULL */
    void (*jpeg_free)(void *jpeg);
    int simd;                     /* resize.c: the SIMD level in use plus 1; 0 until known */
    struct ShardGate *gate;       /* decodes wait here for memory (borrowed), or NULL */
    uint64_t admitted;            /* bytes held in the gate for the decode under way */
} ShardScratch;

/* Buffer `which`, at least size bytes, 64-byte aligned, contents undefined; NULL when out
 * of memory. Valid until the next call for the same buffer. */
SHARD_HIDDEN void *shard_scratch(ShardScratch *s, int which, size_t size);
/* Hands buffer `which` to the caller (free() it); the scratch forgets it. */
SHARD_HIDDEN void *shard_scratch_take(ShardScratch *s, int which);
/* Frees the largest buffers until those kept add up to keep bytes at most (they grow again
 * if needed). */
SHARD_HIDDEN void shard_scratch_trim(ShardScratch *s, size_t keep);
SHARD_HIDDEN void shard_scratch_release(ShardScratch *s);
/* A decode of what (an image of w x h pixels) that will take bytes: refused over limit
 * (SHARD_ERR_DECODE, msg naming max_decode_memory), else admitted through the scratch's
 * gate (waiting for room) until shard_scratch_settle. */
SHARD_HIDDEN int shard_scratch_admit(ShardScratch *s, uint64_t bytes, uint64_t limit,
                                     const char *what, uint64_t w, uint64_t h, char *msg,
                                     size_t msgsize);
/* The decode is over: its bytes leave the gate. */
SHARD_HIDDEN void shard_scratch_settle(ShardScratch *s);

#endif /* SHARD_DECODE_SCRATCH_H */
