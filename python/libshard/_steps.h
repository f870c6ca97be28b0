/* libshard._libshard's StepPlan (_steps.c). */
#ifndef LIBSHARD_PY_STEPS_H
#define LIBSHARD_PY_STEPS_H

#include <Python.h>

/* Adds StepPlan to the module m; 0 or -1. */
int shard_py_steps_ready(PyObject *m);

#endif
