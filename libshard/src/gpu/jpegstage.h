/*
 * The uploader's JPEG stage (jpegstage.c): which of the loader's JPEGs the GPU decodes
 * (through the loader's hook, load/defer.h, on the producer's thread), and their decode
 * into the batch's device buffer on the upload thread (gpujpeg.h), with the CPU taking
 * again any the GPU fails. The split follows the measured rates (split.h).
 */
#ifndef SHARD_GPU_JPEGSTAGE_H
#define SHARD_GPU_JPEGSTAGE_H

#include "base/attr.h"
#include "gpu/driver.h"
#include "shard/gpu.h"
#include "shard/loader.h"

typedef struct ShardJpegStage ShardJpegStage;

/* Starts the GPU's decoder for loader's batches and hooks the loader; the context current.
 * @return 0; the decoder's error (SHARD_ERR_NOCUDA, SHARD_ERR_UNSUPPORTED) with msg */
SHARD_HIDDEN int shard_jpeg_stage_open(ShardJpegStage **out, ShardGpu *g, ShardLoader *loader,
                                       ShardDecoder decoder, size_t batch, char *msg);

/* Decodes host's GPU samples into raw (image i at raw + i * image_bytes) on stream s after
 * the work queued there, and waits for them; host's images buffer takes the CPU's retries.
 * @return 0; SHARD_ERR_DECODE naming the sample neither decoder could decode; a CUDA error */
SHARD_HIDDEN int shard_jpeg_stage_run(ShardJpegStage *j, CUstream s, CUdeviceptr raw,
                                      size_t image_bytes, const ShardBatch *host, char *msg);

/* Adds the stage's counters to st. */
SHARD_HIDDEN void shard_jpeg_stage_stats(ShardJpegStage *j, ShardUploadStats *st);

/* "gpu (nvJPEG 13.0.1, hardware), auto split" (borrowed) */
SHARD_HIDDEN const char *shard_jpeg_stage_name(const ShardJpegStage *j);

/* Unhooks the loader (the producer no longer asks), then frees; accepts NULL. */
SHARD_HIDDEN void shard_jpeg_stage_free(ShardJpegStage **j);

#endif /* SHARD_GPU_JPEGSTAGE_H */
