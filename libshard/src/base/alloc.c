/*
 * The allocator hook (shard/common.h): the default allocator, and growing a buffer
 * through whichever allocator a loader was given.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "shard/common.h"



#define HUGE_PAGE ((size_t)2 << 20)

static void *default_alloc(void *cookie, size_t n, size_t align)
{
    (void)cookie;
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (n < HUGE_PAGE)
        return aligned_alloc(align, (n + align - 1) & ~(align - 1));
    /* Batch buffers are tens of MB, first written by the decoders: in 2 MB pages (where
     * transparent huge pages are on "madvise", Debian's default) that is a few dozen page
     * faults per buffer instead of ten thousand, and fewer TLB misses after. */
    size_t size = (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    void *p = aligned_alloc(align > HUGE_PAGE ? align : HUGE_PAGE, size);
#ifdef MADV_HUGEPAGE
    if (p)
        madvise(p, size, MADV_HUGEPAGE); /* a hint: failure is fine */
#endif
    return p;
}

static void default_free(void *cookie, void *p, size_t n)
{
    (void)cookie, (void)n;
    free(p);
}

static const ShardAllocator default_allocator = {NULL, default_alloc, default_free};

const ShardAllocator *shard_default_allocator(void) { return &default_allocator; }

int shard_alloc_grow(const ShardAllocator *a, void *buf, size_t *cap, size_t need, size_t keep)
{
    if (need <= *cap)
        return 0;
    size_t c = shard_grow_cap(*cap, need, 256, 1);
    void *old = *(void **)buf;
    void *p = c ? a->alloc(a->cookie, c, 64) : NULL;
    if (!p)
        return SHARD_ERR_NOMEM;
    if (keep)
        memcpy(p, old, keep);
    a->free(a->cookie, old, *cap);
    *(void **)buf = p;
    *cap = c;
    return 0;
}
