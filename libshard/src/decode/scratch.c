/*
 * Per-thread decode buffers (scratch.h): each decode thread keeps one ShardScratch, so the
 * buffers a sample needs (decoded pixels, filter weights, rows of sums) are allocated for
 * the first samples and reused after; they grow to the largest image the thread has seen.
 */
#include <stdlib.h>

#include "base/buf.h"
#include "decode/scratch.h"



void *shard_scratch(ShardScratch *s, int which, size_t size)
{
    if (size <= s->cap[which] && s->buf[which])
        return s->buf[which];
    size_t cap = shard_grow_cap(s->cap[which], size, 4096, 1);
    void *p = cap ? aligned_alloc(64, cap) : NULL; /* cap is a power of two times 4096 */
    if (!p)
        return NULL;
    free(s->buf[which]);
    s->buf[which] = p;
    s->cap[which] = cap;
    return p;
}

void *shard_scratch_take(ShardScratch *s, int which)
{
    void *p = s->buf[which];
    s->buf[which] = NULL;
    s->cap[which] = 0;
    return p;
}

void shard_scratch_trim(ShardScratch *s, size_t keep)
{
    for (int i = 0; i < SHARD_SCRATCH_N; i++)
        if (s->cap[i] > keep) {
            free(s->buf[i]);
            s->buf[i] = NULL;
            s->cap[i] = 0;
        }
}

void shard_scratch_release(ShardScratch *s)
{
    for (int i = 0; i < SHARD_SCRATCH_N; i++) {
        free(s->buf[i]);
        s->buf[i] = NULL;
        s->cap[i] = 0;
    }
    if (s->jpeg && s->jpeg_free)
        s->jpeg_free(s->jpeg);
    s->jpeg = NULL;
}
