/*
 * libshard._libshard, the upload to the GPU (shard/gpu.h): Uploader (the ring of device
 * buffers on a Gpu, fed by a Loader's thread or by put), DeviceBatch and
 * its DeviceArray views, which torch.from_dlpack (or any DLPack consumer) takes with the
 * stream protocol: the consumer's stream waits for the upload, and the buffer is reused only
 * after the work that stream queued before the tensor was freed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlpack/dlpack.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <shard/shard.h>

#include "_common.h"
#include "_gpu.h"
#include "_loader.h"
#include "_settings.h"
#include "_upload.h"

/* ---- Uploader ------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD ShardUploader *u;
    PyObject *gpu;    /* strong */
    PyObject *loader; /* strong, or NULL: freed after u */
    int ended;
    pid_t pid;
    int height, width; /* the settings', which put's arrays must have */
    size_t batch_size;
} UploaderObject;

typedef struct {
    PyObject_HEAD const ShardDeviceBatch *b; /* the object's hold, released at dealloc */
    pid_t pid; /* a forked child's copy holds nothing: CUDA is not usable there */
    PyObject *keys, *urls, *sources, *fields, *indices, *repeats, *state; /* copied from the
                                                                           host batch */
} DeviceBatchObject;

typedef struct {
    PyObject_HEAD DeviceBatchObject *batch; /* strong */
    int which;
} DeviceArrayObject;

static PyTypeObject DeviceBatchType, DeviceArrayType;

static const char *const uploader_params[] = {"gpu", "loader", "buffers", "batch_size",
                                              "height", "width", "dtype", "layout", "mean",
                                              "std", "decoder", NULL};
static const ShardPySignature uploader_signature = {"Uploader", uploader_params, 11, 1, 1};

static int Uploader_init(UploaderObject *self, PyObject *args, PyObject *kw)
{
    ShardUploadSettings s;
    shard_upload_default_settings(&s);
    ShardPyTarget target = {&shard_py_upload_table, &s};
    PyObject *values[11], *keep = NULL;
    int rc = shard_py_parse(&uploader_signature, args, kw, &target, 1, values, &keep);
    Py_XDECREF(keep); /* no strings among the upload settings */
    if (rc)
        return -1;
    PyObject *gpu = values[0], *loader = values[1] ? values[1] : Py_None;
    ShardGpu *g = shard_py_gpu(gpu);
    ShardLoader *l = NULL;
    if (!g || (loader != Py_None && !(l = shard_py_loader(loader))))
        return -1;
    ShardError err;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_uploader_open(&self->u, g, &s, l, &err);
    Py_END_ALLOW_THREADS
    if (rc) {
        shard_py_raise(rc, err.message);
        return -1;
    }
    Py_INCREF(gpu);
    self->gpu = gpu;
    if (l) {
        Py_INCREF(loader);
        self->loader = loader;
    }
    self->pid = getpid();
    self->height = s.height;
    self->width = s.width;
    self->batch_size = s.batch_size;
    return 0;
}

