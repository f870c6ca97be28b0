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

#endif
