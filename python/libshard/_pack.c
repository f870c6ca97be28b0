/*
 * libshard._libshard, PackPlan: an image folder or list file planned into numbered shards,
 * any one of which can be written by any process (shard/pack.h). libshard.distributed is
 * written on it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

#include "_common.h"
#include "_pack.h"
#include "_settings.h"
#include "_writer.h"

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
    [SHARD_PACK_UNDECODED] = "not decoded by the loader",
    [SHARD_PACK_EMPTY_CLASS] = "empty class", [SHARD_PACK_IGNORED] = "no image extension",
};

static void PackPlan_dealloc(PackPlanObject *self)
{
    shard_pack_plan_free(&self->plan);
    free(self->manifest);
    Py_XDECREF(self->scan_skipped);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Called with the GIL released: takes it to append to a list. An image the loader does not
 * decode is packed without skip, and listed as packed (undecoded, when given). */
static int note_bad_or_packed(PyObject *list, PyObject *undecoded, int skip, const char *path,
                              ShardPackBad reason, const char *what)
{
    if (reason == SHARD_PACK_IGNORED || reason == SHARD_PACK_EMPTY_CLASS)
        return skip; /* counted in ignored; an empty class kept with skip, else refused */
    if (!skip && reason == SHARD_PACK_UNDECODED && undecoded)
        list = undecoded;
    else if (!skip)
        return 0;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *t = Py_BuildValue("(sss)", path, bad_names[reason], what);
    if (!t || PyList_Append(list, t) < 0)
        PyErr_Clear(); /* the count is lost, not the run */
    Py_XDECREF(t);
    PyGILState_Release(g);
    return list != undecoded;
}

static int note_bad(PyObject *list, int skip, const char *path, ShardPackBad reason, const char *what)
{
    return note_bad_or_packed(list, NULL, skip, path, reason, what);
}

static int scan_bad(void *cookie, const char *path, ShardPackBad reason, const char *what)
{
    PackPlanObject *self = cookie;
    return note_bad(self->scan_skipped, self->skip, path, reason, what);
}

static const char *const plan_params[] = {"src", "pattern", "list", "on_error", NULL};
static const ShardPySignature plan_signature = {"PackPlan", plan_params, 2, 2, 0};

/* The plan's settings and own arguments: src and on_error into *src and self->skip. */
static int plan_settings(PackPlanObject *self, PyObject *args, PyObject *kw, ShardPackSettings *s,
                         ShardRemoteSettings *rs, const char **src, int *list, PyObject **keep)
{
    shard_pack_default_settings(s);
    shard_remote_default_settings(rs);
    ShardPyTarget targets[] = {{&shard_py_pack_table, s}, {&shard_py_bucket_table, rs}};
    PyObject *v[4];
    if (shard_py_parse(&plan_signature, args, kw, targets, 2, v, keep))
        return -1;
    const char *on_error = "fail";
    if (!PyUnicode_Check(v[0]) || !PyUnicode_Check(v[1]) || (v[3] && !PyUnicode_Check(v[3]))) {
        PyErr_SetString(PyExc_TypeError, "PackPlan: src, pattern and on_error are str");
        return -1;
    }
    if (!(*src = PyUnicode_AsUTF8(v[0])) || !(s->pattern = PyUnicode_AsUTF8(v[1])) ||
        (v[3] && !(on_error = PyUnicode_AsUTF8(v[3]))))
        return -1;
    if ((*list = v[2] ? PyObject_IsTrue(v[2]) : 0) < 0)
        return -1;
    if (strcmp(on_error, "fail") && strcmp(on_error, "skip")) {
        PyErr_Format(PyExc_ValueError, "on_error: \"fail\" or \"skip\", not '%s'", on_error);
        return -1;
    }
    self->skip = !strcmp(on_error, "skip");
    if (s->mtime < 0)
        s->mtime = 0;
    return 0;
}

static int PackPlan_init(PackPlanObject *self, PyObject *args, PyObject *kw)
{
    ShardPackSettings s;
    ShardRemoteSettings rs;
    ShardRemote *rm = NULL;
    const char *src;
    int list;
    PyObject *keep = NULL;
    shard_pack_plan_free(&self->plan);
    free(self->manifest);
    self->manifest = NULL;
    Py_XSETREF(self->scan_skipped, PyList_New(0));
    if (!self->scan_skipped || plan_settings(self, args, kw, &s, &rs, &src, &list, &keep) ||
        shard_py_remote_new(&rs, &rm)) {
        Py_XDECREF(keep);
        return -1;
    }
    s.remote = rm; /* inputs and outputs in buckets: the plan keeps its own reference */
    ShardError err;
    int rc = shard_pack_plan_new(&self->plan, &s, &err);
    shard_remote_free(&rm);
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
    Py_XDECREF(keep);
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
    PyObject *undecoded; /* (path, reason, what) of images packed that the loader won't decode */
    unsigned long long resized, resized_in, resized_out; /* JPEGs re-encoded for max_side */
} WriteCtx;

