/*
 * libshard — batches delivered on the GPU: pinned host batch buffers, an asynchronous upload
 * into a ring of device buffers on a copy stream of its own, an optional on-GPU finish
 * (uint8 -> float32 / float16 / bfloat16, mean/std, NCHW or NHWC, one kernel) and DLPack
 * export, ordered against the consumer's stream with events.
 *
 * One build for every machine: the CUDA driver (libcuda.so.1) is opened at run time, so
 * libshard loads and works where there is none; asking for a GPU there fails with
 * SHARD_ERR_NOCUDA and a message saying why. The finish kernels are compiled in when the
 * CUDA toolkit was there at build time (shard_gpu_kernels). libshard works in the device's
 * primary context, the one the CUDA runtime (and torch) use, so pointers, streams and
 * events pass between them.
 *
 * Flow: shard_loader_open with allocator = shard_gpu_pinned_allocator(g) (the decoders
 * write into pinned memory, no staging copy); shard_uploader_open(&u, g, &s, loader) starts
 * a thread that takes the loader's batches and uploads each into a free device buffer as
 * soon as there is one; shard_uploader_next(u, stream) hands out the next uploaded batch,
 * with the consumer's stream made to wait (on the GPU, not the host) for its copy; the
 * consumer's shard_device_batch_release(b, stream) records on its stream when its work
 * on the buffer is done, and the buffer is only written again after that. Without a loader,
 * shard_uploader_put takes host batches from the caller (batches made by other processes).
 *
 * Streams: a batch may be read on the stream given to shard_uploader_next (or to
 * shard_device_batch_wait, or to its DLPack export), which waits for the upload; the buffer
 * is written again only after the work queued on the streams named at its releases. Work on
 * any other stream is not waited for: make that stream wait (shard_device_batch_wait) and
 * release on it too. NULL is CUDA's legacy default stream everywhere;
 * SHARD_STREAM_NONE says "no stream": no wait at next, nothing recorded at a release (the
 * holder queued no work on the buffer, or has synchronized itself).
 */
#ifndef SHARD_GPU_H
#define SHARD_GPU_H

#include "common.h"
#include "decode.h"
#include "loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A stream argument meaning none: nothing to wait on, nothing queued (see above). */
#define SHARD_STREAM_NONE ((void *)(intptr_t)-1)

/** A CUDA device opened through the driver found at run time. Thread-safe. */
typedef struct ShardGpu ShardGpu;

/**
 * Opens the driver and device `device` (an ordinal, as torch.cuda and CUDA_VISIBLE_DEVICES
 * count them) and retains its primary context.
 * @param out receives the handle, owned by the caller (shard_gpu_free)
 * @param err optional; SHARD_ERR_NOCUDA says why there is no GPU to use (no driver, no
 *        device, an ordinal past the last device)
 */
SHARD_API int shard_gpu_open(ShardGpu **out, int device, ShardError *err);

/** Lets the handle go; accepts NULL; sets *g to NULL. Uploaders opened on it keep what
 *  they need until they are freed themselves. The driver stays loaded for the process's
 *  life (its own threads, the host-callback one, may still run). */
SHARD_API void shard_gpu_free(ShardGpu **g);

/** @return the device's name, "NVIDIA H100 80GB HBM3" (borrowed from g) */
SHARD_API const char *shard_gpu_name(const ShardGpu *g);

/** @return 1 when this build carries the finish kernels (the CUDA toolkit was there at build
 *  time); 0 when only uint8 NHWC batches can go to the GPU. Needs no GPU. */
SHARD_API int shard_gpu_kernels(void);

/** @return pinned (page-locked, portable) host memory from cuMemHostAlloc, for
 *  ShardLoaderSettings.allocator: the decoders then write where the copy engine reads.
 *  Borrowed from g: g must outlive the loader. */
SHARD_API const ShardAllocator *shard_gpu_pinned_allocator(ShardGpu *g);

