/* libshard._libshard's RawStream: the raw bytes of a URL (_rawstream.c). */
#ifndef LIBSHARD_PY_RAWSTREAM_H
#define LIBSHARD_PY_RAWSTREAM_H

#include <Python.h>

/* Adds RawStream to the module m; 0 or -1. */
int shard_py_rawstream_ready(PyObject *m);

#endif
