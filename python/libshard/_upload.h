/* libshard._libshard's upload to the GPU: Uploader, DeviceBatch, DeviceArray (_upload.c). */
#ifndef LIBSHARD_PY_UPLOAD_H
#define LIBSHARD_PY_UPLOAD_H

#include <Python.h>

/* Adds Uploader, DeviceBatch and DeviceArray to the module m; 0 or -1. */
int shard_py_upload_ready(PyObject *m);

#endif
