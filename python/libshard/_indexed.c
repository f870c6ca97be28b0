/*
 * libshard._libshard, indexed access: list_shards (shard lists with their sample counts)
 * and ShardFiles (single samples by index, through each shard's index).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "_common.h"
#include "_indexed.h"
#include "_settings.h"

/* The remote table's keywords into rs, with the callable's own parameters in values[]. */
static int parse_remote(const ShardPySignature *sig, PyObject *args, PyObject *kw,
                        ShardRemoteSettings *rs, PyObject **values, PyObject **keep)
{
    shard_remote_default_settings(rs);
    ShardPyTarget target = {&shard_py_remote_table, rs};
    return shard_py_parse(sig, args, kw, &target, 1, values, keep);
}

/* A view's chosen samples of shard i: their numbers as native uint64s (array('Q')'s). */
static PyObject *chosen_bytes(const ShardView *v, size_t i)
{
    uint64_t n = shard_view_count(v, i);
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(uint64_t)));
    uint64_t *p = b ? (uint64_t *)PyBytes_AS_STRING(b) : NULL;
    for (uint64_t j = 0; p && j < n; j++)
        p[j] = shard_view_sample(v, i, j);
    return b;
}

static PyObject *entries_list(const ShardList *list, int columns, const ShardView *view)
{
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && i < shard_list_count(list); i++) {
        const ShardListEntry *e = shard_list_entry(list, i);
        PyObject *n = e->nsamples == SHARD_COUNT_UNKNOWN
                          ? Py_NewRef(Py_None)
                          : PyLong_FromUnsignedLongLong((unsigned long long)e->nsamples);
        PyObject *t = !n ? NULL
                      : columns ? Py_BuildValue("(sNzz)", e->url, n, e->index, e->columns)
                                : Py_BuildValue("(sNz)", e->url, n, e->index);
        if (t && view) { /* the chosen samples last */
            PyObject *c = chosen_bytes(view, i);
            PyObject *more = c ? PyTuple_Pack(1, c) : NULL;
            Py_SETREF(t, more ? PySequence_Concat(t, more) : NULL);
            Py_XDECREF(more);
            Py_XDECREF(c);
        }
        if (!t || PyList_Append(out, t))
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

/* What the manifests among the specs say of the list: {"names": [each spec's manifest name
 * or None], "datasets": {shard: its "dataset"}} (wids's), without a Python object for the
 * shards that have none. */
static PyObject *manifests_info(const ShardList *list, size_t nspecs)
{
    PyObject *names = PyList_New((Py_ssize_t)nspecs), *datasets = PyDict_New();
    PyObject *out = names && datasets ? PyDict_New() : NULL;
    size_t first = 0; /* the list's first shard of each spec */
    for (size_t s = 0; out && s < nspecs; s++) {
        const ShardManifest *mf = shard_list_manifest(list, s);
        PyObject *name = mf ? PyUnicode_FromString(shard_manifest_name(mf)) : Py_NewRef(Py_None);
        if (!name) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(names, (Py_ssize_t)s, name);
        size_t n = 0;
        while (first + n < shard_list_count(list) && shard_list_entry(list, first + n)->spec == s)
            n++;
        for (size_t i = 0; mf && i < n && out; i++) {
            const char *d = shard_manifest_dataset(mf, i);
            PyObject *k = d ? PyLong_FromSize_t(first + i) : NULL, *v = d ? PyUnicode_FromString(d) : NULL;
            if (d && (!k || !v || PyDict_SetItem(datasets, k, v)))
                Py_CLEAR(out);
            Py_XDECREF(k);
            Py_XDECREF(v);
        }
        first += n;
    }
    if (out && (PyDict_SetItemString(out, "names", names) ||
                PyDict_SetItemString(out, "datasets", datasets)))
        Py_CLEAR(out);
    Py_XDECREF(names);
    Py_XDECREF(datasets);
    return out;
}

static const char *const list_params[] = {"specs", "make_indexes", "index_cache",
                                          "manifests", "columns", "write_manifest", "keys",
                                          NULL};
static const ShardPySignature list_signature = {"list_shards", list_params, 1, 1, 0};

typedef struct {
    const char *const *specs;
    size_t n;
    const ShardListSettings *ls;
    const char *manifest; /* where the list is written down as a manifest, or NULL */
    const char *keys;     /* a view's key file, or NULL */
    ShardList *list;
    ShardView *view;
    ShardError err;
} ListExpand;

static int list_expand(void *arg)
{
    ListExpand *x = arg;
    int rc = shard_list_expand(&x->list, x->specs, x->n, x->ls, &x->err);
    if (!rc && x->keys)
        rc = shard_view_new(&x->view, x->list, x->keys, x->ls->remote, &x->err);
    ShardManifest *m = NULL;
    if (!rc && x->manifest &&
        !(rc = shard_list_manifest_of(x->list, "listing", &m, &x->err)))
        rc = shard_manifest_write_remote(m, x->manifest, x->ls->remote, &x->err);
    shard_manifest_free(&m);
    return rc;
}

static PyObject *py_list_shards(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    ShardRemoteSettings rs;
    PyObject *values[7] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL}, *keep = NULL, *out = NULL;
    PyObject *cache = NULL, *manifest = NULL, *keys = NULL;
    ShardPySpecs sp = {0};
    ShardRemote *rm = NULL;
    int make = 0, info = 0, columns = 0;
    if (parse_remote(&list_signature, args, kw, &rs, values, &keep) ||
        shard_py_specs_parse(values[0], &sp))
        goto done;
    if (values[1] && (make = PyObject_IsTrue(values[1])) < 0)
        goto done;
    if (values[3] && (info = PyObject_IsTrue(values[3])) < 0)
        goto done;
    if (values[4] && (columns = PyObject_IsTrue(values[4])) < 0)
        goto done;
    if (values[2] && values[2] != Py_None && !(cache = PyOS_FSPath(values[2])))
        goto done;
    if (cache && !PyUnicode_Check(cache)) {
        PyErr_SetString(PyExc_TypeError, "index_cache: a str path");
        goto done;
    }
    if (values[5] && values[5] != Py_None && !(manifest = PyOS_FSPath(values[5])))
        goto done;
    if (manifest && !PyUnicode_Check(manifest)) {
        PyErr_SetString(PyExc_TypeError, "write_manifest: a str path");
        goto done;
    }
    if (values[6] && values[6] != Py_None && !(keys = PyOS_FSPath(values[6])))
        goto done;
    if (keys && !PyUnicode_Check(keys)) {
        PyErr_SetString(PyExc_TypeError, "keys: a str path");
        goto done;
    }
    if (sp.nsources) {
        PyErr_SetString(PyExc_TypeError, "list_shards: specs, not a mix of weighted sources");
        goto done;
    }
    if (shard_py_remote_new(&rs, &rm))
        goto done;
    ShardListSettings ls;
    shard_list_default_settings(&ls);
    ls.remote = rm;
    /* indexed reading seeks: every shard without a .idx beside it gets one in the cache */
    ls.build_indexes = make || keys ? SHARD_INDEXES_FOR_SEEKING /* a view: each one's names */
                       : manifest   ? SHARD_INDEXES_WHERE_CHEAP /* its counts */
                                    : 0;
    ls.index_cache = cache ? PyUnicode_AsUTF8(cache) : NULL;
    ls.progress = 1;
    ls.columns = (unsigned char)columns;
    if (cache && !ls.index_cache)
        goto done;
    ListExpand x = {sp.urls, sp.n, &ls, manifest ? PyUnicode_AsUTF8(manifest) : NULL,
                    keys ? PyUnicode_AsUTF8(keys) : NULL, NULL, NULL, {0}};
    if ((manifest && !x.manifest) || (keys && !x.keys))
        goto done;
    int rc;
    if (shard_py_blocking(list_expand, &x, rm, &rc) == 0)
        out = rc ? shard_py_raise(rc, x.err.message) : entries_list(x.list, columns, x.view);
    if (out && info) {
        PyObject *mi = manifests_info(x.list, sp.n);
        uint64_t given = 0, missing = 0;
        if (mi && x.view) {
            shard_view_keys(x.view, &given, &missing);
            PyObject *k = Py_BuildValue("{sKsK}", "given", (unsigned long long)given,
                                        "missing", (unsigned long long)missing);
            if (!k || PyDict_SetItemString(mi, "keys", k))
                Py_CLEAR(mi);
            Py_XDECREF(k);
        }
        Py_SETREF(out, mi ? PyTuple_Pack(2, out, mi) : NULL);
        Py_XDECREF(mi);
    }
    shard_view_free(&x.view);
    shard_list_free(&x.list);
    shard_py_trim(); /* the list's memory back to the system, not kept for the next one */
done:
    shard_py_specs_free(&sp);
    Py_XDECREF(keep);
    Py_XDECREF(cache);
    Py_XDECREF(manifest);
    Py_XDECREF(keys);
    Py_BEGIN_ALLOW_THREADS
    shard_remote_free(&rm);
    Py_END_ALLOW_THREADS
    return out;
}

