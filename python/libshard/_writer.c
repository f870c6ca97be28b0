/*
 * libshard._libshard, Writer: samples in, shards out (shard/writer.h); and the shards' info
 * dicts that Writer.shards and PackPlan.write_shard give and PackPlan.write_manifest takes.
 *
 * The GIL is released while bytes are written; the buffers written stay borrowed from their
 * Python objects, which the call holds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <shard/shard.h>

#include "_common.h"
#include "_settings.h"
#include "_writer.h"

/* ---- shards' info dicts ----------------------------------------------------------------- */

/* A count in an info dict: a non-negative whole number, an int or an integral float. */
static int info_u64(PyObject *o, const char *name, uint64_t *out)
{
    if (!o || o == Py_None)
        return 0;
    if (PyFloat_Check(o)) {
        double d = PyFloat_AS_DOUBLE(o);
        if (!(d >= 0 && d < 1.8e19) || d != (double)(uint64_t)d) {
            PyErr_Format(PyExc_ValueError, "%s: a whole number >= 0, not %R", name, o);
            return -1;
        }
        *out = (uint64_t)d;
        return 0;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: a whole number >= 0, not %R", name, o);
        return -1;
    }
    *out = v;
    return 0;
}

PyObject *shard_py_info_dict(const ShardFileInfo *x)
{
    PyObject *d = Py_BuildValue("{s:s,s:K,s:K,s:K}", "url", x->url, "nsamples",
                                (unsigned long long)x->nsamples, "filesize",
                                (unsigned long long)x->filesize, "tarsize",
                                (unsigned long long)x->tarsize);
    if (!d)
        return NULL;
    const char *keys[] = {"md5sum", "sha256"}, *vals[] = {x->md5, x->sha256};
    for (int i = 0; i < 2; i++) {
        if (!vals[i][0])
            continue;
        PyObject *v = PyUnicode_FromString(vals[i]);
        int rc = v ? PyDict_SetItemString(d, keys[i], v) : -1; /* does not take v */
        Py_XDECREF(v);
        if (rc < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

/* A dict as info_dict makes it back into a ShardFileInfo; url borrowed from the dict. */
int shard_py_info_from_dict(PyObject *d, ShardFileInfo *x)
{
    memset(x, 0, sizeof *x);
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "a shard's info is a dict, not %R", d);
        return -1;
    }
    PyObject *url = PyDict_GetItemString(d, "url");
    if (!url || !(x->url = PyUnicode_AsUTF8(url))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a shard's info has no \"url\"");
        return -1;
    }
    if (info_u64(PyDict_GetItemString(d, "nsamples"), "nsamples", &x->nsamples) ||
        info_u64(PyDict_GetItemString(d, "filesize"), "filesize", &x->filesize) ||
        info_u64(PyDict_GetItemString(d, "tarsize"), "tarsize", &x->tarsize))
        return -1;
    const char *keys[] = {"md5sum", "sha256"};
    char *dst[] = {x->md5, x->sha256};
    size_t len[] = {32, 64};
    for (int i = 0; i < 2; i++) {
        PyObject *v = PyDict_GetItemString(d, keys[i]);
        const char *s = v ? PyUnicode_AsUTF8(v) : "";
        if (!s)
            return -1;
        if (*s && strlen(s) != len[i]) {
            PyErr_Format(PyExc_ValueError, "%s: %zu hex digits expected, not %R", keys[i], len[i], v);
            return -1;
        }
        memcpy(dst[i], s, strlen(s) + 1);
    }
    return 0;
}

/* ---- Writer ----------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    ShardWriter *w;
    ShardRemote *rm; /* what its shards and manifest go through into a bucket */
    int finished;
} WriterObject;