static void Uploader_close_now(UploaderObject *self)
{
    ShardUploader *u = self->u;
    self->u = NULL;
    if (u && self->pid == getpid()) {
        Py_BEGIN_ALLOW_THREADS shard_uploader_free(&u);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(self->loader); /* after the uploader: it gave the host batches back */
}

static void Uploader_dealloc(UploaderObject *self)
{
    Uploader_close_now(self);
    Py_XDECREF(self->gpu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define NEED_UPLOADER(self)                                                                   \
    do {                                                                                      \
        if (!(self)->u) {                                                                     \
            PyErr_SetString(PyExc_ValueError, "the uploader is closed");                      \
            return NULL;                                                                      \
        }                                                                                     \
    } while (0)

/* A stream from Python: an int (torch's cuda_stream), 0 or None for the legacy default,
 * -1 for none (DLPack's "no synchronization": no wait, and nothing recorded at release). */
static int parse_stream(PyObject *o, void **out)
{
    *out = NULL;
    if (!o || o == Py_None)
        return 0;
    long long sv = PyLong_AsLongLong(o);
    if (sv == -1 && !PyErr_Occurred()) {
        *out = SHARD_STREAM_NONE;
        return 0;
    }
    PyErr_Clear();
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (void *)(uintptr_t)v;
    return 0;
}

static PyObject *bytes_of(const void *p, size_t n)
{
    return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
}

/* Copies what the consumer needs of the host batch, then lets it go. */
static int take_host(DeviceBatchObject *o, const ShardBatch *h)
{
    if (!h)
        return 0;
    o->keys = shard_py_names(h->keys, h->size);
    o->urls = shard_py_names(h->urls, h->size);
    o->sources = bytes_of(h->sources, h->size * sizeof *h->sources);
    o->indices = bytes_of(h->indices, h->size * sizeof *h->indices);
    o->repeats = bytes_of(h->repeats, h->size);
    o->fields = shard_py_batch_fields(h);
    return o->keys && o->urls && o->sources && o->indices && o->repeats && o->fields ? 0 : -1;
}

static PyObject *Uploader_next(UploaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "host", NULL};
    PyObject *so = NULL;
    int host = 0;
    void *stream;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Op", kwlist, &so, &host) ||
        parse_stream(so, &stream))
        return NULL;
    NEED_UPLOADER(self);
    const ShardDeviceBatch *b;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = shard_uploader_next(self->u, stream, &b);
    Py_END_ALLOW_THREADS if (rc == SHARD_EOS) Py_RETURN_NONE;
    if (rc)
        return shard_py_raise(rc, shard_uploader_error(self->u));
    DeviceBatchObject *o = PyObject_New(DeviceBatchObject, &DeviceBatchType);
    if (!o) {
        shard_device_batch_host_done(b);
        shard_device_batch_release(b, SHARD_STREAM_NONE);
        return NULL;
    }
    o->b = b;
    o->pid = getpid();
    o->keys = o->urls = o->sources = o->fields = o->indices = o->repeats = NULL;
    o->state = PyUnicode_FromString(b->state);
    int bad = (host && take_host(o, b->host)) || !o->state;
    shard_device_batch_host_done(b);
    if (bad) {
        Py_DECREF(o);
        return NULL;
    }
    return (PyObject *)o;
}

/* ", shape (a, b, c, d) of N-byte items", for put's error. */
static const char *describe_shape(const Py_buffer *v)
{
    static _Thread_local char buf[128];
    snprintf(buf, sizeof buf, ", shape (%zd, %zd, %zd, %zd) of %zd-byte items", v->shape[0],
             v->shape[1], v->shape[2], v->shape[3], v->itemsize);
    return buf;
}

static PyObject *Uploader_put(UploaderObject *self, PyObject *args)
{
    PyObject *images, *labels = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &images, &labels))
        return NULL;
    NEED_UPLOADER(self);
    Py_buffer iv, lv = {0};
    if (PyObject_GetBuffer(images, &iv, PyBUF_C_CONTIGUOUS))
        return NULL;
    if (labels != Py_None && PyObject_GetBuffer(labels, &lv, PyBUF_C_CONTIGUOUS)) {
        PyBuffer_Release(&iv);
        return NULL;
    }
    PyObject *ret = NULL;
    /* the C side copies n images of the settings' size: anything else would be read past
     * its end, or into the wrong rows */
    int fits = iv.ndim == 4 && iv.itemsize == 1 && iv.shape[1] == self->height &&
               iv.shape[2] == self->width && iv.shape[3] == 3 && iv.shape[0] >= 1 &&
               (size_t)iv.shape[0] <= self->batch_size;
    size_t n = fits ? (size_t)iv.shape[0] : 0;
    if (!fits) {
        PyErr_Format(PyExc_ValueError, "put: images must be uint8 (n, %d, %d, 3) with n from 1 "
                     "to %zu, the uploader's batch_size and image size; got %d dimensions%s",
                     self->height, self->width, self->batch_size, iv.ndim,
                     iv.ndim == 4 ? describe_shape(&iv) : "");
    } else if (lv.buf && (size_t)lv.len != n * sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "put: labels must be %zu int64 (one per image) or None; "
                     "got %zd bytes", n, lv.len);
    } else {
        int rc;
        const void *ip = iv.buf;
        const int64_t *lp = lv.buf;
        Py_BEGIN_ALLOW_THREADS rc = shard_uploader_put(self->u, ip, n, lp);
        Py_END_ALLOW_THREADS if (rc == SHARD_ERR_STATE && !self->ended)
        {
            ret = Py_False; /* every buffer uploaded or held: take batches first */
            Py_INCREF(ret);
        }
        else if (rc) shard_py_raise(rc, shard_uploader_error(self->u));
        else
        {
            ret = Py_True;
            Py_INCREF(ret);
        }
    }
    PyBuffer_Release(&iv);
    if (lv.buf)
        PyBuffer_Release(&lv);
    return ret;
}