/* ---- ShardFiles ------------------------------------------------------------------------- */

/* Shards read one sample at a time through their indexes, the most recently used open. */
typedef struct {
    PyObject_HEAD
    ShardRemote *rm;
    PyObject *urls;   /* list of str */
    PyObject *indexes; /* list of str or None: the index each shard is read through */
    ShardFile **open; /* per shard, NULL when closed */
    uint64_t *used;   /* per shard: when last read, for the LRU */
    uint64_t clock;
    Py_ssize_t nopen, max_open;
    pthread_mutex_t mu; /* one read at a time (the GIL is let go while it reads) */
    int mu_ok;
    pid_t pid; /* the process whose network thread rm runs */
} ShardFilesObject;

static const char *const files_params[] = {"urls", "open_files", "indexes", NULL};
static const ShardPySignature files_signature = {"ShardFiles", files_params, 2, 1, 0};

/* urls as a new list of str, or NULL with TypeError. */
static PyObject *url_list(PyObject *o)
{
    PyObject *urls = PySequence_List(o);
    for (Py_ssize_t i = 0; urls && i < PyList_GET_SIZE(urls); i++)
        if (!PyUnicode_Check(PyList_GET_ITEM(urls, i))) {
            Py_CLEAR(urls);
            PyErr_SetString(PyExc_TypeError, "urls: a list of str");
        }
    return urls;
}