static void Writer_dealloc(WriterObject *self)
{
    Py_BEGIN_ALLOW_THREADS /* an unfinished shard's temporary or upload is dropped */
    shard_writer_free(&self->w);
    shard_remote_free(&self->rm);
    Py_END_ALLOW_THREADS
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static const char *const writer_params[] = {"pattern", NULL};
static const ShardPySignature writer_signature = {"Writer", writer_params, 1, 1, 0};

static int Writer_init(WriterObject *self, PyObject *args, PyObject *kw)
{
    ShardWriterSettings s;
    shard_writer_default_settings(&s);
    ShardRemoteSettings rs;
    shard_remote_default_settings(&rs);
    ShardPyTarget targets[] = {{&shard_py_writer_table, &s}, {&shard_py_bucket_table, &rs}};
    PyObject *pattern, *keep = NULL;
    int rc = -1;
    if (shard_py_parse(&writer_signature, args, kw, targets, 2, &pattern, &keep))
        goto done;
    if (!PyUnicode_Check(pattern)) {
        PyErr_Format(PyExc_TypeError, "pattern: a str, not %R", pattern);
        goto done;
    }
    if (!(s.pattern = PyUnicode_AsUTF8(pattern)))
        goto done;
    ShardError err;
    shard_writer_free(&self->w);
    shard_remote_free(&self->rm);
    self->finished = 0;
    /* made for any pattern: the manifest may go into a bucket too (no connection until then) */
    if (shard_py_remote_new(&rs, &self->rm))
        goto done;
    s.remote = self->rm;
    if ((rc = shard_writer_open(&self->w, &s, &err)))
        shard_py_raise(rc, err.message);
done:
    Py_XDECREF(keep);
    return rc ? -1 : 0;
}

static int writer_live(WriterObject *self)
{
    if (!self->w || self->finished) {
        PyErr_SetString(PyExc_ValueError, self->w ? "the writer is closed" : "the writer is not open");
        return -1;
    }
    return 0;
}

/* write(key, fields): fields a sequence of (name, bytes-like) pairs. Returns the number of
 * shards completed so far. */
static PyObject *Writer_write(WriterObject *self, PyObject *args)
{
    const char *key;
    PyObject *fields;
    if (!PyArg_ParseTuple(args, "sO", &key, &fields) || writer_live(self))
        return NULL;
    PyObject *seq = PySequence_Fast(fields, "fields: a sequence of (name, bytes) pairs");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ShardField *f = PyMem_Calloc((size_t)(n ? n : 1), sizeof *f);
    Py_buffer *views = PyMem_Calloc((size_t)(n ? n : 1), sizeof *views);
    Py_ssize_t got = 0;
    PyObject *ret = NULL;
    if (!f || !views) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, got);
        PyObject *name;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyUnicode_Check(name = PyTuple_GET_ITEM(pair, 0))) {
            PyErr_Format(PyExc_TypeError, "%s: a field is a (name, bytes) pair, not %R", key, pair);
            goto done;
        }
        if (!(f[got].name = PyUnicode_AsUTF8(name)))
            goto done;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(pair, 1), &views[got], PyBUF_CONTIG_RO) < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s.%s: the value must be bytes-like after encoding, not %R",
                         key, f[got].name, PyTuple_GET_ITEM(pair, 1));
            goto done;
        }
        f[got].data = views[got].buf;
        f[got].size = (size_t)views[got].len;
    }
    ShardSample smp = {key, f, (size_t)n};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_writer_add(self->w, &smp);
    Py_END_ALLOW_THREADS
    if (rc)
        shard_py_raise(rc, shard_writer_error(self->w));
    else
        ret = PyLong_FromSize_t(shard_writer_count(self->w));
done:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(f);
    Py_DECREF(seq);
    return ret;
}

static PyObject *Writer_finish(WriterObject *self, PyObject *noargs)
{
    (void)noargs;
    if (writer_live(self))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_writer_finish(self->w);
    Py_END_ALLOW_THREADS
    self->finished = 1;
    if (rc)
        return shard_py_raise(rc, shard_writer_error(self->w));
    Py_RETURN_NONE;
}

/* Drops an unfinished shard (its temporary file) without completing it. */
static PyObject *Writer_abort(WriterObject *self, PyObject *noargs)
{
    (void)noargs;
    ShardWriter *w = self->w;
    self->w = NULL;
    Py_BEGIN_ALLOW_THREADS /* an upload dropped: a request to the store */
    shard_writer_free(&w);
    Py_END_ALLOW_THREADS
    self->finished = 1;
    Py_RETURN_NONE;
}

static PyObject *Writer_shards(WriterObject *self, void *closure)
{
    (void)closure;
    size_t n = self->w ? shard_writer_count(self->w) : 0;
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *d = shard_py_info_dict(shard_writer_shard(self->w, i));
        if (!d) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    return l;
}

/* write_manifest(path, name=None): the completed shards' manifest (urls relative to it). */
static PyObject *Writer_write_manifest(WriterObject *self, PyObject *args)
{
    const char *path, *name = NULL;
    if (!PyArg_ParseTuple(args, "s|z", &path, &name))
        return NULL;
    ShardManifest *m = NULL;
    ShardError err;
    int rc = shard_manifest_new(&m, name);
    for (size_t i = 0; !rc && self->w && i < shard_writer_count(self->w); i++)
        rc = shard_manifest_add(m, shard_writer_shard(self->w, i));
    if (rc) {
        shard_manifest_free(&m);
        return shard_py_raise(rc, "out of memory");
    }
    Py_BEGIN_ALLOW_THREADS
    rc = shard_manifest_write_remote(m, path, self->rm, &err);
    Py_END_ALLOW_THREADS
    shard_manifest_free(&m);
    if (rc)
        return shard_py_raise(rc, err.message);
    Py_RETURN_NONE;
}

static PyMethodDef Writer_methods[] = {
    {"write_manifest", (PyCFunction)Writer_write_manifest, METH_VARARGS,
     "write_manifest(path, name=None): a manifest of the completed shards"},
    {"write", (PyCFunction)Writer_write, METH_VARARGS,
     "write(key, fields): a sample; fields are (name, bytes-like) pairs. Returns the number of "
     "shards completed so far."},
    {"finish", (PyCFunction)Writer_finish, METH_NOARGS, "Completes the last shard."},
    {"abort", (PyCFunction)Writer_abort, METH_NOARGS,
     "Drops the shard being written; completed shards stay."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Writer_getset[] = {
    {"shards", (getter)Writer_shards, NULL,
     "completed shards: dicts of url, nsamples, filesize, tarsize and the digests", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.Writer",
    .tp_basicsize = sizeof(WriterObject),
    .tp_dealloc = (destructor)Writer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Writer(pattern, *, maxcount, maxsize, first_shard, level, frame_size, mtime, "
              "checksums, sync, index): the C shard writer (shard/writer.h).",
    .tp_methods = Writer_methods,
    .tp_getset = Writer_getset,
    .tp_init = (initproc)Writer_init,
    .tp_new = PyType_GenericNew,
};


int shard_py_writer_ready(PyObject *m)
{
    PyTypeObject *types[] = {&WriterType};
    return shard_py_add_types(m, types, 1);
}