/** The element type of uploaded images. */
typedef enum ShardGpuDType {
    SHARD_GPU_UINT8 = 0,    /**< 0..255, as decoded */
    SHARD_GPU_FLOAT32 = 1,  /**< (value / 255 - mean) / std per channel */
    SHARD_GPU_FLOAT16 = 2,  /**< as FLOAT32, rounded to IEEE half */
    SHARD_GPU_BFLOAT16 = 3, /**< as FLOAT32, rounded to bfloat16 */
} ShardGpuDType;

/** Who decodes the JPEGs of an uploader's loader. */
typedef enum ShardDecoder {
    /** Split between the loader's CPU threads and the GPU's JPEG decoder (nvJPEG: the
     *  hardware engines where the GPU has them) by their measured throughput, adapted while
     *  running; the CPU alone where the GPU's decoder cannot start (shard_uploader_decoder
     *  says why). The order, the seeds and resume are the same either way. */
    SHARD_DECODER_AUTO = 0,
    SHARD_DECODER_CPU = 1, /**< the loader's threads decode every image */
    /** The GPU decodes every JPEG it takes (baseline, 4:4:4 / 4:2:2 / 4:2:0 / grey); the
     *  others (progressive, CMYK, 4:4:0, PNG, ...) go to the CPU threads. Opening fails
     *  where the GPU's decoder cannot start. */
    SHARD_DECODER_GPU = 2,
} ShardDecoder;

typedef struct ShardUploadSettings {
    /** Device buffers in the ring (default 3): the batches the consumer holds, plus one
     *  being uploaded, plus those uploaded ahead */
    size_t buffers;
    size_t batch_size;     /**< most images per batch (default 256) */
    int height, width;     /**< image size (default 224 x 224); images arrive uint8 NHWC */
    ShardGpuDType dtype;   /**< on the GPU (default SHARD_GPU_UINT8) */
    ShardLayout layout;    /**< on the GPU (default SHARD_LAYOUT_NCHW) */
    float mean[3], std[3]; /**< for the float types (default ImageNet's) */
    /** Who decodes the loader's JPEGs (default SHARD_DECODER_AUTO); with a loader only */
    ShardDecoder decoder;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[28];
} ShardUploadSettings;

/** Fills s with the defaults written beside each field. */
SHARD_API void shard_upload_default_settings(ShardUploadSettings *s);

/** A batch in device memory. It belongs to its uploader's ring but outlives the uploader
 *  handle: the functions on it need only the batch. */
typedef struct ShardDeviceBatch {
    size_t size;          /**< images in the batch */
    void *images;         /**< device pointer: size images as the settings say */
    size_t image_bytes;   /**< bytes of one image on the device */
    int64_t *labels;      /**< device pointer: size labels */
    int height, width;    /**< the settings' */
    ShardGpuDType dtype;  /**< the settings' */
    ShardLayout layout;   /**< the settings' */
    int device;           /**< the CUDA ordinal */
    /** The loader's host batch (keys, raw fields, indices): valid until
     *  shard_device_batch_host_done or the release; NULL for shard_uploader_put batches */
    const ShardBatch *host;
    const char *state;    /**< shard_loader_state after this batch ("" for put batches) */
} ShardDeviceBatch;

/** Counters since the uploader opened. */
typedef struct ShardUploadStats {
    uint64_t batches;        /**< batches queued for upload */
    /** host-to-device bytes (images and labels) of the uploads finished, the ones
     *  copy_seconds times: bytes / copy_seconds is the copy's bandwidth */
    uint64_t bytes;
    double copy_seconds;     /**< GPU time of those copies (events on the copy stream) */
    double finish_seconds;   /**< GPU time of the finish kernels */
    double wait_seconds;     /**< time the consumer blocked in shard_uploader_next */
    double put_seconds;      /**< time spent in shard_uploader_put (the staging copy) */
    double full_seconds;     /**< time the upload thread waited for a free device buffer
                                  (the consumer held them, or their copies ran) */
    uint64_t in_flight;      /**< buffers now uploading, uploaded ahead or held */
    uint64_t max_in_flight;  /**< the most at once */
    size_t buffers;          /**< the ring's size */
    /* Decoding, in the batches this uploader took (shard_uploader_decoder says by what): */
    uint64_t gpu_decoded;    /**< images the GPU decoded */
    uint64_t cpu_decoded;    /**< images the loader's CPU threads decoded, of which: */
    uint64_t cpu_split;      /**< JPEGs the split gave the CPU (decoder "auto") */
    /** images the GPU does not take, by why: not a JPEG (PNG, WebP), progressive or
     *  arithmetic-coded, a colour space other than YCbCr and grey (CMYK), a chroma sampling
     *  other than 4:4:4, 4:2:2 and 4:2:0 (4:4:0, 4:1:1), other (12-bit, cut short, too
     *  large, a crop shrunk more than 30 times) */
    uint64_t cpu_not_jpeg, cpu_progressive, cpu_colour, cpu_sampling, cpu_other;
    uint64_t gpu_retried;    /**< JPEGs the GPU failed, decoded again by the CPU */
    double gpu_share;        /**< the split's share for the GPU now (0..1) */
    double gpu_seconds;      /**< time the upload thread spent in GPU decodes */
} ShardUploadStats;

