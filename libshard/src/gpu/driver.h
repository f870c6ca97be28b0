/*
 * The CUDA driver API, found at run time: libcuda.so.1 (installed with the NVIDIA driver) is
 * opened with dlopen when a GPU is asked for, so libshard links neither libcuda nor libcudart
 * and loads on machines without either. The driver API rather than the runtime because the
 * driver comes with every GPU machine while libcudart is versioned per toolkit (torch ships
 * its own); both share the device's primary context, so torch and libshard see the same
 * memory and streams. The types and constants below are the driver's ABI (cuda.h), declared
 * here so that this file builds without the toolkit.
 */
#ifndef SHARD_GPU_DRIVER_H
#define SHARD_GPU_DRIVER_H

#include <stddef.h>

#include "base/attr.h"


typedef int CUresult; /* 0: CUDA_SUCCESS */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef void (*CUhostFn)(void *user);

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_NO_DEVICE = 100,
    CU_MEMHOSTALLOC_PORTABLE = 0x01, /* pinned for every context, torch's included */
    CU_STREAM_NON_BLOCKING = 0x1,
    CU_EVENT_DISABLE_TIMING = 0x2,
};

/* One copy of the driver's entry points per ShardGpu (no process-wide state). */
typedef struct ShardCuda {
    void *lib; /* dlopen handle */
    CUresult (*Init)(unsigned flags);
    CUresult (*DriverGetVersion)(int *v);
    CUresult (*DeviceGetCount)(int *n);
    CUresult (*DeviceGet)(CUdevice *d, int ordinal);
    CUresult (*DeviceGetName)(char *name, int len, CUdevice d);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *c, CUdevice d);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice d);
    CUresult (*CtxPushCurrent)(CUcontext c);
    CUresult (*CtxPopCurrent)(CUcontext *c);
    CUresult (*MemHostAlloc)(void **p, size_t n, unsigned flags);
    CUresult (*MemFreeHost)(void *p);
    CUresult (*MemAlloc)(CUdeviceptr *p, size_t n);
    CUresult (*MemFree)(CUdeviceptr p);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t n, CUstream s);
    CUresult (*StreamCreate)(CUstream *s, unsigned flags);
    CUresult (*StreamDestroy)(CUstream s);
    CUresult (*StreamSynchronize)(CUstream s);
    CUresult (*StreamWaitEvent)(CUstream s, CUevent e, unsigned flags);
    CUresult (*EventCreate)(CUevent *e, unsigned flags);
    CUresult (*EventDestroy)(CUevent e);
    CUresult (*EventRecord)(CUevent e, CUstream s);
    CUresult (*EventQuery)(CUevent e);
    CUresult (*EventSynchronize)(CUevent e);
    CUresult (*EventElapsedTime)(float *ms, CUevent a, CUevent b);
    CUresult (*LaunchHostFunc)(CUstream s, CUhostFn fn, void *user);
    CUresult (*ModuleLoadData)(CUmodule *m, const void *image);
    CUresult (*ModuleUnload)(CUmodule m);
    CUresult (*ModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
    CUresult (*LaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                             void **extra);
    CUresult (*GetErrorName)(CUresult r, const char **s);
    CUresult (*GetErrorString)(CUresult r, const char **s);
} ShardCuda;

/* Opens the driver and cuInit()s it. @return 0; SHARD_ERR_NOCUDA with msg saying why (no
 * libcuda.so.1, a symbol missing from an old driver, cuInit failing: no device). */
SHARD_HIDDEN int shard_cuda_load(ShardCuda *c, char *msg);
SHARD_HIDDEN void shard_cuda_unload(ShardCuda *c);

/* "what: CUDA_ERROR_...: the driver's words" into msg; @return SHARD_ERR_NOCUDA for
 * CUDA_ERROR_NO_DEVICE, SHARD_ERR_NOMEM for out of memory, SHARD_ERR_IO otherwise. */
SHARD_HIDDEN int shard_cuda_fail(const ShardCuda *c, CUresult r, char *msg, const char *what);

#endif /* SHARD_GPU_DRIVER_H */
