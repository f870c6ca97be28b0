/*
 * libshard._libshard, Reader: raw samples as WebDataset's dicts (shard/reader.h). Its
 * state, restore, set_epoch, seed and remote_stats are the stream's (_stream.c).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <unistd.h>

#include "_reader.h"
#include "_stream.h"

static int reader_state(const void *h, char *buf, size_t size)
{
    return shard_reader_state(h, buf, size);
}
static int reader_restore(void *h, const char *state) { return shard_reader_restore(h, state); }
static int reader_set_epoch(void *h, uint64_t e) { return shard_reader_set_epoch(h, e); }
static uint64_t reader_seed(const void *h) { return shard_reader_seed(h); }
static const char *reader_error(const void *h) { return shard_reader_error(h); }
static void reader_free(void **h)
{
    ShardReader *r = *h;
    shard_reader_free(&r);
    *h = NULL;
}

static const ShardPyStreamOps reader_ops = {"Reader",    reader_state, reader_restore,
                                            reader_set_epoch, reader_seed, reader_error,
                                            reader_free};

static const char *const reader_params[] = {"urls", NULL};
static const ShardPySignature reader_signature = {"Reader", reader_params, 1, 1, 0};

static PyObject *Reader_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args, (void)kw;
    return shard_py_stream_new(type, &reader_ops);
}

typedef struct {
    const ShardReaderSettings *s;
    ShardReader *r;
    ShardError err;
} ReaderOpen;

static int reader_open(void *arg)
{
    ReaderOpen *o = arg;
    return shard_reader_open(&o->r, o->s, &o->err);
}

static int Reader_init(ShardPyStream *self, PyObject *args, PyObject *kw)
{
    ShardReaderSettings s;
    shard_reader_default_settings(&s);
    PyObject *urls, *keep = NULL;
    ShardPySpecs sp;
    shard_py_stream_clear(self); /* a second __init__: the last reader goes first */
    ShardPyTarget batches = {&shard_py_reader_batch_table, &s};
    int rc = shard_py_stream_settings(&reader_signature, args, kw, &s, &batches, 1, &urls, &sp,
                                      &self->rm, &keep);
    if (!rc) {
        ReaderOpen o = {&s, NULL, {0}};
        self->pid = getpid();
        if (shard_py_blocking(reader_open, &o, self->rm, &rc)) {
            /* Ctrl-C while it listed the shards; its threads may wait on the GIL to log */
            Py_BEGIN_ALLOW_THREADS
            shard_reader_free(&o.r);
            Py_END_ALLOW_THREADS
            rc = -1;
        } else if (rc) {
            shard_py_raise(rc, o.err.message);
        } else {
            self->h = o.r;
            shard_reader_set_wait(o.r, SHARD_PY_WAIT_SLICE);
        }
    }
    shard_py_specs_free(&sp);
    Py_XDECREF(keep);
    return rc ? -1 : 0;
}

static PyObject *Reader_next(ShardPyStream *self)
{
    if (shard_py_stream_live(self))
        return NULL;
    ShardItem *it;
    int rc;
    do { /* in slices, so that Ctrl-C is a KeyboardInterrupt at once, not after the sample */
        Py_BEGIN_ALLOW_THREADS
        rc = shard_reader_take(self->h, &it);
        Py_END_ALLOW_THREADS
        if (rc == SHARD_AGAIN && PyErr_CheckSignals())
            return NULL;
    } while (rc == SHARD_AGAIN);
    if (rc == SHARD_EOS)
        return NULL; /* StopIteration */
    if (rc)
        return shard_py_raise(rc, shard_reader_error(self->h));
    PyObject *d = shard_py_sample_dict(shard_item_sample(it));
    int h, w, end;
    if (d && shard_reader_bucket(self->h, it, &h, &w, &end) >= 0) {
        PyObject *b = Py_BuildValue("(ii)", h, w);
        if (!b || PyDict_SetItemString(d, "__bucket__", b) ||
            PyDict_SetItemString(d, "__batch_end__", end ? Py_True : Py_False))
            Py_CLEAR(d);
        Py_XDECREF(b);
    }
    shard_item_free(&it);
    return d;
}