typedef struct ShardUploader ShardUploader;

/**
 * Allocates the ring's device buffers and, given a loader, starts the upload thread.
 * @param out receives the uploader, owned by the caller (shard_uploader_free)
 * @param g borrowed; the uploader takes its own reference
 * @param s borrowed; copied
 * @param loader borrowed, may be NULL (then batches come from shard_uploader_put); the
 *        uploader becomes its only consumer (no shard_loader_next elsewhere) and must be
 *        freed before it. The loader's images must be s's size, uint8 NHWC (a batch of
 *        another size ends the upload with SHARD_ERR_INVALID, naming both); they are
 *        copied straight from its buffers, so give it shard_gpu_pinned_allocator(g).
 *        Without a loader, each buffer's pinned staging memory is allocated here.
 * @return 0; SHARD_ERR_INVALID for a bad setting; SHARD_ERR_UNSUPPORTED for a dtype or
 *         layout needing the kernels in a build without them; SHARD_ERR_NOMEM (device
 *         memory) naming the sizes
 */
SHARD_API int shard_uploader_open(ShardUploader **out, ShardGpu *g, const ShardUploadSettings *s,
                                  ShardLoader *loader, ShardError *err);

/**
 * Uploads a host batch (an uploader without a loader) into a free device buffer: copies
 * images and labels into that buffer's pinned staging memory and starts the asynchronous
 * upload; the caller's memory is free again on return. Never waits for a buffer (the
 * thread that would release one may be the caller's).
 * @param images n images, uint8 NHWC, settings' size (borrowed)
 * @param labels n labels (borrowed), or NULL for -1 each
 * @return 0; SHARD_ERR_INVALID (n of 0 or more than batch_size); SHARD_ERR_STATE when no
 *         buffer is free (every one uploaded and not yet taken, or held), with a loader, or
 *         after put_end or a failure
 */
SHARD_API int shard_uploader_put(ShardUploader *u, const void *images, size_t n,
                                 const int64_t *labels);

/** Marks the end of what shard_uploader_put gives: shard_uploader_next returns SHARD_EOS
 *  once the batches before it are handed out. */
SHARD_API int shard_uploader_put_end(ShardUploader *u);

/**
 * The next epoch on the same ring: stops the upload thread (with a loader), drops the
 * batches uploaded ahead and not taken (their host batches go back to the loader), and
 * clears the end (SHARD_EOS or put_end). The next shard_uploader_next starts uploading
 * again from where the loader is: set its epoch or restore it in between. Batches held stay
 * valid. Device memory, streams and the kernels are kept: no allocation per epoch. Not
 * concurrently with shard_uploader_next or put.
 * @return 0; the error that ended the upload if it was not SHARD_EOS (then the uploader is
 *         spent: free it)
 */
SHARD_API int shard_uploader_rewind(ShardUploader *u);

