/* libshard._libshard's Gpu (_gpu.c): a CUDA device, for Loader's pinned memory and for
 * Uploader. */
#ifndef LIBSHARD_PY_GPU_H
#define LIBSHARD_PY_GPU_H

#include <Python.h>

#include <shard/shard.h>

/* Adds Gpu and gpu_kernels to the module m; 0 or -1. */
int shard_py_gpu_ready(PyObject *m);

/* A Gpu object's device, or NULL with TypeError. */
ShardGpu *shard_py_gpu(PyObject *gpu);

/* A Gpu object's pinned allocator, or NULL with TypeError. */
const ShardAllocator *shard_py_pinned(PyObject *gpu);

#endif
