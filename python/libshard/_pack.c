/*
 * libshard._libshard, the writing half: Writer (samples in, shards out: shard/writer.h) and
 * PackPlan (an image folder or list file planned into numbered shards, any one of which
 * can be written by any process: shard/pack.h). libshard.ShardWriter and
 * libshard.distributed are written on these.
 *
 * The GIL is released while bytes are written; the buffers written stay borrowed from their
 * Python objects, which the call holds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <shard/shard.h>

#include "_libshard.h"

/* ---- shared argument parsing ---------------------------------------------------------- */

/* A non-negative whole number given as an int or an integral float (3e9, as WebDataset's
 * maxsize default is written). */
static int u64_arg(PyObject *o, const char *name, uint64_t *out)
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

/* "sha256", "md5", "md5,sha256" or "none" (or None) into SHARD_DIGEST_* bits. */
static int checksums_arg(PyObject *o, int *out)
{
    if (!o)
        return 0;
    if (o == Py_None) {
        *out = 0;
        return 0;
    }
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (!s || shard_digests_parse(s, out)) {
        PyErr_Format(s ? PyExc_ValueError : PyExc_TypeError,
                     "checksums: \"sha256\", \"md5\", \"md5,sha256\" or \"none\", not %R", o);
        return -1;
    }
    return 0;
}

static PyObject *info_dict(const ShardFileInfo *x)
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
static int info_from_dict(PyObject *d, ShardFileInfo *x)
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
    if (u64_arg(PyDict_GetItemString(d, "nsamples"), "nsamples", &x->nsamples) ||
        u64_arg(PyDict_GetItemString(d, "filesize"), "filesize", &x->filesize) ||
        u64_arg(PyDict_GetItemString(d, "tarsize"), "tarsize", &x->tarsize))
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
    int finished;
} WriterObject;

static void Writer_dealloc(WriterObject *self)
{
    shard_writer_free(&self->w); /* an unfinished shard's temporary is removed */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Writer_init(WriterObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"pattern", "maxcount", "maxsize", "first_shard", "level", "frame_size",
                             "mtime", "checksums", "sync", "index", NULL};
    const char *pattern;
    PyObject *maxcount = NULL, *maxsize = NULL, *first = NULL, *frame = NULL, *checksums = NULL;
    int level = 3, sync = 1, index = 1;
    long long mtime = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$OOOiOLOpp", kwlist, &pattern, &maxcount, &maxsize,
                                     &first, &level, &frame, &mtime, &checksums, &sync, &index))
        return -1;
    ShardWriterSettings s;
    shard_writer_default_settings(&s);
    s.pattern = pattern;
    uint64_t fs = s.frame_size;
    if (u64_arg(maxcount, "maxcount", &s.maxcount) || u64_arg(maxsize, "maxsize", &s.maxsize) ||
        u64_arg(first, "first_shard", &s.first_shard) || u64_arg(frame, "frame_size", &fs) ||
        checksums_arg(checksums, &s.checksums))
        return -1;
    s.frame_size = (size_t)fs;
    s.level = level;
    s.mtime = mtime;
    s.sync = sync;
    s.write_index = index;
    ShardError err;
    shard_writer_free(&self->w);
    self->finished = 0;
    int rc = shard_writer_open(&self->w, &s, &err);
    if (rc) {
        shard_py_raise(rc, err.message);
        return -1;
    }
    return 0;
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
    shard_writer_free(&self->w);
    self->finished = 1;
    Py_RETURN_NONE;
}