static void write_resized(void *cookie, size_t input, uint64_t bytes_in, uint64_t bytes_out)
{
    WriteCtx *c = cookie;
    (void)input;
    c->resized++;
    c->resized_in += bytes_in;
    c->resized_out += bytes_out;
}

static int write_bad(void *cookie, size_t input, ShardPackBad reason, const char *what)
{
    WriteCtx *c = cookie;
    return note_bad_or_packed(c->skipped, c->undecoded, c->self->skip,
                              shard_pack_plan_input(c->self->plan, input)->path, reason, what);
}

/* write_shard(j) -> info dict with "skipped" (list of (path, reason, what)), "undecoded"
 * (alike) and "resized" ((JPEGs re-encoded, their bytes before, after)), or None when every
 * input of the shard was left out. */
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
    WriteCtx c = {self, PyList_New(0), PyList_New(0), 0, 0, 0};
    if (!c.skipped || !c.undecoded) {
        Py_XDECREF(c.skipped);
        Py_XDECREF(c.undecoded);
        return NULL;
    }
    ShardPackCallbacks cb = {.on_bad = write_bad, .cookie = &c, .on_resized = write_resized};
    ShardFileInfo info;
    ShardError err;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_pack_write_shard(self->plan, j, &cb, &info, &err);
    Py_END_ALLOW_THREADS
    if (rc || !info.url) {
        Py_DECREF(c.skipped);
        Py_DECREF(c.undecoded);
        if (rc)
            return shard_py_raise(rc, err.message);
        Py_RETURN_NONE;
    }
    PyObject *d = shard_py_info_dict(&info);
    free((char *)info.url);
    PyObject *resized = d ? Py_BuildValue("(KKK)", c.resized, c.resized_in, c.resized_out) : NULL;
    if (d && (!resized || PyDict_SetItemString(d, "skipped", c.skipped) < 0 ||
              PyDict_SetItemString(d, "undecoded", c.undecoded) < 0 ||
              PyDict_SetItemString(d, "resized", resized) < 0))
        Py_CLEAR(d);
    Py_XDECREF(resized);
    Py_DECREF(c.skipped);
    Py_DECREF(c.undecoded);
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

/* attach(): this plan writes shards for the run another process prepared (a Dask task):
 * each one finished is recorded for a resume. */
static PyObject *PackPlan_attach(PackPlanObject *self, PyObject *unused)
{
    (void)unused;
    if (plan_live(self))
        return NULL;
    shard_pack_attach(self->plan);
    Py_RETURN_NONE;
}

/* duplicates() -> [(dropped, kept, sha256)]: the inputs dedup left out, in input order. */
static PyObject *PackPlan_duplicates(PackPlanObject *self, PyObject *unused)
{
    (void)unused;
    if (plan_live(self))
        return NULL;
    size_t n = shard_pack_plan_duplicates(self->plan);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const char *dropped, *kept, *sum;
        shard_pack_plan_duplicate(self->plan, i, &dropped, &kept, &sum);
        PyObject *t = Py_BuildValue("(sss)", dropped, kept, sum);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

/* kept(j) -> the manifest entry (dict) of shard j when prepare kept it for a resume, else
 * None. */
static PyObject *PackPlan_kept(PackPlanObject *self, PyObject *arg)
{
    if (plan_live(self))
        return NULL;
    size_t j = PyLong_AsSize_t(arg);
    if (j == (size_t)-1 && PyErr_Occurred())
        return NULL;
    ShardFileInfo info;
    int rc = shard_pack_kept(self->plan, j, &info);
    if (rc < 0)
        return PyErr_NoMemory();
    if (!rc)
        Py_RETURN_NONE;
    PyObject *d = shard_py_info_dict(&info);
    free((char *)info.url);
    return d;
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
        if (shard_py_info_from_dict(d, &x))
            goto done;
        if ((rc = shard_manifest_add(m, &x))) {
            shard_py_raise(rc, "out of memory");
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    rc = shard_pack_manifest_write(self->plan, m, path, &err);
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
    {"attach", (PyCFunction)PackPlan_attach, METH_NOARGS,
     "attach(): write shards for the run another process prepared, recording each for a resume"},
    {"duplicates", (PyCFunction)PackPlan_duplicates, METH_NOARGS,
     "duplicates() -> [(dropped, kept, sha256)]: the inputs dedup left out"},
    {"kept", (PyCFunction)PackPlan_kept, METH_O,
     "kept(j) -> shard j's manifest entry when prepare kept it for a resume, else None"},
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

static PyTypeObject PackPlanType = {
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

int shard_py_pack_ready(PyObject *m)
{
    PyTypeObject *types[] = {&PackPlanType};
    return shard_py_add_types(m, types, 1);
}
