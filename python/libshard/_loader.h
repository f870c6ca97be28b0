/* libshard._libshard's Loader and Batch (_loader.c). */
#ifndef LIBSHARD_PY_LOADER_H
#define LIBSHARD_PY_LOADER_H

#include <Python.h>

#include <shard/shard.h>

/* Adds Loader and Batch to the module m; 0 or -1. */
int shard_py_loader_ready(PyObject *m);

/* A Loader object's loader, or NULL with TypeError or ValueError. */
ShardLoader *shard_py_loader(PyObject *loader);

#endif
