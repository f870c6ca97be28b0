/*
 * JPEGs decoded on the GPU into a batch's device buffer (gpujpeg.c): nvJPEG's batched
 * decode (the hardware JPEG engines where the GPU has them, its CUDA backend elsewhere),
 * then the colour conversion, crop and resize kernels (jpeg.cu), each image into its place
 * of the uint8 NHWC buffer, with the crop and mirror the CPU path draws for its seed.
 * One decoder per upload thread: not thread-safe.
 */
#ifndef SHARD_GPU_GPUJPEG_H
#define SHARD_GPU_GPUJPEG_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "gpu/driver.h"
#include "shard/decode.h"
#include "shard/gpu.h"

typedef struct ShardGpuJpeg ShardGpuJpeg;

typedef struct ShardGpuJpegJob {
    const unsigned char *data; /* the JPEG, borrowed until the decode returns */
    size_t size;
    uint64_t seed;             /* the sample's (ShardBatch.seeds) */
    CUdeviceptr out;           /* its place: height x width x 3 bytes */
    int failed;                /* set by the decode: 1 when the CPU must decode it */
} ShardGpuJpegJob;

/* Loads nvJPEG (SHARD_NVJPEG names the file, else the toolkit's by soname) and the kernels;
 * the context current. t: the loader's transform (output size, crop, flip), copied.
 * @return 0; SHARD_ERR_NOCUDA (no nvJPEG, too old) or SHARD_ERR_UNSUPPORTED (a build
 *         without the kernels), msg naming what is missing */
SHARD_HIDDEN int shard_gpujpeg_open(ShardGpuJpeg **out, ShardGpu *g, const ShardTransform *t,
                                    size_t batch, char *msg);

/* Decodes n jobs into their places on stream s and waits for them; the context current.
 * Jobs the GPU cannot take (or a batch nvJPEG refuses) come back failed, for the CPU.
 * *seconds: the wall time of the call. @return 0; a CUDA error, msg saying which step */
SHARD_HIDDEN int shard_gpujpeg_decode(ShardGpuJpeg *d, CUstream s, ShardGpuJpegJob *jobs,
                                      size_t n, double *seconds, char *msg);

/* The driver's entry points it uses (borrowed) */
SHARD_HIDDEN ShardCuda *shard_gpujpeg_cuda(ShardGpuJpeg *d);

/* "nvJPEG 13.0.1, hardware" (borrowed) */
SHARD_HIDDEN const char *shard_gpujpeg_name(const ShardGpuJpeg *d);

SHARD_HIDDEN void shard_gpujpeg_free(ShardGpuJpeg **d);

#endif /* SHARD_GPU_GPUJPEG_H */
