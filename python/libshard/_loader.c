/*
 * libshard._libshard, Loader and Batch: decoded batches (shard/loader.h) whose buffers are
 * exported without a copy. A Batch object owns one of the loader's batch buffers until it
 * is garbage: tensors made from its buffers keep it alive, and its buffer goes back to the
 * ring when the last of them is gone. The Loader's state, restore, set_epoch, seed and
 * remote_stats are the stream's (_stream.c).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>

#include <unistd.h>

#include "_gpu.h"
#include "_loader.h"
#include "_stream.h"

typedef struct {
    ShardPyStream base; /* base.h: the ShardLoader */
    PyObject *gpu;      /* the Gpu whose pinned memory the batches are in; released after h */
    int layout, dtype, width, height;
} LoaderObject;

typedef struct {
    PyObject_HEAD
    LoaderObject *loader; /* strong reference */
    const ShardBatch *b;
    Py_ssize_t shape[4];
} BatchObject;

static PyTypeObject BatchType;
static PyTypeObject LoaderType;

static int loader_state(const void *h, char *buf, size_t size)
{
    return shard_loader_state(h, buf, size);
}
static int loader_restore(void *h, const char *state) { return shard_loader_restore(h, state); }
static int loader_set_epoch(void *h, uint64_t e) { return shard_loader_set_epoch(h, e); }
static uint64_t loader_seed(const void *h) { return shard_loader_seed(h); }
static const char *loader_error(const void *h) { return shard_loader_error(h); }
static void loader_free(void **h)
{
    ShardLoader *l = *h;
    shard_loader_free(&l);
    *h = NULL;
}

static const ShardPyStreamOps loader_ops = {"Loader",    loader_state, loader_restore,
                                            loader_set_epoch, loader_seed, loader_error,
                                            loader_free};

static PyObject *Loader_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args, (void)kw;
    return shard_py_stream_new(type, &loader_ops);
}

static const char *const loader_params[] = {"urls", "gpu", NULL};
static const ShardPySignature loader_signature = {"Loader", loader_params, 1, 1, 0};

typedef struct {
    const ShardLoaderSettings *s;
    ShardLoader *l;
    ShardError err;
} LoaderOpen;

static int loader_open_fn(void *arg)
{
    LoaderOpen *o = arg;
    return shard_loader_open(&o->l, o->s, &o->err);
}

static int loader_open(LoaderObject *self, const ShardLoaderSettings *s, PyObject *gpu)
{
    const ShardTransform *t = &s->transform;
    self->layout = t->layout;
    self->dtype = t->dtype;
    self->width = t->width;
    self->height = t->height;
    Py_XINCREF(gpu);
    Py_XSETREF(self->gpu, gpu);
    self->base.pid = getpid();
    LoaderOpen o = {s, NULL, {0}};
    int rc;
    if (shard_py_blocking(loader_open_fn, &o, self->base.rm, &rc)) {
        /* Ctrl-C while it listed the shards: its producer may already read, and its
         * threads log retries under the GIL, so they are joined without it */
        Py_BEGIN_ALLOW_THREADS
        shard_loader_free(&o.l);
        Py_END_ALLOW_THREADS
        return -1;
    }
    self->base.h = o.l;
    if (rc)
        shard_py_raise(rc, o.err.message);
    else
        shard_loader_set_wait(o.l, SHARD_PY_WAIT_SLICE);
    return rc ? -1 : 0;
}

static int Loader_init(LoaderObject *self, PyObject *args, PyObject *kw)
{
    ShardLoaderSettings s;
    shard_loader_default_settings(&s);
    ShardPyTarget more[] = {{&shard_py_loader_table, &s},
                            {&shard_py_transform_table, &s.transform}};
    PyObject *values[2], *keep = NULL;
    ShardPySpecs sp;
    shard_py_stream_clear(&self->base); /* a second __init__: the last loader goes first */
    int rc = shard_py_stream_settings(&loader_signature, args, kw, &s.reader, more, 2, values,
                                      &sp, &self->base.rm, &keep);
    PyObject *gpu = rc || values[1] == Py_None ? NULL : values[1];
    if (!rc && gpu && !(s.allocator = shard_py_pinned(gpu)))
        rc = -1;
    if (!rc)
        rc = loader_open(self, &s, gpu);
    shard_py_specs_free(&sp);
    Py_XDECREF(keep);
    return rc;
}