static int ShardFiles_init(ShardFilesObject *self, PyObject *args, PyObject *kw)
{
    ShardRemoteSettings rs;
    PyObject *values[3] = {NULL, NULL, NULL}, *keep = NULL, *urls = NULL, *indexes = NULL;
    Py_ssize_t max_open = 8;
    int rc = -1;
    if (parse_remote(&files_signature, args, kw, &rs, values, &keep))
        goto done;
    if (values[1] && (max_open = PyNumber_AsSsize_t(values[1], PyExc_OverflowError)) == -1 &&
        PyErr_Occurred())
        goto done;
    if (self->urls || max_open < 1) {
        PyErr_SetString(PyExc_ValueError, self->urls ? "ShardFiles: already set up"
                                                     : "open_files: at least 1");
        goto done;
    }
    if (!(urls = url_list(values[0])))
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(urls);
    if (values[2] && values[2] != Py_None) {
        if (!(indexes = PySequence_List(values[2])))
            goto done;
        int ok = PyList_GET_SIZE(indexes) == n;
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            PyObject *x = PyList_GET_ITEM(indexes, i);
            ok = x == Py_None || PyUnicode_Check(x);
        }
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "indexes: a str path or None for each url");
            goto done;
        }
    }
    self->open = PyMem_Calloc((size_t)(n ? n : 1), sizeof *self->open);
    self->used = PyMem_Calloc((size_t)(n ? n : 1), sizeof *self->used);
    if (!self->open || !self->used) {
        PyErr_NoMemory();
        goto done;
    }
    if (shard_py_remote_new(&rs, &self->rm))
        goto done;
    self->urls = urls;
    urls = NULL;
    self->indexes = indexes;
    indexes = NULL;
    self->max_open = max_open;
    self->pid = getpid();
    pthread_mutex_init(&self->mu, NULL);
    self->mu_ok = 1;
    rc = 0;
done:
    Py_XDECREF(urls);
    Py_XDECREF(indexes);
    Py_XDECREF(keep);
    return rc;
}

