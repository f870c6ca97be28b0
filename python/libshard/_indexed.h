/* libshard._libshard's indexed access: ShardFiles and list_shards (_indexed.c). */
#ifndef LIBSHARD_PY_INDEXED_H
#define LIBSHARD_PY_INDEXED_H

#include <Python.h>

/* Adds ShardFiles and list_shards to the module m; 0 or -1. */
int shard_py_indexed_ready(PyObject *m);

#endif
