/* libshard._libshard's Ring and RingView: shared memory that samples' bytes cross in from a
 * DataLoader worker to the main process (_crossing.c). */
#ifndef LIBSHARD_PY_CROSSING_H
#define LIBSHARD_PY_CROSSING_H

#include <Python.h>

/* Adds Ring and RingView to the module m; 0 or -1. */
int shard_py_crossing_ready(PyObject *m);

#endif
