/*
 * The CUDA driver opened at run time (driver.h): no link to libcuda, so the same libshard
 * loads where there is no NVIDIA driver, and says so only when a GPU is asked for.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "gpu/driver.h"

int shard_cuda_fail(const ShardCuda *c, CUresult r, char *msg, const char *what)
{
    const char *name = NULL, *text = NULL;
    if (c->GetErrorName)
        c->GetErrorName(r, &name);
    if (c->GetErrorString)
        c->GetErrorString(r, &text);
    int code = r == CUDA_ERROR_NO_DEVICE              ? SHARD_ERR_NOCUDA
               : r == CUDA_ERROR_OUT_OF_MEMORY       ? SHARD_ERR_NOMEM
                                                     : SHARD_ERR_IO;
    if (name)
        return shard_fail(msg, code, "%s: %s: %s", what, name, text ? text : "");
    return shard_fail(msg, code, "%s: CUDA driver error %d", what, r);
}

/* The versioned names are those cuda.h maps the plain ones to (cuMemAlloc -> cuMemAlloc_v2):
 * the ABI every driver since CUDA 11 exports. */
#define SYM(field, name)                                                                      \
    do {                                                                                      \
        *(void **)&c->field = dlsym(c->lib, name);                                            \
        if (!c->field) {                                                                      \
            missing = name;                                                                   \
            goto fail;                                                                        \
        }                                                                                     \
    } while (0)

int shard_cuda_load(ShardCuda *c, char *msg)
{
    memset(c, 0, sizeof *c);
    c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib)
        return shard_fail(msg, SHARD_ERR_NOCUDA,
                          "no CUDA driver on this machine (%s): a GPU was asked "
                          "for; leave the device on the CPU", dlerror());
    const char *missing = NULL;
    SYM(GetErrorName, "cuGetErrorName");
    SYM(GetErrorString, "cuGetErrorString");
    SYM(Init, "cuInit");
    SYM(DriverGetVersion, "cuDriverGetVersion");
    SYM(DeviceGetCount, "cuDeviceGetCount");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(DeviceGetName, "cuDeviceGetName");
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SYM(CtxPushCurrent, "cuCtxPushCurrent_v2");
    SYM(CtxPopCurrent, "cuCtxPopCurrent_v2");
    SYM(MemHostAlloc, "cuMemHostAlloc");
    SYM(MemFreeHost, "cuMemFreeHost");
    SYM(MemAlloc, "cuMemAlloc_v2");
    SYM(MemFree, "cuMemFree_v2");
    SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    SYM(StreamCreate, "cuStreamCreate");
    SYM(StreamDestroy, "cuStreamDestroy_v2");
    SYM(StreamSynchronize, "cuStreamSynchronize");
    SYM(StreamWaitEvent, "cuStreamWaitEvent");
    SYM(EventCreate, "cuEventCreate");
    SYM(EventDestroy, "cuEventDestroy_v2");
    SYM(EventRecord, "cuEventRecord");
    SYM(EventQuery, "cuEventQuery");
    SYM(EventSynchronize, "cuEventSynchronize");
    SYM(LaunchHostFunc, "cuLaunchHostFunc");
    SYM(ModuleLoadData, "cuModuleLoadData");
    SYM(ModuleUnload, "cuModuleUnload");
    SYM(ModuleGetFunction, "cuModuleGetFunction");
    SYM(LaunchKernel, "cuLaunchKernel");
    /* cuEventElapsedTime_v2 from CUDA 12.8 drivers on; the first version before */
    *(void **)&c->EventElapsedTime = dlsym(c->lib, "cuEventElapsedTime_v2");
    if (!c->EventElapsedTime)
        SYM(EventElapsedTime, "cuEventElapsedTime");
    CUresult r = c->Init(0);
    if (r != CUDA_SUCCESS) {
        int code = shard_cuda_fail(c, r, msg, "cuInit (no usable GPU)");
        shard_cuda_unload(c); /* cuInit ran: not closed, as below */
        return code == SHARD_ERR_IO ? SHARD_ERR_NOCUDA : code;
    }
    return 0;
fail:
    shard_fail(msg, SHARD_ERR_NOCUDA,
               "the CUDA driver found (libcuda.so.1) lacks %s, which libshard calls: update "
               "the NVIDIA driver, or check which libcuda.so.1 LD_LIBRARY_PATH finds", missing);
    dlclose(c->lib);
    memset(c, 0, sizeof *c);
    return SHARD_ERR_NOCUDA;
}

/* The driver stays mapped: once cuInit has run, its threads (the one cuLaunchHostFunc's
 * callbacks run on, for one) live for the process, and where libshard holds the only handle
 * (a C program, Python without torch) a dlclose would unmap the code under them. The
 * handle is dropped, not closed; a later open finds the same mapping. */
void shard_cuda_unload(ShardCuda *c) { memset(c, 0, sizeof *c); }
