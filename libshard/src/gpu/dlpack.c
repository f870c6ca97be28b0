/*
 * A device batch's images or labels as a DLPack tensor (shard/gpu.h): the exchange format
 * torch.from_dlpack, CuPy and JAX take without a copy. The tensor holds its batch; its
 * deleter releases it on the stream the consumer named, so the device buffer is written
 * again only after the work queued there.
 */
#include <stdlib.h>

#include <dlpack/dlpack.h>

#include "shard/gpu.h"

typedef struct Export {
    DLManagedTensor t;
    int64_t shape[4];
    const ShardDeviceBatch *b;
    void *stream;
} Export;

static void deleter(DLManagedTensor *t)
{
    Export *e = t->manager_ctx;
    shard_device_batch_release(e->b, e->stream);
    free(e);
}

static DLDataType dl_type(ShardGpuDType t)
{
    switch (t) {
    case SHARD_GPU_FLOAT32: return (DLDataType){kDLFloat, 32, 1};
    case SHARD_GPU_FLOAT16: return (DLDataType){kDLFloat, 16, 1};
    case SHARD_GPU_BFLOAT16: return (DLDataType){kDLBfloat, 16, 1};
    default: return (DLDataType){kDLUInt, 8, 1};
    }
}

struct DLManagedTensor *shard_device_batch_dlpack(const ShardDeviceBatch *b, int which,
                                                  void *stream)
{
    /* DLPack's stream 1 is CUDA's legacy default stream, the driver's CU_STREAM_LEGACY */
    void *on = stream ? stream : (void *)1;
    Export *e = calloc(1, sizeof *e);
    if (!e || shard_device_batch_wait(b, on) != 0) {
        free(e);
        return NULL;
    }
    shard_device_batch_retain(b);
    e->b = b;
    e->stream = on;
    DLTensor *d = &e->t.dl_tensor;
    d->device = (DLDevice){kDLCUDA, b->device};
    d->shape = e->shape;
    d->strides = NULL; /* compact, row-major */
    d->byte_offset = 0;
    if (which == SHARD_DLPACK_LABELS) {
        d->data = b->labels;
        d->ndim = 1;
        d->dtype = (DLDataType){kDLInt, 64, 1};
        e->shape[0] = (int64_t)b->size;
    } else {
        int nchw = b->layout == SHARD_LAYOUT_NCHW;
        d->data = b->images;
        d->ndim = 4;
        d->dtype = dl_type(b->dtype);
        e->shape[0] = (int64_t)b->size;
        e->shape[1] = nchw ? 3 : b->height;
        e->shape[2] = nchw ? b->height : b->width;
        e->shape[3] = nchw ? b->width : 3;
    }
    e->t.manager_ctx = e;
    e->t.deleter = deleter;
    return &e->t;
}
