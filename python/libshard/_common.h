/*
 * The lowest layer of the binding, which every other file of the extension may use and
 * which uses none of them: the ShardError exception and the conversions of library values
 * to Python values that several types share (samples, batches, statistics, shard specs).
 * The files above it use one another in one direction only (_libshard.c has the map).
 */
#ifndef LIBSHARD_PY_COMMON_H
#define LIBSHARD_PY_COMMON_H

#include <Python.h>

#include <shard/shard.h>

/* How long a wait in the library lasts before the binding checks for signals (Ctrl-C)
 * and waits again: a KeyboardInterrupt comes within it. */
#define SHARD_PY_WAIT_SLICE 0.05

/* Runs fn(arg) (an open, a listing: what may wait long on the network) on a thread of its
 * own while this one, the caller's with the GIL, waits in slices checking for signals. On
 * Ctrl-C it aborts rm (NULL: none; what fn waits on) and waits for fn to end, soon then.
 * fn's result goes to *rc. @return 0; -1 with KeyboardInterrupt (or the signal handler's
 * exception) set, when interrupted: then the caller frees what fn made. */
int shard_py_blocking(int (*fn)(void *arg), void *arg, ShardRemote *rm, int *rc);

/* Hands the memory malloc holds free back to the system (glibc's malloc_trim): a list of a
 * million shards, expanded on a thread of its own, leaves hundreds of MiB in that thread's
 * arena otherwise. */
void shard_py_trim(void);

/* Creates ShardError and adds it to the module m; 0 or -1. */
int shard_py_common_ready(PyObject *m);

/* Sets the exception for code (ValueError, FileNotFoundError, MemoryError or ShardError)
 * with msg (shard_strerror(code) when empty); returns NULL. */
PyObject *shard_py_raise(int code, const char *msg);

/* Adds each type to the module m under its short name, after PyType_Ready; 0 or -1. */
int shard_py_add_types(PyObject *m, PyTypeObject *const *types, size_t n);

/* tp_iter of the iterators: the object itself. */
PyObject *shard_py_self_iter(PyObject *self);

/* A sample as WebDataset gives it, {"__key__", "__url__", field: bytes}: a new reference,
 * NULL with an exception. */
PyObject *shard_py_sample_dict(const ShardSampleView *v);

/* n names (a batch's keys or urls) as a list of str (surrogateescape), and a batch's raw
 * fields as {name: [bytes, or None where a sample lacks it]}: new references, NULL with an
 * exception. */
PyObject *shard_py_names(const char *const *names, size_t n);
PyObject *shard_py_batch_fields(const ShardBatch *b);

/* Stage statistics as Loader.stats() gives them (stages not in the pipeline left out), and
 * a remote reader's counters: new references, NULL with an exception. */
PyObject *shard_py_stats_dict(const ShardLoaderStats *st);
PyObject *shard_py_remote_stats(ShardRemote *rm);

/* A remote reader with the settings rs, into *out; 0, or -1 with the exception set. */
int shard_py_remote_new(const ShardRemoteSettings *rs, ShardRemote **out);

/* Shard specs as Python gives them: a str or path, a list of them (one source), or a list
 * of (spec or list of specs, weight) pairs (a mix). */
typedef struct ShardPySpecs {
    const char **urls; /* borrowed from keep */
    size_t n;
    ShardMixInput *sources; /* their urls point into urls; NULL unless a mix */
    size_t nsources;
    PyObject *keep; /* the str objects */
} ShardPySpecs;

/* Parses o into sp (zeroed first); 0, or -1 with an exception (sp then empty). */
int shard_py_specs_parse(PyObject *o, ShardPySpecs *sp);
/* Releases what sp holds; sp may be zeroed or already freed. */
void shard_py_specs_free(ShardPySpecs *sp);

#endif