static void Loader_dealloc(LoaderObject *self)
{
    if (shard_py_stream_clear(&self->base))
        Py_CLEAR(self->gpu); /* its pinned memory went with the loader */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

ShardLoader *shard_py_loader(PyObject *o)
{
    if (!PyObject_TypeCheck(o, &LoaderType)) {
        PyErr_Format(PyExc_TypeError, "loader: a libshard Loader, not %R", o);
        return NULL;
    }
    LoaderObject *lo = (LoaderObject *)o;
    if (!lo->base.h || lo->base.pid != getpid()) {
        PyErr_SetString(PyExc_ValueError, "loader: not open in this process");
        return NULL;
    }
    return lo->base.h;
}

static PyObject *Loader_next(LoaderObject *self)
{
    if (shard_py_stream_live(&self->base))
        return NULL;
    ShardLoader *l = self->base.h;
    const ShardBatch *b;
    int rc;
    do { /* in slices, so that Ctrl-C is a KeyboardInterrupt at once, not after the batch */
        Py_BEGIN_ALLOW_THREADS
        rc = shard_loader_next(l, &b);
        Py_END_ALLOW_THREADS
        if (rc == SHARD_AGAIN && PyErr_CheckSignals())
            return NULL;
    } while (rc == SHARD_AGAIN);
    if (rc == SHARD_EOS)
        return NULL;
    if (rc)
        return shard_py_raise(rc, shard_loader_error(l));
    BatchObject *o = PyObject_New(BatchObject, &BatchType);
    if (!o) {
        shard_batch_release(l, b);
        return NULL;
    }
    Py_INCREF(self);
    o->loader = self;
    o->b = b;
    return (PyObject *)o;
}

static PyObject *Loader_epoch_batches(LoaderObject *self, void *c)
{
    (void)c;
    if (shard_py_stream_live(&self->base))
        return NULL;
    int64_t n = shard_loader_epoch_batches(self->base.h);
    if (n < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(n);
}

static PyObject *Loader_skipped(LoaderObject *self, void *c)
{
    (void)c;
    if (shard_py_stream_live(&self->base))
        return NULL;
    return PyLong_FromUnsignedLongLong(shard_loader_skipped(self->base.h));
}

static PyObject *Loader_held(LoaderObject *self, void *c)
{
    (void)c;
    if (shard_py_stream_live(&self->base))
        return NULL;
    size_t held, batches;
    shard_loader_held(self->base.h, &held, &batches);
    return Py_BuildValue("(nn)", (Py_ssize_t)held, (Py_ssize_t)batches);
}

static PyObject *Loader_skipped_by(LoaderObject *self, void *c)
{
    (void)c;
    if (shard_py_stream_live(&self->base))
        return NULL;
    ShardLoader *l = self->base.h;
    ShardReaderStats st;
    shard_loader_reader_stats(l, &st);
    unsigned long long samples = shard_loader_skipped(l);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "image",
                         (unsigned long long)shard_loader_skipped_by(l, SHARD_BAD_IMAGE),
                         "no_image",
                         (unsigned long long)shard_loader_skipped_by(l, SHARD_BAD_NO_IMAGE),
                         "label", (unsigned long long)shard_loader_skipped_by(l, SHARD_BAD_LABEL),
                         "no_size", (unsigned long long)st.skipped_unsized,
                         "shards", (unsigned long long)st.skipped_shards, "shard_samples",
                         (unsigned long long)st.skipped_samples, "batches",
                         (unsigned long long)shard_loader_skipped_batches(l), "total",
                         samples + (unsigned long long)st.skipped_samples +
                             (unsigned long long)st.skipped_unsized);
}

static PyObject *Loader_stats(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (shard_py_stream_live(&self->base))
        return NULL;
    ShardLoaderStats st;
    shard_loader_stats(self->base.h, &st);
    PyObject *d = shard_py_stats_dict(&st);
    size_t n = d ? shard_loader_buckets(self->base.h, NULL, NULL, NULL, 0) : 0;
    if (!n)
        return d;
    int *h = PyMem_Calloc(n, sizeof *h), *w = PyMem_Calloc(n, sizeof *w);
    uint64_t *c = PyMem_Calloc(n, sizeof *c);
    PyObject *b = h && w && c ? PyDict_New() : PyErr_NoMemory();
    if (b)
        shard_loader_buckets(self->base.h, h, w, c, n);
    for (size_t i = 0; b && i < n; i++) { /* {"HxW": samples}, in the buckets' order */
        PyObject *v = PyLong_FromUnsignedLongLong(c[i]);
        char name[32];
        snprintf(name, sizeof name, "%dx%d", h[i], w[i]);
        if (!v || PyDict_SetItemString(b, name, v))
            Py_CLEAR(b);
        Py_XDECREF(v);
    }
    PyMem_Free(h);
    PyMem_Free(w);
    PyMem_Free(c);
    if (!b || PyDict_SetItemString(d, "buckets", b))
        Py_CLEAR(d);
    Py_XDECREF(b);
    return d;
}

static PyObject *Loader_write_trace(LoaderObject *self, PyObject *arg)
{
    if (shard_py_stream_live(&self->base))
        return NULL;
    PyObject *b;
    if (!PyUnicode_FSConverter(arg, &b))
        return NULL;
    ShardError err;
    int rc = shard_loader_trace_write(self->base.h, PyBytes_AS_STRING(b), &err);
    Py_DECREF(b);
    if (rc)
        return shard_py_raise(rc, err.message);
    Py_RETURN_NONE;
}

static PyObject *Loader_stop(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (shard_py_stream_live(&self->base))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    shard_loader_stop(self->base.h);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef Loader_methods[] = {
    {"stop", (PyCFunction)Loader_stop, METH_NOARGS,
     "Stops the threads and the pipe: commands they wait on now; held batches stay valid."},
    {"write_trace", (PyCFunction)Loader_write_trace, METH_O,
     "write_trace(path): the spans so far (a Loader made with trace=...), Chrome trace JSON"},
    {"stats", (PyCFunction)Loader_stats, METH_NOARGS,
     "Per-stage counters since the loader opened (fetch, shuffle, batch, decode, deliver: "
     "items, bytes, busy and waiting seconds, queue fill), the bottleneck and the verdict."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Loader_getset[] = {
    {"epoch_batches", (getter)Loader_epoch_batches, NULL, "batches per epoch or None", NULL},
    {"skipped", (getter)Loader_skipped, NULL, "samples left out after decode errors", NULL},
    {"held", (getter)Loader_held, NULL,
     "(batches the caller holds, the ring's batch buffers): a caller that keeps batches "
     "copies one out before the ring runs dry", NULL},
    {"skipped_by", (getter)Loader_skipped_by, NULL,
     "what skip mode left out: samples by reason (image, no_image, label, no_size), shards "
     "skipped "
     "after errors and the samples lost with them (shard_samples), and the samples' total",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Loader(urls, *, gpu=None, **settings): decoded batches from shards: iterate "
              "for Batch objects. The settings are libshard.settings' reader, remote, loader "
              "and transform tables; gpu: a Gpu, whose pinned memory the batches go into.",
    .tp_new = Loader_new,
    .tp_init = (initproc)Loader_init,
    .tp_dealloc = (destructor)Loader_dealloc,
    .tp_iter = shard_py_self_iter,
    .tp_iternext = (iternextfunc)Loader_next,
    .tp_methods = Loader_methods,
    .tp_getset = Loader_getset,
};

/* ---- Batch ------------------------------------------------------------------------------ */

static void Batch_dealloc(BatchObject *self)
{
    if (self->loader && self->loader->base.h)
        shard_batch_release(self->loader->base.h, self->b);
    Py_XDECREF(self->loader);
    PyObject_Free(self);
}

/* The images, as a buffer of shape (n, C, H, W) or (n, H, W, C), uint8 or float32. */
static int Batch_getbuffer(BatchObject *self, Py_buffer *view, int flags)
{
    LoaderObject *l = self->loader;
    const ShardBatch *b = self->b;
    int f32 = l->dtype == SHARD_DTYPE_FLOAT32;
    self->shape[0] = (Py_ssize_t)b->size;
    int h = b->height ? b->height : l->height, w = b->width ? b->width : l->width;
    if (l->layout == SHARD_LAYOUT_NCHW) {
        self->shape[1] = 3, self->shape[2] = h, self->shape[3] = w;
    } else {
        self->shape[1] = h, self->shape[2] = w, self->shape[3] = 3;
    }
    view->obj = (PyObject *)self;
    Py_INCREF(self);
    view->buf = b->images;
    view->len = (Py_ssize_t)(b->size * b->image_bytes);
    view->readonly = 0;
    view->itemsize = f32 ? 4 : 1;
    view->format = (flags & PyBUF_FORMAT) ? (f32 ? "f" : "B") : NULL;
    view->ndim = 4;
    view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
    view->strides = NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static PyBufferProcs Batch_as_buffer = {(getbufferproc)Batch_getbuffer, NULL};

static PyObject *bytes_of(const void *p, size_t n)
{
    return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
}

enum { LABELS, KEYS, URLS, SOURCES, INDICES, SEEDS, REPEATS, FIELDS, SIZE, BUCKET, INDEX };

/* The batch's per-sample arrays and counts, by the getter's closure (one of the above). */
static PyObject *Batch_get(BatchObject *self, void *c)
{
    const ShardBatch *b = self->b;
    switch ((int)(intptr_t)c) {
    case LABELS:
        return bytes_of(b->labels, b->size * sizeof(int64_t));
    case KEYS:
        return shard_py_names(b->keys, b->size);
    case URLS:
        return shard_py_names(b->urls, b->size);
    case SOURCES:
        return bytes_of(b->sources, b->size * sizeof(uint32_t));
    case INDICES:
        return bytes_of(b->indices, b->size * sizeof(uint64_t));
    case SEEDS:
        return bytes_of(b->seeds, b->size * sizeof(uint64_t));
    case REPEATS:
        return bytes_of(b->repeats, b->size);
    case FIELDS:
        return shard_py_batch_fields(b);
    case SIZE:
        return PyLong_FromSize_t(b->size);
    case BUCKET:
        if (b->bucket < 0)
            Py_RETURN_NONE;
        return Py_BuildValue("(ii)", b->height, b->width);
    default:
        return PyLong_FromUnsignedLongLong(b->index);
    }
}

static PyGetSetDef Batch_getset[] = {
    {"labels", (getter)Batch_get, NULL, "int64 labels as bytes (-1: none)",
     (void *)(intptr_t)LABELS},
    {"keys", (getter)Batch_get, NULL, "sample keys", (void *)(intptr_t)KEYS},
    {"urls", (getter)Batch_get, NULL, "each sample's shard url", (void *)(intptr_t)URLS},
    {"sources", (getter)Batch_get, NULL,
     "each sample's source in a mix (uint32 bytes; 0 without a mix)", (void *)(intptr_t)SOURCES},
    {"indices", (getter)Batch_get, NULL,
     "each sample's index in the data set (uint64 bytes; 2**64-1 where counts are unknown)",
     (void *)(intptr_t)INDICES},
    {"seeds", (getter)Batch_get, NULL,
     "each sample's seed for its crop and flip (uint64 bytes), as decode(seed=) takes it",
     (void *)(intptr_t)SEEDS},
    {"repeats", (getter)Batch_get, NULL,
     "1 byte per sample: 1 where it is padding (equal mode with pad)", (void *)(intptr_t)REPEATS},
    {"fields", (getter)Batch_get, NULL,
     "raw fields: {name: [bytes, or None where a sample lacks it]}", (void *)(intptr_t)FIELDS},
    {"size", (getter)Batch_get, NULL, "samples in the batch", (void *)(intptr_t)SIZE},
    {"bucket", (getter)Batch_get, NULL,
     "with aspect_buckets the batch's bucket as (height, width), else None",
     (void *)(intptr_t)BUCKET},
    {"index", (getter)Batch_get, NULL, "batch number in the epoch", (void *)(intptr_t)INDEX},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A decoded batch; its images are exported with the buffer protocol.",
    .tp_dealloc = (destructor)Batch_dealloc,
    .tp_as_buffer = &Batch_as_buffer,
    .tp_getset = Batch_getset,
};

int shard_py_loader_ready(PyObject *m)
{
    PyTypeObject *types[] = {&LoaderType, &BatchType};
    return shard_py_add_types(m, types, 2) || shard_py_stream_ready(&LoaderType) ? -1 : 0;
}
