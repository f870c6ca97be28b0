/* libshard._libshard's TarMembers: a tar's members read by libshard's reader (_tarmembers.c). */
#ifndef LIBSHARD_PY_TARMEMBERS_H
#define LIBSHARD_PY_TARMEMBERS_H

#include <Python.h>

#include <shard/shard.h>

/* A TarMembers over the stream *s (nothing read from it yet) and the remote *rm it reads
 * through: both taken over (*s and *rm become NULL, on failure too); url names it; a
 * member past max_member, or consecutive members of one key past max_sample bytes, an
 * error before they are read. A new reference, or NULL with an exception (the shard's
 * error: no tar, a damaged start). */
PyObject *shard_py_tarmembers_new(ShardStream **s, ShardRemote **rm, PyObject *url,
                                  uint64_t max_member, uint64_t max_sample);

/* Adds TarMembers to the module m; 0 or -1. */
int shard_py_tarmembers_ready(PyObject *m);

#endif