static PyObject *Uploader_put_end(UploaderObject *self, PyObject *unused)
{
    (void)unused;
    NEED_UPLOADER(self);
    int rc = shard_uploader_put_end(self->u);
    if (rc)
        return shard_py_raise(rc, shard_uploader_error(self->u));
    self->ended = 1;
    Py_RETURN_NONE;
}

static PyObject *Uploader_rewind(UploaderObject *self, PyObject *unused)
{
    (void)unused;
    NEED_UPLOADER(self);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = shard_uploader_rewind(self->u);
    Py_END_ALLOW_THREADS if (rc) return shard_py_raise(rc, shard_uploader_error(self->u));
    self->ended = 0;
    Py_RETURN_NONE;
}

static PyObject *Uploader_stats(UploaderObject *self, PyObject *unused)
{
    (void)unused;
    NEED_UPLOADER(self);
    ShardUploadStats st;
    shard_uploader_stats(self->u, &st);
    PyObject *d = Py_BuildValue(
        "{s:K,s:K,s:d,s:d,s:d,s:d,s:K,s:K,s:n}", "batches", (unsigned long long)st.batches,
        "bytes", (unsigned long long)st.bytes, "copy_seconds", st.copy_seconds,
        "finish_seconds", st.finish_seconds, "wait_seconds", st.wait_seconds, "put_seconds",
        st.put_seconds, "in_flight", (unsigned long long)st.in_flight, "max_in_flight",
        (unsigned long long)st.max_in_flight, "buffers", (Py_ssize_t)st.buffers);
    PyObject *dec = d ? Py_BuildValue(
        "{s:s,s:K,s:K,s:K,s:K,s:d,s:d,s:{s:K,s:K,s:K,s:K,s:K}}", "decoder",
        shard_uploader_decoder(self->u), "gpu_decoded", (unsigned long long)st.gpu_decoded,
        "cpu_decoded", (unsigned long long)st.cpu_decoded, "cpu_split",
        (unsigned long long)st.cpu_split, "gpu_retried", (unsigned long long)st.gpu_retried,
        "gpu_share", st.gpu_share, "gpu_seconds", st.gpu_seconds, "cpu_because",
        "not_jpeg", (unsigned long long)st.cpu_not_jpeg, "progressive",
        (unsigned long long)st.cpu_progressive, "colour", (unsigned long long)st.cpu_colour,
        "sampling", (unsigned long long)st.cpu_sampling, "other",
        (unsigned long long)st.cpu_other) : NULL;
    if (!dec || PyDict_Update(d, dec)) {
        Py_XDECREF(dec);
        Py_XDECREF(d);
        return NULL;
    }
    Py_DECREF(dec);
    return d;
}

static PyObject *Uploader_close(UploaderObject *self, PyObject *unused)
{
    (void)unused;
    Uploader_close_now(self);
    Py_RETURN_NONE;
}

static PyObject *Uploader_loader_stats(UploaderObject *self, PyObject *unused)
{
    (void)unused;
    NEED_UPLOADER(self);
    ShardLoaderStats st;
    shard_uploader_loader_stats(self->u, &st);
    if (!st.stages[SHARD_STAGE_DELIVER].name) /* batches come from put: no loader */
        return PyDict_New();
    return shard_py_stats_dict(&st);
}