static void ShardFiles_dealloc(ShardFilesObject *self)
{
    if (self->pid && self->pid != getpid()) { /* inherited through fork: not ours to free */
        Py_XDECREF(self->urls);
        Py_XDECREF(self->indexes);
        Py_TYPE(self)->tp_free((PyObject *)self);
        return;
    }
    Py_ssize_t n = self->urls ? PyList_GET_SIZE(self->urls) : 0;
    for (Py_ssize_t i = 0; i < n; i++)
        shard_file_free(&self->open[i]);
    PyMem_Free(self->open);
    PyMem_Free(self->used);
    shard_remote_free(&self->rm);
    Py_XDECREF(self->urls);
    Py_XDECREF(self->indexes);
    if (self->mu_ok)
        pthread_mutex_destroy(&self->mu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Shard i open (closing the least recently used past max_open), under self->mu. */
static ShardFile *shard_open_lru(ShardFilesObject *self, Py_ssize_t i, const char *url,
                                 const char *index, ShardError *err, int *rc)
{
    self->used[i] = ++self->clock;
    if (self->open[i])
        return self->open[i];
    if (self->nopen >= self->max_open) {
        Py_ssize_t n = PyList_GET_SIZE(self->urls), old = -1;
        for (Py_ssize_t k = 0; k < n; k++)
            if (self->open[k] && (old < 0 || self->used[k] < self->used[old]))
                old = k;
        shard_file_free(&self->open[old]);
        self->nopen--;
    }
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.remote = self->rm;
    fs.index = index;
    *rc = shard_file_open(&self->open[i], url, &fs, err);
    if (*rc)
        return NULL;
    self->nopen++;
    return self->open[i];
}

static PyObject *ShardFiles_read(ShardFilesObject *self, PyObject *args)
{
    Py_ssize_t i;
    unsigned long long j;
    if (!PyArg_ParseTuple(args, "nK", &i, &j))
        return NULL;
    if (!self->urls) {
        PyErr_SetString(PyExc_ValueError, "ShardFiles: not set up");
        return NULL;
    }
    if (self->pid != getpid())
        return shard_py_raise(SHARD_ERR_STATE, "this ShardFiles was made in another process "
                                               "(before a fork): make a new one in this process");
    if (i < 0 || i >= PyList_GET_SIZE(self->urls)) {
        PyErr_Format(PyExc_IndexError, "shard %zd of %zd", i, PyList_GET_SIZE(self->urls));
        return NULL;
    }
    const char *url = PyUnicode_AsUTF8(PyList_GET_ITEM(self->urls, i));
    if (!url)
        return NULL;
    PyObject *ix = self->indexes ? PyList_GET_ITEM(self->indexes, i) : Py_None;
    const char *index = ix == Py_None ? NULL : PyUnicode_AsUTF8(ix);
    if (ix != Py_None && !index)
        return NULL;
    ShardError err = {0};
    char msg[SHARD_ERROR_MAX] = "";
    int rc = 0;
    PyObject *out = NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    ShardFile *f = shard_open_lru(self, i, url, index, &err, &rc);
    const ShardSampleView *v = NULL;
    if (f && !(rc = shard_file_seek(f, j)))
        rc = shard_file_next(f, &v);
    if (rc && f)
        snprintf(msg, sizeof msg, "%s", shard_file_error(f));
    else if (rc)
        snprintf(msg, sizeof msg, "%s", err.message);
    Py_BLOCK_THREADS
    if (!rc)
        out = shard_py_sample_dict(v);
    else if (rc == SHARD_EOS || rc == SHARD_ERR_NOT_FOUND)
        PyErr_Format(PyExc_IndexError, "%s: sample %llu is past the shard's last", url, j);
    else
        shard_py_raise(rc, msg);
    if (rc && f) { /* a failed seek or read leaves the file where it cannot go on */
        shard_file_free(&self->open[i]);
        self->nopen--;
    }
    Py_UNBLOCK_THREADS
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    return out;
}

static PyObject *ShardFiles_remote_stats(ShardFilesObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->rm) {
        PyErr_SetString(PyExc_ValueError, "ShardFiles: not set up");
        return NULL;
    }
    return shard_py_remote_stats(self->rm);
}

static PyMethodDef ShardFiles_methods[] = {
    {"read", (PyCFunction)ShardFiles_read, METH_VARARGS,
     "read(shard, index) -> {'__key__', '__url__', field: bytes}: one sample, through the "
     "shard's index (a Range request for a remote shard)"},
    {"remote_stats", (PyCFunction)ShardFiles_remote_stats, METH_NOARGS,
     "Counters of the remote reads: bytes, requests, retries, resumes, cache hits."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ShardFilesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.ShardFiles",
    .tp_basicsize = sizeof(ShardFilesObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ShardFiles(urls, open_files=8, *, remote settings): shards read one sample at "
              "a time by index, the open_files most recently read kept open.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ShardFiles_init,
    .tp_dealloc = (destructor)ShardFiles_dealloc,
    .tp_methods = ShardFiles_methods,
};

static PyMethodDef indexed_functions[] = {
    {"list_shards", (PyCFunction)(void (*)(void))py_list_shards, METH_VARARGS | METH_KEYWORDS,
     "list_shards(specs, *, manifests=False, remote settings) -> [(url, samples or None, "
     "index)] (with manifests, ([...], {\"names\", \"datasets\"})): manifests, brace "
     "patterns and prefixes expanded, counts from manifests or indexes"},
    {NULL, NULL, 0, NULL},
};

int shard_py_indexed_ready(PyObject *m)
{
    PyTypeObject *types[] = {&ShardFilesType};
    return shard_py_add_types(m, types, 1) || PyModule_AddFunctions(m, indexed_functions) ? -1 : 0;
}
