/*
 * What Reader and Loader share: a handle on a stream of samples or batches, its remote
 * reader, the process it was made in, and the methods written once for both (state,
 * restore, set_epoch, seed, remote_stats), each calling the handle's own function through
 * its type's ShardPyStreamOps.
 */
#ifndef LIBSHARD_PY_STREAM_H
#define LIBSHARD_PY_STREAM_H

#include <Python.h>

#include <sys/types.h>

#include <shard/shard.h>

#include "_common.h"
#include "_settings.h"

/* A handle's functions (a ShardReader's or a ShardLoader's). */
typedef struct ShardPyStreamOps {
    const char *what; /* "Reader", for messages */
    int (*state)(const void *h, char *buf, size_t size);
    int (*restore)(void *h, const char *state);
    int (*set_epoch)(void *h, uint64_t epoch);
    uint64_t (*seed)(const void *h);
    const char *(*error)(const void *h);
    void (*free)(void **h);
} ShardPyStreamOps;

typedef struct ShardPyStream {
    PyObject_HEAD
    void *h;                      /* the ShardReader or ShardLoader; NULL before __init__ */
    ShardRemote *rm;              /* freed after h */
    pid_t pid;                    /* the process whose threads h runs */
    const ShardPyStreamOps *ops;  /* set by the type's tp_new */
} ShardPyStream;

/* An object made before a fork has its threads in the parent only: in the child it can be
 * neither used nor freed (joining threads that are not there). 0 when s can be used here;
 * -1 with ShardError when its __init__ failed or never ran, or it was made in another
 * process. */
int shard_py_stream_live(ShardPyStream *s);

/* tp_new and tp_dealloc for a stream type whose ops are ops. */
PyObject *shard_py_stream_new(PyTypeObject *type, const ShardPyStreamOps *ops);
void shard_py_stream_dealloc(ShardPyStream *s);
/* Frees the handle, then the remote reader, with the GIL released: 1; or 0, freeing
 * nothing, when s was inherited through a fork (what it holds is the parent's). */
int shard_py_stream_clear(ShardPyStream *s);

/* Adds the shared methods and getters to type (after PyType_Ready); 0 or -1. */
int shard_py_stream_ready(PyTypeObject *type);

/* The reader settings Reader and Loader take (the reader's and the remote tables), into s
 * (filled with the defaults by the caller) for the call's urls: the shard specs parsed into
 * sp (shard_py_specs_free after the open) and the remote reader made into s->remote and
 * *rm (freed after the handle). Strings stay valid while *keep lives. 0 or -1. */
int shard_py_stream_settings(const ShardPySignature *sig, PyObject *args, PyObject *kw,
                             ShardReaderSettings *s, const ShardPyTarget *more, size_t nmore,
                             PyObject **values, ShardPySpecs *sp, ShardRemote **rm,
                             PyObject **keep);

#endif
