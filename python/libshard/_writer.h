/* libshard._libshard's Writer, and the shards' info dicts (_writer.c). */
#ifndef LIBSHARD_PY_WRITER_H
#define LIBSHARD_PY_WRITER_H

#include <Python.h>

#include <shard/shard.h>

/* Adds Writer to the module m; 0 or -1. */
int shard_py_writer_ready(PyObject *m);

/* A shard's info as a dict: url, nsamples, filesize, tarsize and its digests (md5sum,
 * sha256) where it has them; a new reference, NULL with an exception. */
PyObject *shard_py_info_dict(const ShardFileInfo *x);

/* Such a dict back into x (its url borrowed from the dict); 0 or -1 with an exception. */
int shard_py_info_from_dict(PyObject *d, ShardFileInfo *x);

#endif
