/* libshard._libshard's PackPlan (_pack.c). */
#ifndef LIBSHARD_PY_PACK_H
#define LIBSHARD_PY_PACK_H

#include <Python.h>

/* Adds PackPlan to the module m; 0 or -1. */
int shard_py_pack_ready(PyObject *m);

#endif