static PyMethodDef Uploader_methods[] = {
    {"next", (PyCFunction)(void (*)(void))Uploader_next, METH_VARARGS | METH_KEYWORDS,
     "next(stream=None, host=False): the next DeviceBatch, the stream (an int, torch's "
     "cuda_stream; None: the legacy default stream; -1: none) made to wait for its upload; "
     "None at the end. host: copy the keys, indices, padding flags and raw fields too"},
    {"rewind", (PyCFunction)Uploader_rewind, METH_NOARGS,
     "the next epoch on the same ring: the upload thread stops, batches uploaded ahead are "
     "dropped, the end is cleared; next() starts again from where the loader is"},
    {"put", (PyCFunction)Uploader_put, METH_VARARGS,
     "put(images, labels=None): upload a host batch (uint8 NHWC buffer, int64 labels); "
     "False when every buffer is uploaded or held"},
    {"put_end", (PyCFunction)Uploader_put_end, METH_NOARGS, "no more put batches"},
    {"stats", (PyCFunction)Uploader_stats, METH_NOARGS, "the upload counters"},
    {"loader_stats", (PyCFunction)Uploader_loader_stats, METH_NOARGS,
     "its loader's stage statistics with the upload a stage of its own ({} without a loader)"},
    {"close", (PyCFunction)Uploader_close, METH_NOARGS,
     "stop, giving host batches back; batches handed out stay valid"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject UploaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.Uploader",
    .tp_basicsize = sizeof(UploaderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Uploader(gpu, loader=None, *, buffers=3, batch_size=256, height=224, width=224, "
              "dtype='uint8', layout='nchw', mean=..., std=...): a ring of device buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Uploader_init,
    .tp_dealloc = (destructor)Uploader_dealloc,
    .tp_methods = Uploader_methods,
};

/* ---- DeviceBatch and DeviceArray ------------------------------------------------------- */

static void DeviceBatch_dealloc(DeviceBatchObject *self)
{
    /* its own hold: no work of its own was queued (its tensors hold the buffer apart) */
    if (self->b && self->pid == getpid())
        shard_device_batch_release(self->b, SHARD_STREAM_NONE);
    Py_XDECREF(self->keys);
    Py_XDECREF(self->urls);
    Py_XDECREF(self->sources);
    Py_XDECREF(self->fields);
    Py_XDECREF(self->indices);
    Py_XDECREF(self->repeats);
    Py_XDECREF(self->state);
    PyObject_Free(self);
}

static PyObject *array_of(DeviceBatchObject *self, int which)
{
    DeviceArrayObject *a = PyObject_New(DeviceArrayObject, &DeviceArrayType);
    if (!a)
        return NULL;
    Py_INCREF(self);
    a->batch = self;
    a->which = which;
    return (PyObject *)a;
}

static PyObject *DeviceBatch_images(DeviceBatchObject *self, void *c)
{
    (void)c;
    return array_of(self, SHARD_DLPACK_IMAGES);
}

static PyObject *DeviceBatch_labels(DeviceBatchObject *self, void *c)
{
    (void)c;
    return array_of(self, SHARD_DLPACK_LABELS);
}

static PyObject *or_none(PyObject *o)
{
    o = o ? o : Py_None;
    Py_INCREF(o);
    return o;
}

static PyObject *DeviceBatch_get(DeviceBatchObject *self, void *c)
{
    const char *what = c;
    if (!strcmp(what, "size"))
        return PyLong_FromSize_t(self->b->size);
    if (!strcmp(what, "keys"))
        return or_none(self->keys);
    if (!strcmp(what, "urls"))
        return or_none(self->urls);
    if (!strcmp(what, "sources"))
        return or_none(self->sources);
    if (!strcmp(what, "fields"))
        return or_none(self->fields);
    if (!strcmp(what, "indices"))
        return or_none(self->indices);
    if (!strcmp(what, "repeats"))
        return or_none(self->repeats);
    if (!strcmp(what, "device"))
        return PyLong_FromLong(self->b->device);
    return or_none(self->state);
}

static PyGetSetDef DeviceBatch_getset[] = {
    {"images", (getter)DeviceBatch_images, NULL, "the images on the GPU (DLPack)", NULL},
    {"labels", (getter)DeviceBatch_labels, NULL, "int64 labels on the GPU (DLPack)", NULL},
    {"size", (getter)DeviceBatch_get, NULL, "samples in the batch", "size"},
    {"keys", (getter)DeviceBatch_get, NULL, "sample keys (None for put batches)", "keys"},
    {"urls", (getter)DeviceBatch_get, NULL, "sample shard urls (None for put batches)", "urls"},
    {"sources", (getter)DeviceBatch_get, NULL,
     "uint32 mix sources as bytes (None for put batches)", "sources"},
    {"fields", (getter)DeviceBatch_get, NULL, "raw fields (None for put batches)", "fields"},
    {"indices", (getter)DeviceBatch_get, NULL, "uint64 data-set indices as bytes", "indices"},
    {"repeats", (getter)DeviceBatch_get, NULL, "padding flags as bytes", "repeats"},
    {"state", (getter)DeviceBatch_get, NULL, "the loader's state after this batch", "state"},
    {"device", (getter)DeviceBatch_get, NULL, "the CUDA ordinal", "device"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DeviceBatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.DeviceBatch",
    .tp_basicsize = sizeof(DeviceBatchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A batch in device memory; images and labels are DLPack exporters.",
    .tp_dealloc = (destructor)DeviceBatch_dealloc,
    .tp_getset = DeviceBatch_getset,
};

static void DeviceArray_dealloc(DeviceArrayObject *self)
{
    Py_XDECREF(self->batch);
    PyObject_Free(self);
}

/* An unconsumed capsule frees its tensor; a consumer renames it "used_dltensor". */
static void capsule_free(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, "dltensor"))
        return;
    DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
    if (t && t->deleter)
        t->deleter(t);
}

/* __dlpack__(stream=None, max_version=None, dl_device=None, copy=None): the array API's
 * protocol. stream: the consumer's (1: the legacy default stream, 2: per-thread), made to
 * wait for the upload; the tensor's release is recorded on it. */
static PyObject *DeviceArray_dlpack(DeviceArrayObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *so = NULL, *maxv = NULL, *dev = NULL, *copy = NULL;
    void *stream;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", kwlist, &so, &maxv, &dev, &copy) ||
        parse_stream(so, &stream))
        return NULL;
    if (copy && PyObject_IsTrue(copy)) {
        PyErr_SetString(PyExc_BufferError, "a libshard device batch is exported without copies");
        return NULL;
    }
    const ShardDeviceBatch *db = self->batch->b;
    if (dev && dev != Py_None) { /* (device type, ordinal): only where it is */
        int type = -1, ordinal = -1;
        if (!PyArg_ParseTuple(dev, "ii;dl_device: a (device type, ordinal) pair", &type,
                              &ordinal))
            return NULL;
        if (type != kDLCUDA || ordinal != db->device) {
            PyErr_Format(PyExc_BufferError, "a libshard device batch is on CUDA device %d "
                         "(kDLCUDA %d, %d) and is exported without copies; dl_device (%d, %d) "
                         "asks for another device: copy it there yourself (.to(...))",
                         db->device, (int)kDLCUDA, db->device, type, ordinal);
            return NULL;
        }
    }
    DLManagedTensor *t;
    const ShardDeviceBatch *b = self->batch->b;
    Py_BEGIN_ALLOW_THREADS t = shard_device_batch_dlpack(b, self->which, stream);
    Py_END_ALLOW_THREADS if (!t) return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(t, "dltensor", capsule_free);
    if (!cap)
        t->deleter(t);
    return cap;
}

static PyObject *DeviceArray_dlpack_device(DeviceArrayObject *self, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(ii)", (int)kDLCUDA, self->batch->b->device);
}

static PyMethodDef DeviceArray_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))DeviceArray_dlpack, METH_VARARGS | METH_KEYWORDS,
     "a DLPack capsule; the stream waits for the upload"},
    {"__dlpack_device__", (PyCFunction)DeviceArray_dlpack_device, METH_NOARGS,
     "(kDLCUDA, device ordinal)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DeviceArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.DeviceArray",
    .tp_basicsize = sizeof(DeviceArrayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Images or labels of a DeviceBatch, for torch.from_dlpack.",
    .tp_dealloc = (destructor)DeviceArray_dealloc,
    .tp_methods = DeviceArray_methods,
};

int shard_py_upload_ready(PyObject *m)
{
    PyTypeObject *types[] = {&UploaderType, &DeviceBatchType, &DeviceArrayType};
    return shard_py_add_types(m, types, 3);
}