static PyObject *Writer_shards(WriterObject *self, void *closure)
{
    (void)closure;
    size_t n = self->w ? shard_writer_count(self->w) : 0;
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *d = info_dict(shard_writer_shard(self->w, i));
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
    rc = shard_manifest_write(m, path, &err);
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

PyTypeObject ShardPyWriterType = {
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

/* ---- PackPlan --------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    ShardPackPlan *plan;
    char *manifest; /* the default manifest path */
    int skip;       /* on_error="skip" */
    uint64_t ignored;
    PyObject *scan_skipped; /* list of (path, reason, what) */
} PackPlanObject;

static const char *const bad_names[] = {
    [SHARD_PACK_UNREADABLE] = "unreadable", [SHARD_PACK_CHANGED] = "changed while packing",
    [SHARD_PACK_NOT_IMAGE] = "not an image", [SHARD_PACK_CORRUPT] = "corrupt image",
    [SHARD_PACK_BAD_NAME] = "invalid name", [SHARD_PACK_EMPTY] = "zero-byte",
};

static void PackPlan_dealloc(PackPlanObject *self)
{
    shard_pack_plan_free(&self->plan);
    free(self->manifest);
    Py_XDECREF(self->scan_skipped);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Called with the GIL released: takes it to append to a list. */
static int note_bad(PyObject *list, int skip, const char *path, ShardPackBad reason, const char *what)
{
    if (!skip)
        return 0;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *t = Py_BuildValue("(sss)", path, bad_names[reason], what);
    if (!t || PyList_Append(list, t) < 0)
        PyErr_Clear(); /* the count is lost, not the run */
    Py_XDECREF(t);
    PyGILState_Release(g);
    return 1;
}

static int scan_bad(void *cookie, const char *path, ShardPackBad reason, const char *what)
{
    PackPlanObject *self = cookie;
    return note_bad(self->scan_skipped, self->skip, path, reason, what);
}

static int PackPlan_init(PackPlanObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"src", "pattern", "list", "on_error", "maxcount", "maxsize", "level",
                             "frame_size", "shuffle", "verify", "mtime", "checksums", "sync",
                             "resize", "quality", NULL};
    const char *src, *pattern, *on_error = "fail";
    int list = 0, level = 3, verify = 0, sync = 1, quality = 95;
    PyObject *maxcount = NULL, *maxsize = NULL, *frame = NULL, *shuffle = Py_None, *checksums = NULL;
    PyObject *resize = NULL;
    long long mtime = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|$psOOiOOpLOpOi", kwlist, &src, &pattern, &list,
                                     &on_error, &maxcount, &maxsize, &level, &frame, &shuffle,
                                     &verify, &mtime, &checksums, &sync, &resize, &quality))
        return -1;
    uint64_t max_side = 0;
    if (u64_arg(resize, "resize", &max_side))
        return -1;
    if (max_side > 65500) {
        PyErr_Format(PyExc_ValueError, "resize: a longer side of 1..65500 pixels, not %llu",
                     (unsigned long long)max_side);
        return -1;
    }
    if (strcmp(on_error, "fail") && strcmp(on_error, "skip")) {
        PyErr_Format(PyExc_ValueError, "on_error: \"fail\" or \"skip\", not '%s'", on_error);
        return -1;
    }
    ShardPackSettings s;
    shard_pack_default_settings(&s);
    s.pattern = pattern;
    uint64_t fs = s.frame_size;
    if (u64_arg(maxcount, "maxcount", &s.maxcount) || u64_arg(maxsize, "maxsize", &s.maxsize) ||
        u64_arg(frame, "frame_size", &fs) || checksums_arg(checksums, &s.checksums))
        return -1;
    if (shuffle != Py_None) {
        s.shuffle = 1;
        if (u64_arg(shuffle, "shuffle", &s.shuffle_seed))
            return -1;
    }
    s.frame_size = (size_t)fs;
    s.level = level;
    s.verify = verify;
    s.mtime = mtime < 0 ? 0 : mtime;
    s.sync = sync;
    s.max_side = (uint32_t)max_side;
    s.quality = quality;
    shard_pack_plan_free(&self->plan);
    free(self->manifest);
    self->manifest = NULL;
    Py_XSETREF(self->scan_skipped, PyList_New(0));
    if (!self->scan_skipped)
        return -1;
    self->skip = !strcmp(on_error, "skip");
    ShardError err;
    int rc = shard_pack_plan_new(&self->plan, &s, &err);
    if (!rc && !(self->manifest = shard_pack_manifest_path(&s)))
        rc = SHARD_ERR_NOMEM, strcpy(err.message, "out of memory");
    if (!rc) {
        ShardPackScanCallbacks cb = {scan_bad, self};
        Py_BEGIN_ALLOW_THREADS
        rc = shard_pack_plan_scan(self->plan, src, list, &cb, &self->ignored, &err);
        if (!rc)
            rc = shard_pack_plan_build(self->plan, &err);
        Py_END_ALLOW_THREADS
    }
    if (rc) {
        shard_pack_plan_free(&self->plan);
        shard_py_raise(rc, err.message);
        return -1;
    }
    return 0;
}

static int plan_live(PackPlanObject *self)
{
    if (!self->plan) {
        PyErr_SetString(PyExc_ValueError, "the plan is not built");
        return -1;
    }
    return 0;
}

typedef struct WriteCtx {
    PackPlanObject *self;
    PyObject *skipped;
} WriteCtx;

static int write_bad(void *cookie, size_t input, ShardPackBad reason, const char *what)
{
    WriteCtx *c = cookie;
    return note_bad(c->skipped, c->self->skip, shard_pack_plan_input(c->self->plan, input)->path,
                    reason, what);
}

/* write_shard(j) -> info dict with "skipped" (list of (path, reason, what)), or None when
 * every input of the shard was left out. */