/**
 * Waits for the next uploaded batch and makes stream wait for its upload (on the GPU).
 * @param stream the consumer's CUstream / cudaStream_t (torch's current stream); NULL for
 *        the legacy default stream; SHARD_STREAM_NONE: no wait (shard_device_batch_wait
 *        before the first read)
 * @param out receives the batch: the caller holds it until shard_device_batch_release
 * @return 0; SHARD_EOS at the end of the loader's epoch (or after put_end); the loader's or
 *         the GPU's error, with shard_uploader_error saying which batch and what;
 *         SHARD_ERR_STATE when every buffer of the ring is held
 */
SHARD_API int shard_uploader_next(ShardUploader *u, void *stream, const ShardDeviceBatch **out);

/** Makes stream wait (on the GPU) for b's upload: for a consumer on another stream, who
 *  must then release on that stream too. */
SHARD_API int shard_device_batch_wait(const ShardDeviceBatch *b, void *stream);

/** Adds a holder to b (one more shard_device_batch_release to come): for views of it handed
 *  to others, as DLPack export does. */
SHARD_API void shard_device_batch_retain(const ShardDeviceBatch *b);

/** The consumer is done with b->host (keys, raw fields): the loader may have the host
 *  buffer back as soon as the upload has read it. Idempotent; any thread. */
SHARD_API void shard_device_batch_host_done(const ShardDeviceBatch *b);

/**
 * Drops a holder of b. The buffer is written again only after the work queued on stream
 * by then is done (an event recorded on it), never on the host's word alone.
 * @param stream where the holder's work on b was queued (NULL: the legacy default
 *        stream); SHARD_STREAM_NONE when it queued none
 */
SHARD_API void shard_device_batch_release(const ShardDeviceBatch *b, void *stream);

/** Which array of a batch to export. */
enum { SHARD_DLPACK_IMAGES = 0, SHARD_DLPACK_LABELS = 1 };

struct DLManagedTensor; /* dlpack.h (DLPack 0.6 and later); the caller includes it */

/**
 * b's images (N, C, H, W) or (N, H, W, C) as the layout says, or labels (N), as a DLPack
 * tensor on b's device. The tensor holds b (shard_device_batch_retain); its deleter
 * releases it, recording the release on `stream`, the stream the consumer uses it on, so
 * the buffer waits for that work. Also makes stream wait for the upload. stream NULL is the
 * legacy default stream; SHARD_STREAM_NONE (DLPack's -1): no wait and nothing recorded,
 * the consumer synchronizes itself.
 * @return a tensor owned by the caller (call its deleter once, or hand it to a consumer
 *         that does), NULL when out of memory
 */
SHARD_API struct DLManagedTensor *shard_device_batch_dlpack(const ShardDeviceBatch *b, int which,
                                                            void *stream);

/** Fills out with the counters so far. */
SHARD_API void shard_uploader_stats(const ShardUploader *u, ShardUploadStats *out);

/**
 * The loader's stage statistics (shard_loader_stats) with the upload as a stage of its own
 * between decode and the caller: its thread's time busy (queueing copies, waiting for a
 * host batch's copy to finish), waiting for a batch from the loader, or waiting for a free
 * device buffer; "deliver" is then the caller of shard_uploader_next, waiting for a device
 * batch or at its own work. The bottleneck is named among all of them. For an uploader fed
 * by shard_uploader_put (no loader), out is zeroed (shard_uploader_stats has its counters).
 */
SHARD_API void shard_uploader_loader_stats(const ShardUploader *u, ShardLoaderStats *out);

/** @return the message of the last failure (borrowed), "" if none */
SHARD_API const char *shard_uploader_error(const ShardUploader *u);

/** @return who decodes the JPEGs, in words (borrowed): "gpu (nvJPEG 13.0.1, hardware), auto
 *  split", "cpu", or "cpu: <why the GPU's decoder could not start>" for decoder "auto" */
SHARD_API const char *shard_uploader_decoder(const ShardUploader *u);

/**
 * Stops the upload thread, waits for the copies in flight and gives every host batch back
 * to the loader; accepts NULL; sets *u to NULL. Device buffers still held (released later,
 * from any thread, or by DLPack deleters) stay valid until their last release.
 */
SHARD_API void shard_uploader_free(ShardUploader **u);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_GPU_H */
