/*
 * The GPU handle (shard/gpu.h): the driver opened at run time, one device's primary context,
 * and pinned host memory for batch buffers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "gpu/device.h"

int shard_gpu_kernels(void)
{
#ifdef SHARD_HAVE_KERNELS
    return 1;
#else
    return 0;
#endif
}

CUresult shard_gpu_enter(ShardGpu *g) { return g->cu.CtxPushCurrent(g->ctx); }

void shard_gpu_leave(ShardGpu *g)
{
    CUcontext c;
    g->cu.CtxPopCurrent(&c);
}

/* Blocks the copy engine reads (images, labels) are pinned; small ones are not worth a
 * driver call and a locked page each. By size alone, whatever the alignment, so that free,
 * which is told the size only, takes the same branch as alloc did. */
#define PINNED_MIN ((size_t)64 << 10)

/* Pinned blocks: the allocator's functions run on the loader's threads (common.h), where no
 * context need be current. PORTABLE: pinned for every context, not just this one. */
static void *pinned_alloc(void *cookie, size_t n, size_t align)
{
    ShardGpu *g = cookie;
    void *p = NULL;
    if (n < PINNED_MIN)
        return shard_default_allocator()->alloc(NULL, n, align);
    if (align > 4096) /* cuMemHostAlloc gives page-aligned blocks; the loader asks for 64 */
        return NULL;
    if (shard_gpu_enter(g) != CUDA_SUCCESS)
        return NULL;
    if (g->cu.MemHostAlloc(&p, n ? n : 1, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
        p = NULL;
    shard_gpu_leave(g);
    return p;
}

static void pinned_free(void *cookie, void *p, size_t n)
{
    ShardGpu *g = cookie;
    if (n < PINNED_MIN) {
        shard_default_allocator()->free(NULL, p, n);
        return;
    }
    if (!p || shard_gpu_enter(g) != CUDA_SUCCESS)
        return;
    g->cu.MemFreeHost(p);
    shard_gpu_leave(g);
}

int shard_gpu_open(ShardGpu **out, int device, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    *out = NULL;
    ShardGpu *g = calloc(1, sizeof *g);
    if (!g)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    int rc = shard_cuda_load(&g->cu, msg);
    if (rc) {
        free(g);
        return shard_report(err, rc, msg);
    }
    int n = 0;
    CUresult r = g->cu.DeviceGetCount(&n);
    if (r == CUDA_SUCCESS && (device < 0 || device >= n)) {
        shard_fail(msg, SHARD_ERR_NOCUDA, "CUDA device %d: this machine has %d (ordinals 0 to "
                   "%d, as CUDA_VISIBLE_DEVICES leaves them)", device, n, n - 1);
        rc = SHARD_ERR_NOCUDA;
    } else if (r != CUDA_SUCCESS || (r = g->cu.DeviceGet(&g->dev, device)) != CUDA_SUCCESS ||
               (r = g->cu.DevicePrimaryCtxRetain(&g->ctx, g->dev)) != CUDA_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "CUDA device %d", device);
        rc = shard_cuda_fail(&g->cu, r, msg, what);
    }
    if (rc) {
        shard_cuda_unload(&g->cu);
        free(g);
        return shard_report(err, rc, msg);
    }
    if (g->cu.DeviceGetName(g->name, sizeof g->name, g->dev) != CUDA_SUCCESS)
        snprintf(g->name, sizeof g->name, "CUDA device %d", device);
    g->ordinal = device;
    atomic_init(&g->refs, 1);
    g->pinned = (ShardAllocator){g, pinned_alloc, pinned_free};
    *out = g;
    return 0;
}

void shard_gpu_ref(ShardGpu *g) { atomic_fetch_add(&g->refs, 1); }

void shard_gpu_unref(ShardGpu *g)
{
    if (atomic_fetch_sub(&g->refs, 1) != 1)
        return;
    g->cu.DevicePrimaryCtxRelease(g->dev);
    shard_cuda_unload(&g->cu);
    free(g);
}

void shard_gpu_free(ShardGpu **g)
{
    if (!g || !*g)
        return;
    shard_gpu_unref(*g);
    *g = NULL;
}

const char *shard_gpu_name(const ShardGpu *g) { return g->name; }

const ShardAllocator *shard_gpu_pinned_allocator(ShardGpu *g) { return &g->pinned; }
