/*
 * A ShardGpu inside libshard (device.c): the driver's entry points and the device's primary
 * context, shared by reference between the handle and the uploaders opened on it.
 */
#ifndef SHARD_GPU_DEVICE_H
#define SHARD_GPU_DEVICE_H

#include <stdatomic.h>

#include "base/attr.h"
#include "gpu/driver.h"
#include "shard/gpu.h"

struct ShardGpu {
    ShardCuda cu;
    CUdevice dev;
    CUcontext ctx;       /* the primary context, retained */
    int ordinal;
    char name[256];
    atomic_int refs;     /* the handle's and each uploader's */
    ShardAllocator pinned;
};

SHARD_HIDDEN void shard_gpu_ref(ShardGpu *g);
SHARD_HIDDEN void shard_gpu_unref(ShardGpu *g);

/* Makes g's context current on this thread for a few calls (push/pop: leaves whatever the
 * caller, torch for one, had current as it was). @return 0 or the driver's error */
SHARD_HIDDEN CUresult shard_gpu_enter(ShardGpu *g);
SHARD_HIDDEN void shard_gpu_leave(ShardGpu *g);

#endif /* SHARD_GPU_DEVICE_H */
