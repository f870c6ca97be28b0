/*
 * Blocks of freed samples (blockpool.h): a list under one mutex, newest last. A get takes
 * the smallest kept block that fits and is at most twice the size asked for (or than a
 * small block), so that a large block is not spent on a small sample, and stops looking at
 * one no larger than a new block would be; a put past the bounds drops the oldest.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/blockpool.h"

#define SMALL 4096

typedef struct {
    void *b;
    size_t cap;
} Kept;

struct ShardBlockPool {
    atomic_size_t refs;
    pthread_mutex_t mu;
    size_t max_blocks, max_bytes, bytes, n;
    Kept kept[]; /* max_blocks */
};

/* New blocks are rounded up so that samples of similar sizes can share them. */
static size_t round_up(size_t n)
{
    size_t step = 4096;
    while (step < n / 8)
        step *= 2;
    return n > SIZE_MAX - step ? n : (n + step - 1) & ~(step - 1);
}

ShardBlockPool *shard_block_pool_new(size_t max_blocks, size_t max_bytes)
{
    ShardBlockPool *p = calloc(1, sizeof *p + max_blocks * sizeof(Kept));
    if (!p)
        return NULL;
    atomic_init(&p->refs, 1);
    pthread_mutex_init(&p->mu, NULL);
    p->max_blocks = max_blocks;
    p->max_bytes = max_bytes;
    return p;
}

ShardBlockPool *shard_block_pool_ref(ShardBlockPool *p)
{
    if (p)
        atomic_fetch_add(&p->refs, 1);
    return p;
}

void shard_block_pool_unref(ShardBlockPool *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->kept[i].b);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void *shard_block_get(ShardBlockPool *p, size_t n, size_t *cap)
{
    if (p) {
        pthread_mutex_lock(&p->mu);
        size_t best = SIZE_MAX, least = n > SMALL ? n : SMALL; /* as a new block would be */
        size_t snug = round_up(least);
        for (size_t i = p->n; i-- > 0;) { /* newest first: the scan ends at a snug one */
            size_t c = p->kept[i].cap;
            if (c >= n && c / 2 <= least && (best == SIZE_MAX || c < p->kept[best].cap)) {
                best = i;
                if (c <= snug)
                    break;
            }
        }
        void *b = NULL;
        if (best != SIZE_MAX) {
            b = p->kept[best].b;
            *cap = p->kept[best].cap;
            p->bytes -= *cap;
            memmove(&p->kept[best], &p->kept[best + 1], (--p->n - best) * sizeof(Kept));
        }
        pthread_mutex_unlock(&p->mu);
        if (b)
            return b;
    }
    *cap = round_up(n ? n : 1);
    return malloc(*cap);
}

void shard_block_put(ShardBlockPool *p, void *b, size_t cap)
{
    if (!b)
        return;
    if (!p || cap < SMALL || cap > p->max_bytes) { /* malloc keeps small ones well */
        free(b);
        return;
    }
    void *drop[8];
    size_t ndrop = 0;
    pthread_mutex_lock(&p->mu);
    /* drop the oldest until b fits (a handful at most: freed outside the lock) */
    while ((p->n == p->max_blocks || p->bytes + cap > p->max_bytes) && ndrop < 8) {
        drop[ndrop++] = p->kept[0].b;
        p->bytes -= p->kept[0].cap;
        memmove(&p->kept[0], &p->kept[1], --p->n * sizeof(Kept));
    }
    int keep = p->n < p->max_blocks && p->bytes + cap <= p->max_bytes;
    if (keep) {
        p->kept[p->n++] = (Kept){b, cap};
        p->bytes += cap;
    }
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < ndrop; i++)
        free(drop[i]);
    if (!keep)
        free(b);
}