static PyObject *PackPlan_write_shard(PackPlanObject *self, PyObject *arg)
{
    if (plan_live(self))
        return NULL;
    size_t j = PyLong_AsSize_t(arg);
    if (j == (size_t)-1 && PyErr_Occurred())
        return NULL;
    if (j >= shard_pack_plan_shards(self->plan))
        return PyErr_Format(PyExc_IndexError, "shard %zu: the plan has %zu", j,
                            shard_pack_plan_shards(self->plan));
    WriteCtx c = {self, PyList_New(0)};
    if (!c.skipped)
        return NULL;
    ShardPackCallbacks cb = {write_bad, NULL, &c};
    ShardFileInfo info;
    ShardError err;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_pack_write_shard(self->plan, j, &cb, &info, &err);
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_DECREF(c.skipped);
        return shard_py_raise(rc, err.message);
    }
    if (!info.url) {
        Py_DECREF(c.skipped);
        Py_RETURN_NONE;
    }
    PyObject *d = info_dict(&info);
    free((char *)info.url);
    if (d && PyDict_SetItemString(d, "skipped", c.skipped) < 0)
        Py_CLEAR(d);
    Py_DECREF(c.skipped);
    return d;
}

static PyObject *PackPlan_shard_inputs(PackPlanObject *self, PyObject *arg)
{
    if (plan_live(self))
        return NULL;
    size_t j = PyLong_AsSize_t(arg);
    if (j == (size_t)-1 && PyErr_Occurred())
        return NULL;
    if (j >= shard_pack_plan_shards(self->plan))
        return PyErr_Format(PyExc_IndexError, "shard %zu: the plan has %zu", j,
                            shard_pack_plan_shards(self->plan));
    size_t first, end;
    shard_pack_plan_shard(self->plan, j, &first, &end);
    return Py_BuildValue("(nn)", (Py_ssize_t)first, (Py_ssize_t)end);
}

/* input(i) -> (path, rel, key, label, size) */
static PyObject *PackPlan_input(PackPlanObject *self, PyObject *arg)
{
    if (plan_live(self))
        return NULL;
    size_t i = PyLong_AsSize_t(arg);
    if (i == (size_t)-1 && PyErr_Occurred())
        return NULL;
    if (i >= shard_pack_plan_inputs(self->plan))
        return PyErr_Format(PyExc_IndexError, "input %zu: the plan has %zu", i,
                            shard_pack_plan_inputs(self->plan));
    const ShardPackInput *x = shard_pack_plan_input(self->plan, i);
    return Py_BuildValue("(sssLK)", x->path, x->rel, shard_pack_plan_key(self->plan, i),
                         (long long)x->label, (unsigned long long)x->size);
}

/* A 64-bit FNV-1a over everything the shards' bytes depend on: the keys, paths, fields,
 * labels, sizes and cuts. Two processes that planned alike agree on it. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return s ? fnv(h, s, strlen(s) + 1) : fnv(h, "\xff", 1);
}

static PyObject *PackPlan_fingerprint(PackPlanObject *self, PyObject *noargs)
{
    (void)noargs;
    if (plan_live(self))
        return NULL;
    uint64_t h = 0xcbf29ce484222325ull;
    const ShardPackPlan *p = self->plan;
    Py_BEGIN_ALLOW_THREADS
    size_t n = shard_pack_plan_inputs(p), ns = shard_pack_plan_shards(p);
    for (size_t i = 0; i < n; i++) {
        const ShardPackInput *x = shard_pack_plan_input(p, i);
        h = fnv_str(h, shard_pack_plan_key(p, i));
        h = fnv_str(h, x->path);
        h = fnv_str(h, x->rel);
        h = fnv_str(h, x->field);
        h = fnv_str(h, x->class_name);
        h = fnv_str(h, x->extra_json);
        h = fnv(h, &x->label, sizeof x->label);
        h = fnv(h, &x->size, sizeof x->size);
    }
    for (size_t j = 0; j < ns; j++) {
        size_t first, end;
        shard_pack_plan_shard(p, j, &first, &end);
        uint64_t e = end;
        h = fnv(h, &e, sizeof e);
    }
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong(h);
}

static PyObject *PackPlan_prepare(PackPlanObject *self, PyObject *args)
{
    const char *manifest = NULL;
    if (!PyArg_ParseTuple(args, "|z", &manifest) || plan_live(self))
        return NULL;
    ShardError err;
    if (shard_pack_prepare(self->plan, manifest ? manifest : self->manifest, &err))
        return shard_py_raise(err.code, err.message);
    Py_RETURN_NONE;
}

/* write_manifest(infos, path=None): infos as write_shard returned them, in shard order,
 * None for shards not written. Returns the path written. */
