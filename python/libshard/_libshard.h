/*
 * What the binding's C files share: the exception for a libshard error code, and the
 * writing half's types (_pack.c), added to the module by _libshard.c.
 */
#ifndef LIBSHARD_PY_H
#define LIBSHARD_PY_H

#include <Python.h>

/* Sets the exception for code (ValueError, FileNotFoundError, MemoryError or ShardError)
 * with msg; returns NULL. */
PyObject *shard_py_raise(int code, const char *msg);

extern PyTypeObject ShardPyWriterType;
extern PyTypeObject ShardPyPackPlanType;

/* The GPU half (_gpu.c): its types added to the module m; 0 or -1. */
int shard_py_gpu_ready(PyObject *m);
/* A Gpu object's pinned allocator, or NULL with TypeError. */
struct ShardAllocator;
const struct ShardAllocator *shard_py_pinned(PyObject *gpu);
/* A batch's keys as a list of str (surrogateescape), and its raw fields as
 * {name: [bytes, or None where a sample lacks it]}: new references, NULL with an exception. */
struct ShardBatch;
PyObject *shard_py_batch_keys(const struct ShardBatch *b);
PyObject *shard_py_batch_fields(const struct ShardBatch *b);
/* Stage statistics as Loader.stats() gives them (stages not in the pipeline left out): a
 * new reference, NULL with an exception. */
struct ShardLoaderStats;
PyObject *shard_py_stats_dict(const struct ShardLoaderStats *st);
/* A Loader object's loader (_libshard.c), or NULL with TypeError or ValueError. */
struct ShardLoader;
struct ShardLoader *shard_py_loader(PyObject *loader);

#endif
