/*
 * The uploader's insides, shared by its files: the handle, its thread and the consumer's
 * side (uploader.c) and the ring of device buffers (ring.c).
 *
 * DESIGN: host batches into a ring of device buffers (shard/gpu.h).
 *
 * Each buffer of the ring (a Slot) is FREE, or BUSY: being uploaded, uploaded and waiting
 * in the ready queue, or held by the consumer. An upload is queued on the uploader's copy
 * stream: first a wait for the events the consumer's releases recorded (the GPU, not the
 * host, waits for the consumer's last kernel on the buffer), then the copies, the finish
 * kernel and the `ready` event that shard_uploader_next makes the consumer's stream wait
 * for. The host batch goes back to the loader from a host function queued after the copy,
 * once the consumer has also said it is done with the keys and fields (two references).
 *
 * Threads: the upload thread (with a loader) or the caller of shard_uploader_put fills
 * slots; the consumer takes and releases them, DLPack deleters release from any thread,
 * and the driver's callback thread gives host batches back. One mutex guards the ring; no
 * call that waits for the copy stream is made while holding it, since the host function
 * queued there takes it.
 */
#ifndef SHARD_GPU_UPLOADERDEF_H
#define SHARD_GPU_UPLOADERDEF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/driver.h"
#include "shard/gpu.h"
#include "shard/loader.h"

#define MAX_RELEASES 8 /* streams whose work one buffer may wait for */

typedef struct Slot {
    ShardDeviceBatch b; /* first: a batch pointer is its slot */
    CUdeviceptr raw;    /* uint8 NHWC, the copy's target */
    CUdeviceptr out;    /* the finished images; raw itself without a finish kernel */
    CUdeviceptr labels;
    unsigned char *staging; /* pinned, for shard_uploader_put's images (allocated at open) */
    int64_t *labstage;      /* pinned: the labels, copied here (a loader's are too small to
                               be pinned, see device.c) */
    CUevent start, copied, ready;
    CUevent freed[MAX_RELEASES];
    int nfreed;
    int timed;          /* start..ready recorded and not yet counted */
    uint64_t bytes;     /* that upload's, counted with its times */
    int busy;
    int filling;        /* taken by the upload thread or put, not yet queued as ready */
    int holders;        /* the consumer's, from next to the last release */
    int queued_host;    /* host batch handed to the copy stream's callback */
    const ShardBatch *host;
    atomic_int host_refs;   /* the copy's and the consumer's */
    atomic_int host_done;   /* the consumer's reference is gone */
    struct ShardUploader *u;
    char *state;        /* shard_loader_state after its batch ("" for put batches) */
    size_t state_cap;
} Slot;

struct ShardUploader {
    ShardGpu *g;
    ShardCuda *cu;
    ShardUploadSettings s;
    ShardLoader *loader;
    CUstream copy;
    CUmodule mod;
    CUfunction finish; /* NULL: images stay as uploaded (uint8 NHWC) */
    size_t in_bytes, out_bytes;
    Slot *slots;
    size_t n;
    char *state_scratch; /* the upload thread's: a state as the loader writes it */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t *ready; /* FIFO of slot numbers */
    size_t rhead, rcount;
    size_t next_slot;
    size_t busy, held, host_out;
    int ended, end_rc, stop, put_ended;
    pthread_t thread;
    int has_thread;
    atomic_int refs; /* the owner's, and one per held slot */
    ShardUploadStats st;
    struct ShardJpegStage *jpeg; /* the GPU's JPEG decode (jpegstage.h), or NULL */
    char decoder[SHARD_ERROR_MAX + 8]; /* shard_uploader_decoder's words */
    char end_msg[SHARD_ERROR_MAX];
    char err[SHARD_ERROR_MAX];
};

#endif /* SHARD_GPU_UPLOADERDEF_H */
