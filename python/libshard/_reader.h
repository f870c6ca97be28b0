/* libshard._libshard's Reader (_reader.c). */
#ifndef LIBSHARD_PY_READER_H
#define LIBSHARD_PY_READER_H

#include <Python.h>

/* Adds Reader to the module m; 0 or -1. */
int shard_py_reader_ready(PyObject *m);

#endif
