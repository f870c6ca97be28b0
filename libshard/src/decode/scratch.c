/*
 * Per-thread decode buffers (scratch.h): each decode thread keeps one ShardScratch, so the
 * buffers a sample needs (decoded pixels, filter weights, rows of sums) are allocated for
 * the first samples and reused after; they grow to the largest image the thread has seen.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/gate.h"
#include "decode/scratch.h"
#include "shard/common.h"

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
    for (;;) { /* the largest buffer let go until those kept add up to keep at most */
        size_t total = 0;
        int largest = 0;
        for (int i = 0; i < SHARD_SCRATCH_N; i++) {
            total += s->cap[i];
            largest = s->cap[i] > s->cap[largest] ? i : largest;
        }
        if (total <= keep)
            return;
        free(s->buf[largest]);
        s->buf[largest] = NULL;
        s->cap[largest] = 0;
    }
}

void shard_scratch_release(ShardScratch *s)
{
    shard_scratch_settle(s);
    for (int i = 0; i < SHARD_SCRATCH_N; i++) {
        free(s->buf[i]);
        s->buf[i] = NULL;
        s->cap[i] = 0;
    }
    if (s->jpeg && s->jpeg_free)
        s->jpeg_free(s->jpeg);
    s->jpeg = NULL;
}

int shard_scratch_admit(ShardScratch *s, uint64_t bytes, uint64_t limit, const char *what,
                        uint64_t w, uint64_t h, char *msg, size_t msgsize)
{
    if (bytes > limit) {
        if (msg)
            snprintf(msg, msgsize, "%s of %llux%llu pixels needs %llu bytes to decode, more "
                     "than the limit of %llu (max_decode_memory)", what, (unsigned long long)w,
                     (unsigned long long)h, (unsigned long long)bytes, (unsigned long long)limit);
        return SHARD_ERR_DECODE;
    }
    if (s->gate && bytes > s->gate->cap) { /* it would wait forever, or overrun the gate */
        if (msg)
            snprintf(msg, msgsize, "%s of %llux%llu pixels needs %llu bytes to decode, more "
                     "than the decode threads' budget of %llu (decode_memory)", what,
                     (unsigned long long)w, (unsigned long long)h, (unsigned long long)bytes,
                     (unsigned long long)s->gate->cap);
        return SHARD_ERR_DECODE;
    }
    if (s->gate) {
        shard_gate_enter(s->gate, bytes);
        s->admitted += bytes;
    }
    return 0;
}

void shard_scratch_settle(ShardScratch *s)
{
    if (s->gate)
        shard_gate_leave(s->gate, s->admitted);
    s->admitted = 0;
}