static PyObject *PackPlan_write_manifest(PackPlanObject *self, PyObject *args)
{
    PyObject *infos;
    const char *path = NULL;
    if (!PyArg_ParseTuple(args, "O|z", &infos, &path) || plan_live(self))
        return NULL;
    if (!path)
        path = self->manifest;
    PyObject *seq = PySequence_Fast(infos, "infos: a list of dicts");
    if (!seq)
        return NULL;
    ShardManifest *m = NULL;
    ShardError err;
    int rc = shard_pack_manifest(&m, self->plan, path);
    if (rc) {
        Py_DECREF(seq);
        return shard_py_raise(rc, "out of memory");
    }
    PyObject *ret = NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *d = PySequence_Fast_GET_ITEM(seq, i);
        ShardFileInfo x;
        if (d == Py_None)
            continue;
        if (info_from_dict(d, &x))
            goto done;
        if ((rc = shard_manifest_add(m, &x))) {
            shard_py_raise(rc, "out of memory");
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    rc = shard_manifest_write(m, path, &err);
    Py_END_ALLOW_THREADS
    if (rc)
        shard_py_raise(rc, err.message);
    else
        ret = PyUnicode_DecodeFSDefault(path);
done:
    shard_manifest_free(&m);
    Py_DECREF(seq);
    return ret;
}

static void add_leftover(void *cookie, const char *path)
{
    PyObject *s = PyUnicode_DecodeFSDefault(path);
    if (!s || PyList_Append(cookie, s) < 0)
        PyErr_Clear();
    Py_XDECREF(s);
}

static PyObject *PackPlan_leftovers(PackPlanObject *self, PyObject *noargs)
{
    (void)noargs;
    if (plan_live(self))
        return NULL;
    PyObject *l = PyList_New(0);
    if (l)
        shard_pack_leftovers(self->plan, add_leftover, l);
    return l;
}

static PyObject *PackPlan_shards(PackPlanObject *self, void *closure)
{
    (void)closure;
    return plan_live(self) ? NULL : PyLong_FromSize_t(shard_pack_plan_shards(self->plan));
}

static PyObject *PackPlan_inputs(PackPlanObject *self, void *closure)
{
    (void)closure;
    return plan_live(self) ? NULL : PyLong_FromSize_t(shard_pack_plan_inputs(self->plan));
}

static PyObject *PackPlan_manifest(PackPlanObject *self, void *closure)
{
    (void)closure;
    return self->manifest ? PyUnicode_DecodeFSDefault(self->manifest) : Py_NewRef(Py_None);
}

static PyObject *PackPlan_ignored(PackPlanObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->ignored);
}

static PyObject *PackPlan_scan_skipped(PackPlanObject *self, void *closure)
{
    (void)closure;
    return PyList_GetSlice(self->scan_skipped, 0, PY_SSIZE_T_MAX);
}

static PyMethodDef PackPlan_methods[] = {
    {"write_shard", (PyCFunction)PackPlan_write_shard, METH_O,
     "write_shard(j) -> info dict (with 'skipped'), or None when every input was left out"},
    {"shard_inputs", (PyCFunction)PackPlan_shard_inputs, METH_O,
     "shard_inputs(j) -> (first, end): the inputs of shard j"},
    {"input", (PyCFunction)PackPlan_input, METH_O, "input(i) -> (path, rel, key, label, size)"},
    {"fingerprint", (PyCFunction)PackPlan_fingerprint, METH_NOARGS,
     "a 64-bit hash of everything the shards depend on: equal plans give equal values"},
    {"prepare", (PyCFunction)PackPlan_prepare, METH_VARARGS,
     "prepare(manifest=None): removes the manifest and killed runs' temporaries"},
    {"write_manifest", (PyCFunction)PackPlan_write_manifest, METH_VARARGS,
     "write_manifest(infos, path=None) -> path"},
    {"leftovers", (PyCFunction)PackPlan_leftovers, METH_NOARGS,
     "shards and indexes an earlier, larger run left past this plan's last shard"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef PackPlan_getset[] = {
    {"shards", (getter)PackPlan_shards, NULL, "number of shards", NULL},
    {"inputs", (getter)PackPlan_inputs, NULL, "number of inputs", NULL},
    {"manifest", (getter)PackPlan_manifest, NULL, "the default manifest path", NULL},
    {"ignored", (getter)PackPlan_ignored, NULL, "files ignored for their extension", NULL},
    {"scan_skipped", (getter)PackPlan_scan_skipped, NULL,
     "bad inputs the scan left out: (path, reason, what)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ShardPyPackPlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.PackPlan",
    .tp_basicsize = sizeof(PackPlanObject),
    .tp_dealloc = (destructor)PackPlan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "PackPlan(src, pattern, *, list, on_error, maxcount, maxsize, level, frame_size, "
              "shuffle, verify, mtime, checksums, sync, resize, quality): shardpack's plan "
              "(shard/pack.h).",
    .tp_methods = PackPlan_methods,
    .tp_getset = PackPlan_getset,
    .tp_init = (initproc)PackPlan_init,
    .tp_new = PyType_GenericNew,
};