static PyObject *Reader_epoch_length(ShardPyStream *self, void *c)
{
    (void)c;
    if (shard_py_stream_live(self))
        return NULL;
    int64_t n = shard_reader_epoch_length(self->h);
    if (n < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(n);
}

static PyObject *kept_errors(const ShardReader *r)
{
    PyObject *errors = PyList_New(0);
    for (size_t i = 0; errors && shard_reader_kept_error(r, i); i++) {
        PyObject *e = PyUnicode_FromString(shard_reader_kept_error(r, i));
        if (!e || PyList_Append(errors, e))
            Py_CLEAR(errors);
        Py_XDECREF(e);
    }
    return errors;
}

static PyObject *Reader_stats(ShardPyStream *self, PyObject *unused)
{
    (void)unused;
    if (shard_py_stream_live(self))
        return NULL;
    ShardReaderStats st;
    shard_reader_stats(self->h, &st);
    PyObject *errors = kept_errors(self->h);
    if (!errors)
        return NULL;
    return Py_BuildValue("{s:K,s:K,s:K,s:d,s:K,s:K,s:K,s:N,s:K,s:K,s:K,s:K,s:K,s:K}", "samples", st.samples,
                         "bytes", st.bytes, "shards_opened", st.shards_opened, "wait_seconds",
                         st.wait_seconds, "skipped_shards", st.skipped_shards, "skipped_samples",
                         st.skipped_samples, "errors", st.errors, "kept_errors", errors,
                         "indexes_built", st.indexes_built, "indexes_cached",
                         st.indexes_cached, "skipped_unsized", st.skipped_unsized,
                         "keys_given", st.keys_given, "keys_missing", st.keys_missing,
                         "keys_chosen", st.keys_chosen);
}

static PyObject *Reader_stop(ShardPyStream *self, PyObject *unused)
{
    (void)unused;
    if (shard_py_stream_live(self))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    shard_reader_stop(self->h);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *Reader_state_after(ShardPyStream *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"batches", "batch_size", "drop_last", "first", NULL};
    unsigned long long batches, bs;
    int drop_last = 0, first = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KK|pi", names, &batches, &bs, &drop_last,
                                     &first))
        return NULL;
    if (shard_py_stream_live(self))
        return NULL;
    char *buf = PyMem_Malloc(SHARD_READER_STATE_MAX);
    if (!buf)
        return PyErr_NoMemory();
    int rc = shard_reader_state_after(self->h, batches, bs, drop_last, first, buf,
                                      SHARD_READER_STATE_MAX);
    PyObject *out = rc == SHARD_ERR_UNSUPPORTED
                        ? shard_py_raise(rc, "state_after needs every shard's sample count "
                                             "(not resampled mode), and a batch size")
                    : rc ? shard_py_raise(rc, "no such first worker, or the state does not fit "
                                              "in SHARD_READER_STATE_MAX bytes")
                         : PyUnicode_FromString(buf);
    PyMem_Free(buf);
    return out;
}

static PyObject *Reader_rank_batches(ShardPyStream *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"batch_size", "drop_last", "rank", NULL};
    unsigned long long bs;
    int drop_last = 0, rank = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "K|pi", names, &bs, &drop_last, &rank))
        return NULL;
    if (shard_py_stream_live(self))
        return NULL;
    int64_t n = shard_reader_rank_batches(self->h, rank, bs, drop_last);
    if (n < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(n);
}

static PyObject *Reader_partitions(ShardPyStream *self, void *c)
{
    (void)c;
    if (shard_py_stream_live(self))
        return NULL;
    return PyLong_FromUnsignedLong(shard_reader_partitions(self->h));
}

static PyMethodDef Reader_methods[] = {
    {"state_after", (PyCFunction)(void (*)(void))Reader_state_after, METH_VARARGS | METH_KEYWORDS,
     "state_after(batches, batch_size, drop_last=False, first=0): the job's state after "
     "every rank delivered that many batches since this reader's epoch or restore began, its "
     "workers' in turn from worker first (shard_reader_state_after)."},
    {"rank_batches", (PyCFunction)(void (*)(void))Reader_rank_batches,
     METH_VARARGS | METH_KEYWORDS,
     "rank_batches(batch_size, drop_last=False, rank=-1): a rank's batches in the epoch (-1: "
     "this reader's), its num_workers workers' together; None without every shard's count."},
    {"stop", (PyCFunction)Reader_stop, METH_NOARGS,
     "Stops the threads and the pipe: commands they wait on now."},
    {"stats", (PyCFunction)Reader_stats, METH_NOARGS, "Counters and kept errors."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Reader_getset[] = {
    {"epoch_length", (getter)Reader_epoch_length, NULL, "samples per epoch or None", NULL},
    {"partitions", (getter)Reader_partitions, NULL, "the epoch's partition count", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.Reader",
    .tp_basicsize = sizeof(ShardPyStream),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reader(urls, **settings): raw samples as WebDataset dicts: {'__key__', "
              "'__url__', field: bytes}. urls: a spec (path, URL, braces, manifest, prefix), a "
              "list of them, or a mix: a list of (spec or list of specs, weight) pairs. The "
              "settings are libshard.settings' reader and remote tables.",
    .tp_new = Reader_new,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)shard_py_stream_dealloc,
    .tp_iter = shard_py_self_iter,
    .tp_iternext = (iternextfunc)Reader_next,
    .tp_methods = Reader_methods,
    .tp_getset = Reader_getset,
};

int shard_py_reader_ready(PyObject *m)
{
    PyTypeObject *types[] = {&ReaderType};
    return shard_py_add_types(m, types, 1) || shard_py_stream_ready(&ReaderType) ? -1 : 0;
}
