/*
 * nvJPEG, found at run time: libnvjpeg.so.13 (or .12) of the CUDA toolkit, or the copy a
 * wheel carries (torchvision's), opened with dlopen when a GPU decode is asked for, as
 * libcuda is (driver.h): libshard links neither and works where neither is. The types and
 * constants are nvjpeg.h's ABI, declared here so that this file builds without that header
 * (CUDA's toolkit here has none). Only the batched decode is used: on a GPU with JPEG
 * engines (A100, H100, H200) its hardware backend, elsewhere its GPU backend.
 */
#ifndef SHARD_GPU_NVJPEG_H
#define SHARD_GPU_NVJPEG_H

#include <stddef.h>

#include "base/attr.h"
#include "gpu/driver.h"

typedef int nvjpegStatus_t; /* 0: NVJPEG_STATUS_SUCCESS */
typedef struct nvjpegHandle *nvjpegHandle_t;
typedef struct nvjpegJpegState *nvjpegJpegState_t;

enum {
    NVJPEG_STATUS_SUCCESS = 0,
    NVJPEG_STATUS_INVALID_PARAMETER = 2,
    NVJPEG_STATUS_BAD_JPEG = 3,
    NVJPEG_STATUS_JPEG_NOT_SUPPORTED = 4,
    NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED = 9,
    NVJPEG_BACKEND_GPU_HYBRID = 2,
    NVJPEG_BACKEND_HARDWARE = 3,
    NVJPEG_OUTPUT_YUV = 1,  /* planar Y, Cb, Cr at the file's own sampling */
    NVJPEG_OUTPUT_RGBI = 5, /* interleaved RGB (chroma upsampled by nvJPEG) */
    NVJPEG_CSS_444 = 0,
    NVJPEG_CSS_422 = 1,
    NVJPEG_CSS_420 = 2,
    NVJPEG_CSS_GRAY = 6,
    NVJPEG_MAX_COMPONENT = 4,
};

typedef struct nvjpegImage_t {
    unsigned char *channel[NVJPEG_MAX_COMPONENT];
    size_t pitch[NVJPEG_MAX_COMPONENT];
} nvjpegImage_t;

/* One copy of the entry points per decoder (no process-wide state). */
typedef struct ShardNvjpeg {
    void *lib;
    char path[256]; /* the file opened, for messages and stats */
    int version[3]; /* major, minor, patch */
    nvjpegStatus_t (*GetProperty)(int type, int *value);
    nvjpegStatus_t (*CreateEx)(int backend, void *dev_allocator, void *pinned_allocator,
                               unsigned flags, nvjpegHandle_t *h);
    nvjpegStatus_t (*Destroy)(nvjpegHandle_t h);
    nvjpegStatus_t (*JpegStateCreate)(nvjpegHandle_t h, nvjpegJpegState_t *st);
    nvjpegStatus_t (*JpegStateDestroy)(nvjpegJpegState_t st);
    nvjpegStatus_t (*GetImageInfo)(nvjpegHandle_t h, const unsigned char *data, size_t size,
                                   int *components, int *subsampling, int *widths,
                                   int *heights);
    nvjpegStatus_t (*DecodeBatchedInitialize)(nvjpegHandle_t h, nvjpegJpegState_t st,
                                              int batch, int threads, int format);
    nvjpegStatus_t (*DecodeBatched)(nvjpegHandle_t h, nvjpegJpegState_t st,
                                    const unsigned char *const *data, const size_t *sizes,
                                    nvjpegImage_t *out, CUstream stream);
} ShardNvjpeg;

/* Opens nvJPEG: `path` when given (a file name or path), else the toolkit's
 * libnvjpeg.so.13 or .12 where the loader finds it. @return 0; SHARD_ERR_NOCUDA with msg
 * naming what is missing (the library, a symbol, a version older than 12) */
SHARD_HIDDEN int shard_nvjpeg_load(ShardNvjpeg *j, const char *path, char *msg);
SHARD_HIDDEN void shard_nvjpeg_unload(ShardNvjpeg *j);

/* nvJPEG's status as words: "NVJPEG_STATUS_BAD_JPEG" */
SHARD_HIDDEN const char *shard_nvjpeg_status(nvjpegStatus_t s);

#endif /* SHARD_GPU_NVJPEG_H */
