/*
 * libshard._libshard — the CPython binding: Reader (raw WebDataset-style samples), Loader
 * (decoded batches whose buffers are exported without a copy), and the decode functions;
 * the writing half (Writer, PackPlan) is in _pack.c.
 *
 * The GIL is released around every call that waits or decodes. A Batch object owns one of
 * the loader's batch buffers until it is garbage: tensors made from its buffers keep it
 * alive, and its buffer goes back to the ring when the last of them is gone.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <unistd.h>
#include <string.h>

#include <shard/shard.h>

#include "_libshard.h"


static PyObject *ShardErrorType;

PyObject *shard_py_raise(int code, const char *msg)
{
    PyObject *type = code == SHARD_ERR_INVALID ? PyExc_ValueError
                     : code == SHARD_ERR_NOT_FOUND ? PyExc_FileNotFoundError
                     : code == SHARD_ERR_NOMEM    ? PyExc_MemoryError
                                                  : ShardErrorType;
    PyErr_SetString(type, msg && *msg ? msg : shard_strerror(code));
    return NULL;
}

static int is_path(PyObject *o)
{
    return PyUnicode_Check(o) || PyBytes_Check(o) || PyObject_HasAttrString(o, "__fspath__");
}

/* Appends a spec (a str, bytes or path) to keep as a str, or with many a sequence of them;
 * how many, -1 with an exception set. */
static Py_ssize_t add_specs(PyObject *keep, PyObject *o, int many)
{
    if (is_path(o)) {
        PyObject *p = PyOS_FSPath(o);
        if (p && PyBytes_Check(p)) {
            PyObject *u = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p));
            Py_DECREF(p);
            p = u;
        }
        int rc = p ? PyList_Append(keep, p) : -1;
        Py_XDECREF(p);
        return rc ? -1 : 1;
    }
    if (!many) {
        PyErr_Format(PyExc_TypeError, "a shard spec is a str or a path, not %R", o);
        return -1;
    }
    PyObject *seq = PySequence_Fast(o, "shard specs: a str, a path or a list of them");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (add_specs(keep, PySequence_Fast_GET_ITEM(seq, i), 0) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    Py_DECREF(seq);
    return n;
}

/* Shard specs as Python gives them: a str or path, a list of them (one source), or a list of
 * (spec or list of specs, weight) pairs (a mix). */
typedef struct Specs {
    const char **urls; /* borrowed from keep */
    size_t n;
    ShardMixInput *sources; /* their urls point into urls; NULL unless a mix */
    size_t nsources;
    PyObject *keep; /* the str objects */
} Specs;

static void specs_free(Specs *sp)
{
    PyMem_Free(sp->urls);
    PyMem_Free(sp->sources);
    Py_CLEAR(sp->keep);
    memset(sp, 0, sizeof *sp);
}

static int specs_parse(PyObject *o, Specs *sp)
{
    memset(sp, 0, sizeof *sp);
    if (!(sp->keep = PyList_New(0)))
        return -1;
    PyObject *seq = NULL;
    if (is_path(o)) {
        if (add_specs(sp->keep, o, 0) < 0)
            goto fail;
    } else {
        seq = PySequence_Fast(o, "shard specs: a str, a path, a list of them, or a list of "
                                 "(spec, weight) pairs");
        if (!seq)
            goto fail;
        Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
        int mix = 0;
        for (Py_ssize_t i = 0; i < len; i++)
            mix |= PyTuple_Check(PySequence_Fast_GET_ITEM(seq, i));
        if (mix && !(sp->sources = PyMem_Calloc((size_t)len, sizeof *sp->sources))) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < len; i++) {
            PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
            if (!mix) {
                if (add_specs(sp->keep, it, 0) < 0)
                    goto fail;
                continue;
            }
            if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
                PyErr_Format(PyExc_TypeError, "a mix is a list of (spec, weight) pairs; item %zd "
                                              "is %R", i, it);
                goto fail;
            }
            Py_ssize_t k = add_specs(sp->keep, PyTuple_GET_ITEM(it, 0), 1);
            if (k < 0)
                goto fail;
            double w = PyFloat_AsDouble(PyTuple_GET_ITEM(it, 1));
            if (w == -1 && PyErr_Occurred())
                goto fail;
            sp->sources[i] = (ShardMixInput){NULL, (size_t)k, w};
        }
        sp->nsources = mix ? (size_t)len : 0;
    }
    sp->n = (size_t)PyList_GET_SIZE(sp->keep);
    if (!(sp->urls = PyMem_Calloc(sp->n ? sp->n : 1, sizeof *sp->urls))) {
        PyErr_NoMemory();
        goto fail;
    }
    for (size_t i = 0; i < sp->n; i++)
        if (!(sp->urls[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(sp->keep, (Py_ssize_t)i))))
            goto fail;
    for (size_t i = 0, at = 0; i < sp->nsources; i++) {
        sp->sources[i].urls = sp->urls + at;
        at += sp->sources[i].nurls;
    }
    Py_XDECREF(seq);
    return 0;
fail:
    Py_XDECREF(seq);
    specs_free(sp);
    return -1;
}

static int parse_mode(const char *m, ShardMode *out)
{
    if (!strcmp(m, "exact"))
        *out = SHARD_MODE_EXACT;
    else if (!strcmp(m, "equal"))
        *out = SHARD_MODE_EQUAL;
    else if (!strcmp(m, "resampled"))
        *out = SHARD_MODE_RESAMPLED;
    else {
        PyErr_Format(PyExc_ValueError, "mode must be 'exact', 'equal' or 'resampled', not '%s'", m);
        return -1;
    }
    return 0;
}

/* Reader settings shared by Reader and Loader keyword arguments. */
typedef struct ReaderArgs {
    PyObject *urls;
    PyObject *seed;
    unsigned long long epoch;
    int rank, world_size, worker, num_workers;
    const char *mode;
    int pad;
    unsigned long long epoch_samples;
    int shuffle_shards;
    Py_ssize_t shuffle, shuffle_initial, streams, queue_depth;
    int skip_errors;
    int manifest_commands;
    const char *cache_dir;
    unsigned long long cache_size;
    int retries;
    double timeout, stall_timeout, backoff;
    unsigned long long memory_budget;
} ReaderArgs;

static void reader_args_default(ReaderArgs *a)
{
    memset(a, 0, sizeof *a);
    a->seed = Py_None;
    a->rank = -1;
    a->world_size = -1;
    a->num_workers = 1;
    a->mode = "exact";
    a->shuffle_shards = 1;
    a->streams = 4;
    a->queue_depth = 64;
    a->retries = -1;
    a->timeout = a->stall_timeout = a->backoff = -1;
    a->memory_budget = 256ull << 20;
}

/* The remote reader (remote.h) for the arguments' settings, into *rm (owned by the caller,
 * freed after the reader) and s->remote. */
static int make_remote(const ReaderArgs *a, ShardRemote **rm)
{
    ShardRemoteSettings rs;
    shard_remote_default_settings(&rs);
    rs.cache_dir = a->cache_dir;
    rs.cache_bytes = a->cache_size;
    if (a->retries >= 0)
        rs.retries = a->retries;
    if (a->timeout >= 0)
        rs.connect_timeout = a->timeout;
    if (a->stall_timeout >= 0)
        rs.stall_timeout = a->stall_timeout;
    if (a->backoff >= 0)
        rs.backoff = a->backoff;
    ShardError err;
    int rc = shard_remote_new(rm, &rs, &err);
    if (rc) {
        shard_py_raise(rc, err.message);
        return -1;
    }
    return 0;
}

static int remote_settings(const ReaderArgs *a, ShardReaderSettings *s, ShardRemote **rm)
{
    if (make_remote(a, rm))
        return -1;
    s->remote = *rm;
    return 0;
}

static PyObject *remote_stats_dict(ShardRemote *rm)
{
    ShardRemoteStats st;
    shard_remote_stats(rm, &st);
    return Py_BuildValue("{sKsKsKsKsKsKsdsKsKsK}", "bytes", (unsigned long long)st.bytes,
                         "requests", (unsigned long long)st.requests, "retries",
                         (unsigned long long)st.retries, "resumes", (unsigned long long)st.resumes,
                         "range_ignored", (unsigned long long)st.range_ignored, "replaced",
                         (unsigned long long)st.replaced, "wait_seconds", st.wait_seconds,
                         "cache_hits", (unsigned long long)st.cache_hits, "cache_misses",
                         (unsigned long long)st.cache_misses, "cache_bytes",
                         (unsigned long long)st.cache_bytes);
}

/* s from a; its specs are sp's (specs_free after the open). */
static int reader_settings(const ReaderArgs *a, ShardReaderSettings *s, Specs *sp,
                           ShardRemote **rm)
{
    shard_reader_default_settings(s);
    if (remote_settings(a, s, rm))
        return -1;
    if (specs_parse(a->urls, sp))
        return -1;
    if (sp->nsources) {
        s->sources = sp->sources;
        s->nsources = sp->nsources;
    } else {
        s->urls = sp->urls;
        s->nurls = sp->n;
    }
    if (a->seed != Py_None) {
        s->seed = PyLong_AsUnsignedLongLongMask(a->seed);
        if (PyErr_Occurred())
            return -1;
        s->have_seed = 1;
    }
    s->epoch = a->epoch;
    s->rank = a->rank;
    s->world_size = a->world_size;
    s->worker = a->worker;
    s->num_workers = a->num_workers;
    if (parse_mode(a->mode, &s->mode))
        return -1;
    s->pad = a->pad;
    s->epoch_samples = a->epoch_samples;
    s->shuffle_shards = a->shuffle_shards;
    if (a->shuffle < 0 || a->shuffle_initial < 0 || a->streams < 1 || a->queue_depth < 1) {
        PyErr_SetString(PyExc_ValueError, "shuffle sizes must be >= 0, streams and queue_depth >= 1");
        return -1;
    }
    s->shuffle_buffer = (size_t)a->shuffle;
    s->shuffle_initial = (size_t)a->shuffle_initial;
    s->streams = (size_t)a->streams;
    s->queue_depth = (size_t)a->queue_depth;
    s->memory_budget = (size_t)a->memory_budget;
    s->skip_errors = a->skip_errors;
    s->manifest_commands = a->manifest_commands;
    return 0;
}

#define READER_KWLIST                                                                       \
    "urls", "seed", "epoch", "rank", "world_size", "worker", "num_workers", "mode", "pad",  \
        "epoch_samples", "shuffle_shards", "shuffle", "shuffle_initial", "streams",          \
        "queue_depth", "skip_errors", "manifest_commands", "cache_dir", "cache_size",       \
        "retries", "timeout", "stall_timeout", "backoff", "memory_budget"
#define READER_FMT_KW "O|$OKiiiispKpnnnnppzKidddK"
#define READER_PTRS(a)                                                                      \
    &(a).urls, &(a).seed, &(a).epoch, &(a).rank, &(a).world_size, &(a).worker,             \
        &(a).num_workers, &(a).mode, &(a).pad, &(a).epoch_samples, &(a).shuffle_shards,    \
        &(a).shuffle, &(a).shuffle_initial, &(a).streams, &(a).queue_depth, &(a).skip_errors, \
        &(a).manifest_commands, &(a).cache_dir, &(a).cache_size, &(a).retries, &(a).timeout, &(a).stall_timeout,    \
        &(a).backoff, &(a).memory_budget

/* A method called on an object whose __init__ failed or never ran (Reader.__new__(Reader))
 * has no handle: it raises instead of passing NULL to the library. */
#define NEED(handle, what)                                                                  \
    do {                                                                                    \
        if (!(handle))                                                                      \
            return shard_py_raise(SHARD_ERR_STATE, what " is not open (its __init__ failed or " \
                                                "was not called)");                         \
    } while (0)
/* An object made before a fork has its threads in the parent only: in the child it can be
 * neither used nor freed (joining threads that are not there); it raises, and is let go
 * without freeing. */
#define NEED_HERE(self, what)                                                               \
    do {                                                                                    \
        if ((self)->pid != getpid())                                                        \
            return shard_py_raise(SHARD_ERR_STATE, what " was made in another process (before " \
                                                "a fork): make a new one in this process");  \
    } while (0)
#define NEED_READER(self)                                                                   \
    do {                                                                                    \
        NEED((self)->r, "Reader");                                                          \
        NEED_HERE(self, "this Reader");                                                     \
    } while (0)
#define NEED_LOADER(self)                                                                   \
    do {                                                                                    \
        NEED((self)->l, "Loader");                                                          \
        NEED_HERE(self, "this Loader");                                                     \
    } while (0)

/* ---- Reader ---------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD ShardReader *r;
    ShardRemote *rm; /* freed after r */
    pid_t pid;       /* the process whose threads r runs */
} ReaderObject;

static int Reader_init(ReaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {READER_KWLIST, NULL};
    ReaderArgs a;
    reader_args_default(&a);
    if (!PyArg_ParseTupleAndKeywords(args, kw, READER_FMT_KW, kwlist, READER_PTRS(a)))
        return -1;
    ShardReaderSettings s;
    Specs sp = {0};
    shard_reader_free(&self->r);
    shard_remote_free(&self->rm);
    if (reader_settings(&a, &s, &sp, &self->rm)) {
        specs_free(&sp);
        return -1;
    }
    ShardError err;
    int rc;
    self->pid = getpid();
    Py_BEGIN_ALLOW_THREADS rc = shard_reader_open(&self->r, &s, &err);
    Py_END_ALLOW_THREADS specs_free(&sp);
    if (rc) {
        shard_py_raise(rc, err.message);
        return -1;
    }
    return 0;
}

static void Reader_dealloc(ReaderObject *self)
{
    if (self->pid && self->pid != getpid()) { /* inherited through fork: not ours to free */
        Py_TYPE(self)->tp_free((PyObject *)self);
        return;
    }
    ShardReader *r = self->r;
    ShardRemote *rm = self->rm;
    self->r = NULL;
    self->rm = NULL;
    Py_BEGIN_ALLOW_THREADS shard_reader_free(&r);
    shard_remote_free(&rm);
    Py_END_ALLOW_THREADS Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The sample as WebDataset gives it: {"__key__", "__url__", field: bytes}. */
static PyObject *sample_dict(const ShardSampleView *v)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    const char *key = v->key, *url = v->url;
    const ShardFieldView *f = v->fields;
    size_t n = v->nfields;
    PyObject *k = PyUnicode_DecodeUTF8(key, (Py_ssize_t)strlen(key), "surrogateescape");
    PyObject *u = PyUnicode_DecodeUTF8(url, (Py_ssize_t)strlen(url), "surrogateescape");
    if (!k || !u || PyDict_SetItemString(d, "__key__", k) || PyDict_SetItemString(d, "__url__", u)) {
        Py_XDECREF(k);
        Py_XDECREF(u);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(k);
    Py_DECREF(u);
    for (size_t i = 0; i < n; i++) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)f[i].data, (Py_ssize_t)f[i].size);
        if (!b || PyDict_SetItemString(d, f[i].name, b)) {
            Py_XDECREF(b);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(b);
    }
    return d;
}

static PyObject *Reader_next(ReaderObject *self)
{
    NEED_READER(self);
    ShardItem *it;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = shard_reader_take(self->r, &it);
    Py_END_ALLOW_THREADS if (rc == SHARD_EOS) return NULL; /* StopIteration */
    if (rc)
        return shard_py_raise(rc, shard_reader_error(self->r));
    PyObject *d = sample_dict(shard_item_sample(it));
    shard_item_free(&it);
    return d;
}

static PyObject *Reader_state(ReaderObject *self, PyObject *unused)
{
    NEED_READER(self);
    (void)unused;
    char buf[128];
    shard_reader_state(self->r, buf, sizeof buf);
    return PyUnicode_FromString(buf);
}

static PyObject *Reader_restore(ReaderObject *self, PyObject *arg)
{
    NEED_READER(self);
    const char *st = PyUnicode_AsUTF8(arg);
    if (!st)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = shard_reader_restore(self->r, st);
    Py_END_ALLOW_THREADS if (rc) return shard_py_raise(rc, shard_reader_error(self->r));
    Py_RETURN_NONE;
}

static PyObject *Reader_set_epoch(ReaderObject *self, PyObject *arg)
{
    NEED_READER(self);
    unsigned long long e = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = shard_reader_set_epoch(self->r, e);
    Py_END_ALLOW_THREADS if (rc) return shard_py_raise(rc, shard_reader_error(self->r));
    Py_RETURN_NONE;
}

static PyObject *Reader_seed(ReaderObject *self, void *c)
{
    NEED_READER(self);
    (void)c;
    return PyLong_FromUnsignedLongLong(shard_reader_seed(self->r));
}

static PyObject *Reader_epoch_length(ReaderObject *self, void *c)
{
    NEED_READER(self);
    (void)c;
    int64_t n = shard_reader_epoch_length(self->r);
    if (n < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(n);
}

static PyObject *Reader_stats(ReaderObject *self, PyObject *unused)
{
    NEED_READER(self);
    (void)unused;
    ShardReaderStats st;
    shard_reader_stats(self->r, &st);
    PyObject *errors = PyList_New(0);
    for (size_t i = 0; errors && shard_reader_kept_error(self->r, i); i++) {
        PyObject *e = PyUnicode_FromString(shard_reader_kept_error(self->r, i));
        if (!e || PyList_Append(errors, e)) {
            Py_XDECREF(e);
            Py_CLEAR(errors);
            break;
        }
        Py_DECREF(e);
    }
    if (!errors)
        return NULL;
    return Py_BuildValue("{s:K,s:K,s:K,s:d,s:K,s:K,s:K,s:N}", "samples", st.samples, "bytes",
                         st.bytes, "shards_opened", st.shards_opened, "wait_seconds",
                         st.wait_seconds, "skipped_shards", st.skipped_shards, "skipped_samples",
                         st.skipped_samples, "errors", st.errors, "kept_errors", errors);
}

static PyObject *Reader_remote_stats(ReaderObject *self, PyObject *unused)
{
    (void)unused;
    NEED_READER(self);
    return remote_stats_dict(self->rm);
}

static PyMethodDef Reader_methods[] = {
    {"remote_stats", (PyCFunction)Reader_remote_stats, METH_NOARGS,
     "Counters of the remote reads: bytes, requests, retries, resumes, cache hits."},
    {"state", (PyCFunction)Reader_state, METH_NOARGS, "The state to resume from."},
    {"restore", (PyCFunction)Reader_restore, METH_O, "Continue from a state."},
    {"set_epoch", (PyCFunction)Reader_set_epoch, METH_O, "Start an epoch."},
    {"stats", (PyCFunction)Reader_stats, METH_NOARGS, "Counters and kept errors."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Reader_getset[] = {
    {"seed", (getter)Reader_seed, NULL, "the seed in use", NULL},
    {"epoch_length", (getter)Reader_epoch_length, NULL, "samples per epoch or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *self_iter(PyObject *self)
{
    Py_INCREF(self);
    return self;
}

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.Reader",
    .tp_basicsize = sizeof(ReaderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reader(urls, **settings): raw samples as WebDataset dicts: {'__key__', "
              "'__url__', field: bytes}. urls: a spec (path, URL, braces, manifest, prefix), a "
              "list of them, or a mix: a list of (spec or list of specs, weight) pairs.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_iter = self_iter,
    .tp_iternext = (iternextfunc)Reader_next,
    .tp_methods = Reader_methods,
    .tp_getset = Reader_getset,
};

/* ---- indexed access: shard lists with counts, and single samples by index ---------------- */

#define REMOTE_KWLIST "cache_dir", "cache_size", "retries", "timeout", "stall_timeout", "backoff"
#define REMOTE_FMT "zKiddd"
#define REMOTE_PTRS(a) &(a).cache_dir, &(a).cache_size, &(a).retries, &(a).timeout, \
                       &(a).stall_timeout, &(a).backoff

static PyObject *py_list_shards(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"specs", REMOTE_KWLIST, NULL};
    ReaderArgs a;
    reader_args_default(&a);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$" REMOTE_FMT, kwlist, &a.urls, REMOTE_PTRS(a)))
        return NULL;
    Specs sp;
    ShardRemote *rm = NULL;
    if (specs_parse(a.urls, &sp))
        return NULL;
    if (sp.nsources) {
        specs_free(&sp);
        PyErr_SetString(PyExc_TypeError, "list_shards: specs, not a mix of weighted sources");
        return NULL;
    }
    if (make_remote(&a, &rm)) {
        specs_free(&sp);
        return NULL;
    }
    ShardListSettings ls;
    shard_list_default_settings(&ls);
    ls.remote = rm;
    ShardList *list = NULL;
    ShardError err;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = shard_list_expand(&list, sp.urls, sp.n, &ls, &err);
    Py_END_ALLOW_THREADS specs_free(&sp);
    PyObject *out = rc ? shard_py_raise(rc, err.message) : PyList_New(0);
    for (size_t i = 0; out && i < shard_list_count(list); i++) {
        const ShardListEntry *e = shard_list_entry(list, i);
        PyObject *t = e->nsamples == SHARD_COUNT_UNKNOWN
                          ? Py_BuildValue("(sO)", e->url, Py_None)
                          : Py_BuildValue("(sK)", e->url, (unsigned long long)e->nsamples);
        if (!t || PyList_Append(out, t))
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    shard_list_free(&list);
    Py_BEGIN_ALLOW_THREADS shard_remote_free(&rm);
    Py_END_ALLOW_THREADS return out;
}

/* Shards read one sample at a time through their indexes, the most recently used open. */
typedef struct {
    PyObject_HEAD ShardRemote *rm;
    PyObject *urls;  /* list of str */
    ShardFile **open; /* per shard, NULL when closed */
    uint64_t *used;   /* per shard: when last read, for the LRU */
    uint64_t clock;
    Py_ssize_t nopen, max_open;
    pthread_mutex_t mu; /* one read at a time (the GIL is let go while it reads) */
    int mu_ok;
    pid_t pid; /* the process whose network thread rm runs */
} ShardFilesObject;

static int ShardFiles_init(ShardFilesObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"urls", "open_files", REMOTE_KWLIST, NULL};
    ReaderArgs a;
    reader_args_default(&a);
    Py_ssize_t max_open = 8;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n$" REMOTE_FMT, kwlist, &a.urls, &max_open,
                                     REMOTE_PTRS(a)))
        return -1;
    if (self->urls || max_open < 1) {
        PyErr_SetString(PyExc_ValueError, self->urls ? "ShardFiles: already set up"
                                                     : "open_files: at least 1");
        return -1;
    }
    PyObject *urls = PySequence_List(a.urls);
    if (!urls)
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(urls);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyUnicode_Check(PyList_GET_ITEM(urls, i))) {
            Py_DECREF(urls);
            PyErr_SetString(PyExc_TypeError, "urls: a list of str");
            return -1;
        }
    self->open = PyMem_Calloc((size_t)(n ? n : 1), sizeof *self->open);
    self->used = PyMem_Calloc((size_t)(n ? n : 1), sizeof *self->used);
    if (!self->open || !self->used) {
        Py_DECREF(urls);
        PyErr_NoMemory();
        return -1;
    }
    if (make_remote(&a, &self->rm)) {
        Py_DECREF(urls);
        return -1;
    }
    self->urls = urls;
    self->max_open = max_open;
    self->pid = getpid();
    pthread_mutex_init(&self->mu, NULL);
    self->mu_ok = 1;
    return 0;
}

static void ShardFiles_dealloc(ShardFilesObject *self)
{
    if (self->pid && self->pid != getpid()) { /* inherited through fork: not ours to free */
        Py_XDECREF(self->urls);
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
    if (self->mu_ok)
        pthread_mutex_destroy(&self->mu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Shard i open (closing the least recently used past max_open), under self->mu. */
static ShardFile *shard_open_lru(ShardFilesObject *self, Py_ssize_t i, const char *url,
                                 ShardError *err, int *rc)
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
    NEED_HERE(self, "this ShardFiles");
    if (i < 0 || i >= PyList_GET_SIZE(self->urls)) {
        PyErr_Format(PyExc_IndexError, "shard %zd of %zd", i, PyList_GET_SIZE(self->urls));
        return NULL;
    }
    const char *url = PyUnicode_AsUTF8(PyList_GET_ITEM(self->urls, i));
    if (!url)
        return NULL;
    ShardError err = {0};
    char msg[SHARD_ERROR_MAX] = "";
    int rc = 0;
    PyObject *out = NULL;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->mu);
    ShardFile *f = shard_open_lru(self, i, url, &err, &rc);
    const ShardSampleView *v = NULL;
    if (f && !(rc = shard_file_seek(f, j)))
        rc = shard_file_next(f, &v);
    if (rc && f)
        snprintf(msg, sizeof msg, "%s", shard_file_error(f));
    else if (rc)
        snprintf(msg, sizeof msg, "%s", err.message);
    Py_BLOCK_THREADS
    if (!rc) {
        out = sample_dict(v);
    } else if (rc == SHARD_EOS || rc == SHARD_ERR_NOT_FOUND) {
        PyErr_Format(PyExc_IndexError, "%s: sample %llu is past the shard's last", url, j);
    } else {
        shard_py_raise(rc, msg);
    }
    if (rc && f) { /* a failed seek or read leaves the file where it cannot go on */
        shard_file_free(&self->open[i]);
        self->nopen--;
    }
    Py_UNBLOCK_THREADS pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS return out;
}

static PyObject *ShardFiles_remote_stats(ShardFilesObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->rm) {
        PyErr_SetString(PyExc_ValueError, "ShardFiles: not set up");
        return NULL;
    }
    return remote_stats_dict(self->rm);
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
    .tp_doc = "ShardFiles(urls, open_files=8, *, remote options): shards read one sample at a "
              "time by index, the open_files most recently read kept open.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ShardFiles_init,
    .tp_dealloc = (destructor)ShardFiles_dealloc,
    .tp_methods = ShardFiles_methods,
};

/* ---- Loader and Batch ------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD ShardLoader *l;
    ShardRemote *rm; /* freed after l */
    PyObject *gpu;   /* the Gpu whose pinned memory l's batches are in; released after l */
    pid_t pid;       /* the process whose threads l runs */
    int layout, dtype, width, height;
} LoaderObject;

typedef struct {
    PyObject_HEAD LoaderObject *loader; /* strong reference */
    const ShardBatch *b;
    Py_ssize_t shape[4];
    Py_ssize_t lshape[1];
} BatchObject;

static PyTypeObject BatchType;
static PyTypeObject LoaderType;

/* n numbers from the sequence o (a tuple, a list, ...) into out; -1 with a TypeError that
 * names the option. */
static int numbers(PyObject *o, const char *name, Py_ssize_t n, double *out)
{
    PyObject *seq = PyUnicode_Check(o) || PyBytes_Check(o) ? NULL : PySequence_Fast(o, "");
    if (!seq || PySequence_Fast_GET_SIZE(seq) != n) {
        Py_XDECREF(seq);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %zd numbers, not %R", name, n, o);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: %zd numbers, not %R", name, n, o);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* The transform options decode, crop_box and Loader share, over t's values; -1 with an
 * exception set. */
static int transform_options(ShardTransform *t, const char *crop, int fast, int flip,
                             const char *layout, PyObject *scale, PyObject *ratio)
{
    t->fast = fast;
    t->flip = flip;
    if (strcmp(layout, "nchw") && strcmp(layout, "nhwc")) {
        PyErr_Format(PyExc_ValueError, "layout must be 'nchw' or 'nhwc', not '%s'", layout);
        return -1;
    }
    if (strcmp(crop, "center") && strcmp(crop, "none") && strcmp(crop, "random_resized")) {
        PyErr_Format(PyExc_ValueError,
                     "crop must be 'random_resized', 'center' or 'none', not '%s'", crop);
        return -1;
    }
    t->layout = !strcmp(layout, "nchw") ? SHARD_LAYOUT_NCHW : SHARD_LAYOUT_NHWC;
    t->crop = !strcmp(crop, "center") ? SHARD_CROP_CENTER
              : !strcmp(crop, "none") ? SHARD_CROP_NONE
                                      : SHARD_CROP_RANDOM_RESIZED;
    double v[2];
    if (scale) {
        if (numbers(scale, "scale", 2, v))
            return -1;
        t->scale_min = v[0], t->scale_max = v[1];
    }
    if (ratio) {
        if (numbers(ratio, "ratio", 2, v))
            return -1;
        t->ratio_min = v[0], t->ratio_max = v[1];
    }
    return 0;
}

static int Loader_init(LoaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {READER_KWLIST, "batch_size", "image_size", "crop", "flip", "fast",
                             "layout", "dtype", "mean", "std", "scale", "ratio", "drop_last",
                             "threads", "batches", "image_fields", "label_field", "raw_fields",
                             "missing_label", "gpu", "trace", NULL};
    ReaderArgs a;
    reader_args_default(&a);
    Py_ssize_t batch_size = 256, threads = 0, batches = 4;
    PyObject *image_size = NULL, *mean = NULL, *std = NULL, *scale = NULL, *ratio = NULL;
    const char *crop = "random_resized", *layout = "nchw", *dtype = "uint8";
    const char *image_fields = "jpg;jpeg;png", *label_field = "cls", *raw_fields = "*";
    int flip = 0, fast = 1, drop_last = 0;
    PyObject *missing_label = NULL, *gpu = NULL;
    const char *trace = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, READER_FMT_KW "nOsppssOOOOpnnszzOOz", kwlist,
                                     READER_PTRS(a), &batch_size, &image_size, &crop, &flip, &fast,
                                     &layout, &dtype, &mean, &std, &scale, &ratio, &drop_last,
                                     &threads, &batches, &image_fields, &label_field, &raw_fields,
                                     &missing_label, &gpu, &trace))
        return -1;
    ShardLoaderSettings s;
    shard_loader_default_settings(&s);
    s.trace_path = trace;
    if (gpu == Py_None)
        gpu = NULL;
    if (gpu && !(s.allocator = shard_py_pinned(gpu)))
        return -1;
    Specs sp = {0};
    shard_loader_free(&self->l);
    shard_remote_free(&self->rm);
    if (reader_settings(&a, &s.reader, &sp, &self->rm))
        goto fail;
    if (batch_size < 1 || threads < 0 || batches < 2) {
        PyErr_SetString(PyExc_ValueError, "batch_size >= 1, threads >= 0, batches >= 2");
        goto fail;
    }
    s.batch_size = (size_t)batch_size;
    s.threads = (int)threads;
    s.batches = (size_t)batches;
    s.drop_last = drop_last;
    s.image_fields = image_fields;
    s.label_field = label_field;
    s.raw_fields = raw_fields;
    if (missing_label && PyLong_Check(missing_label) && PyLong_AsLong(missing_label) == -1) {
        s.missing_label = SHARD_LABEL_MINUS_ONE;
    } else if (missing_label && !(PyUnicode_Check(missing_label) &&
                                  !PyUnicode_CompareWithASCIIString(missing_label, "error"))) {
        PyErr_Format(PyExc_ValueError, "missing_label: 'error' (the default) or -1, not %R",
                     missing_label);
        goto fail;
    }
    ShardTransform *t = &s.transform;
    if (image_size) {
        double hw[2];
        if (PyLong_Check(image_size) && !PyBool_Check(image_size)) {
            t->width = t->height = (int)PyLong_AsLong(image_size);
        } else if (numbers(image_size, "image_size (an int, or height and width)", 2, hw)) {
            goto fail;
        } else {
            t->height = (int)hw[0], t->width = (int)hw[1];
        }
    }
    if (transform_options(t, strcmp(crop, "resize") ? crop : "none", fast, flip, layout, scale,
                          ratio))
        goto fail;
    if (!strcmp(dtype, "uint8"))
        t->dtype = SHARD_DTYPE_UINT8;
    else if (!strcmp(dtype, "float32"))
        t->dtype = SHARD_DTYPE_FLOAT32;
    else {
        PyErr_SetString(PyExc_ValueError, "dtype must be 'uint8' or 'float32'");
        goto fail;
    }
    double v[3];
    if (mean) {
        if (numbers(mean, "mean", 3, v))
            goto fail;
        t->mean[0] = (float)v[0], t->mean[1] = (float)v[1], t->mean[2] = (float)v[2];
    }
    if (std) {
        if (numbers(std, "std", 3, v))
            goto fail;
        t->std[0] = (float)v[0], t->std[1] = (float)v[1], t->std[2] = (float)v[2];
    }
    self->layout = t->layout;
    self->dtype = t->dtype;
    self->width = t->width;
    self->height = t->height;
    ShardError err;
    int rc;
    shard_loader_free(&self->l);
    Py_XINCREF(gpu);
    Py_XSETREF(self->gpu, gpu);
    self->pid = getpid();
    Py_BEGIN_ALLOW_THREADS rc = shard_loader_open(&self->l, &s, &err);
    Py_END_ALLOW_THREADS specs_free(&sp);
    if (rc) {
        shard_py_raise(rc, err.message);
        return -1;
    }
    return 0;
fail:
    specs_free(&sp);
    return -1;
}

static void Loader_dealloc(LoaderObject *self)
{
    if (self->pid && self->pid != getpid()) { /* inherited through fork: not ours to free */
        Py_TYPE(self)->tp_free((PyObject *)self);
        return;
    }
    ShardLoader *l = self->l;
    ShardRemote *rm = self->rm;
    self->l = NULL;
    self->rm = NULL;
    Py_BEGIN_ALLOW_THREADS shard_loader_free(&l);
    shard_remote_free(&rm);
    Py_END_ALLOW_THREADS Py_CLEAR(self->gpu); /* its pinned memory went with l */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

ShardLoader *shard_py_loader(PyObject *o)
{
    if (!PyObject_TypeCheck(o, &LoaderType)) {
        PyErr_Format(PyExc_TypeError, "loader: a libshard Loader, not %R", o);
        return NULL;
    }
    LoaderObject *lo = (LoaderObject *)o;
    if (!lo->l || lo->pid != getpid()) {
        PyErr_SetString(PyExc_ValueError, "loader: not open in this process");
        return NULL;
    }
    return lo->l;
}

static PyObject *Loader_next(LoaderObject *self)
{
    NEED_LOADER(self);
    const ShardBatch *b;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = shard_loader_next(self->l, &b);
    Py_END_ALLOW_THREADS if (rc == SHARD_EOS) return NULL;
    if (rc)
        return shard_py_raise(rc, shard_loader_error(self->l));
    BatchObject *o = PyObject_New(BatchObject, &BatchType);
    if (!o) {
        shard_batch_release(self->l, b);
        return NULL;
    }
    Py_INCREF(self);
    o->loader = self;
    o->b = b;
    return (PyObject *)o;
}

static PyObject *Loader_state(LoaderObject *self, PyObject *u)
{
    NEED_LOADER(self);
    (void)u;
    char buf[128];
    shard_loader_state(self->l, buf, sizeof buf);
    return PyUnicode_FromString(buf);
}

static PyObject *Loader_restore(LoaderObject *self, PyObject *arg)
{
    NEED_LOADER(self);
    const char *st = PyUnicode_AsUTF8(arg);
    if (!st)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = shard_loader_restore(self->l, st);
    Py_END_ALLOW_THREADS if (rc) return shard_py_raise(rc, shard_loader_error(self->l));
    Py_RETURN_NONE;
}

static PyObject *Loader_set_epoch(LoaderObject *self, PyObject *arg)
{
    NEED_LOADER(self);
    unsigned long long e = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = shard_loader_set_epoch(self->l, e);
    Py_END_ALLOW_THREADS if (rc) return shard_py_raise(rc, shard_loader_error(self->l));
    Py_RETURN_NONE;
}

static PyObject *Loader_epoch_batches(LoaderObject *self, void *c)
{
    NEED_LOADER(self);
    (void)c;
    int64_t n = shard_loader_epoch_batches(self->l);
    if (n < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(n);
}

static PyObject *Loader_seed(LoaderObject *self, void *c)
{
    NEED_LOADER(self);
    (void)c;
    return PyLong_FromUnsignedLongLong(shard_loader_seed(self->l));
}

static PyObject *Loader_skipped(LoaderObject *self, void *c)
{
    NEED_LOADER(self);
    (void)c;
    return PyLong_FromUnsignedLongLong(shard_loader_skipped(self->l));
}

static PyObject *Loader_skipped_by(LoaderObject *self, void *c)
{
    NEED_LOADER(self);
    (void)c;
    ShardReaderStats st;
    shard_loader_reader_stats(self->l, &st);
    unsigned long long samples = shard_loader_skipped(self->l);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "image",
                         (unsigned long long)shard_loader_skipped_by(self->l, SHARD_BAD_IMAGE),
                         "no_image",
                         (unsigned long long)shard_loader_skipped_by(self->l, SHARD_BAD_NO_IMAGE),
                         "label",
                         (unsigned long long)shard_loader_skipped_by(self->l, SHARD_BAD_LABEL),
                         "shards", (unsigned long long)st.skipped_shards, "shard_samples",
                         (unsigned long long)st.skipped_samples, "total",
                         samples + (unsigned long long)st.skipped_samples);
}

static PyObject *Loader_remote_stats(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    NEED_LOADER(self);
    return remote_stats_dict(self->rm);
}

PyObject *shard_py_stats_dict(const ShardLoaderStats *st)
{
    PyObject *stages = PyDict_New();
    for (int i = 0; stages && i < SHARD_STAGES; i++) {
        const ShardStageStats *g = &st->stages[i];
        if (!g->threads) /* not in this pipeline (an upload without a GPU) */
            continue;
        PyObject *d = Py_BuildValue(
            "{s:I,s:K,s:K,s:d,s:d,s:d,s:d,s:n,s:n}", "threads", g->threads, "items",
            (unsigned long long)g->items, "bytes", (unsigned long long)g->bytes, "seconds",
            g->seconds, "busy_seconds", g->busy_seconds, "wait_input_seconds",
            g->wait_input_seconds, "wait_output_seconds", g->wait_output_seconds, "queue_fill",
            (Py_ssize_t)g->queue_fill, "queue_capacity", (Py_ssize_t)g->queue_capacity);
        if (!d || PyDict_SetItemString(stages, g->name, d))
            Py_CLEAR(stages);
        Py_XDECREF(d);
    }
    if (!stages)
        return NULL;
    return Py_BuildValue("{s:d,s:N,s:s,s:s}", "wall_seconds", st->wall_seconds, "stages", stages,
                         "bottleneck", st->stages[st->bottleneck].name, "verdict", st->verdict);
}

static PyObject *Loader_stats(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    NEED_LOADER(self);
    ShardLoaderStats st;
    shard_loader_stats(self->l, &st);
    return shard_py_stats_dict(&st);
}

static PyObject *Loader_write_trace(LoaderObject *self, PyObject *arg)
{
    NEED_LOADER(self);
    PyObject *b;
    if (!PyUnicode_FSConverter(arg, &b))
        return NULL;
    ShardError err;
    int rc = shard_loader_trace_write(self->l, PyBytes_AS_STRING(b), &err);
    Py_DECREF(b);
    if (rc)
        return shard_py_raise(rc, err.message);
    Py_RETURN_NONE;
}

static PyMethodDef Loader_methods[] = {
    {"write_trace", (PyCFunction)Loader_write_trace, METH_O,
     "write_trace(path): the spans so far (a Loader made with trace=...), Chrome trace JSON"},
    {"stats", (PyCFunction)Loader_stats, METH_NOARGS,
     "Per-stage counters since the loader opened (fetch, shuffle, batch, decode, deliver: "
     "items, bytes, busy and waiting seconds, queue fill), the bottleneck and the verdict."},
    {"remote_stats", (PyCFunction)Loader_remote_stats, METH_NOARGS,
     "Counters of the remote reads: bytes, requests, retries, resumes, cache hits."},
    {"state", (PyCFunction)Loader_state, METH_NOARGS, "The state after the last batch."},
    {"restore", (PyCFunction)Loader_restore, METH_O, "Continue from a state."},
    {"set_epoch", (PyCFunction)Loader_set_epoch, METH_O, "Start an epoch."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Loader_getset[] = {
    {"epoch_batches", (getter)Loader_epoch_batches, NULL, "batches per epoch or None", NULL},
    {"seed", (getter)Loader_seed, NULL, "the seed in use", NULL},
    {"skipped", (getter)Loader_skipped, NULL, "samples left out after decode errors", NULL},
    {"skipped_by", (getter)Loader_skipped_by, NULL,
     "what skip mode left out: samples by reason (image, no_image, label), shards skipped "
     "after errors and the samples lost with them (shard_samples), and the samples' total",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Decoded batches from shards: iterate for Batch objects.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Loader_init,
    .tp_dealloc = (destructor)Loader_dealloc,
    .tp_iter = self_iter,
    .tp_iternext = (iternextfunc)Loader_next,
    .tp_methods = Loader_methods,
    .tp_getset = Loader_getset,
};

static void Batch_dealloc(BatchObject *self)
{
    if (self->loader && self->loader->l)
        shard_batch_release(self->loader->l, self->b);
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
    if (l->layout == SHARD_LAYOUT_NCHW) {
        self->shape[1] = 3, self->shape[2] = l->height, self->shape[3] = l->width;
    } else {
        self->shape[1] = l->height, self->shape[2] = l->width, self->shape[3] = 3;
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

static PyObject *Batch_labels(BatchObject *self, void *c)
{
    (void)c;
    return PyBytes_FromStringAndSize((const char *)self->b->labels,
                                     (Py_ssize_t)(self->b->size * sizeof(int64_t)));
}

static PyObject *Batch_indices(BatchObject *self, void *c)
{
    (void)c;
    return PyBytes_FromStringAndSize((const char *)self->b->indices,
                                     (Py_ssize_t)(self->b->size * sizeof(uint64_t)));
}

static PyObject *Batch_seeds(BatchObject *self, void *c)
{
    (void)c;
    return PyBytes_FromStringAndSize((const char *)self->b->seeds,
                                     (Py_ssize_t)(self->b->size * sizeof(uint64_t)));
}

static PyObject *Batch_repeats(BatchObject *self, void *c)
{
    (void)c;
    return PyBytes_FromStringAndSize((const char *)self->b->repeats, (Py_ssize_t)self->b->size);
}

PyObject *shard_py_batch_keys(const ShardBatch *b)
{
    PyObject *list = PyList_New((Py_ssize_t)b->size);
    for (size_t i = 0; list && i < b->size; i++) {
        PyObject *k = PyUnicode_DecodeUTF8(b->keys[i], (Py_ssize_t)strlen(b->keys[i]),
                                           "surrogateescape");
        if (!k) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, k);
    }
    return list;
}

PyObject *shard_py_batch_fields(const ShardBatch *b)
{
    PyObject *d = PyDict_New();
    for (size_t k = 0; d && k < b->nfields; k++) {
        const ShardBatchField *f = &b->fields[k];
        PyObject *list = PyList_New((Py_ssize_t)b->size);
        for (size_t i = 0; list && i < b->size; i++) {
            PyObject *v;
            if (f->present[i]) {
                v = PyBytes_FromStringAndSize((const char *)f->data + f->offsets[i],
                                              (Py_ssize_t)(f->offsets[i + 1] - f->offsets[i]));
            } else {
                v = Py_None;
                Py_INCREF(v);
            }
            if (!v)
                Py_CLEAR(list);
            else
                PyList_SET_ITEM(list, (Py_ssize_t)i, v);
        }
        if (!list || PyDict_SetItemString(d, f->name, list))
            Py_CLEAR(d);
        Py_XDECREF(list);
    }
    return d;
}

static PyObject *Batch_keys(BatchObject *self, void *c)
{
    (void)c;
    return shard_py_batch_keys(self->b);
}

/* {name: [bytes, or None where the sample has no such field]} */
static PyObject *Batch_fields(BatchObject *self, void *c)
{
    (void)c;
    return shard_py_batch_fields(self->b);
}

static PyObject *Batch_size(BatchObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(self->b->size);
}

static PyObject *Batch_index(BatchObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->b->index);
}

static PyGetSetDef Batch_getset[] = {
    {"labels", (getter)Batch_labels, NULL, "int64 labels as bytes (-1: none)", NULL},
    {"keys", (getter)Batch_keys, NULL, "sample keys", NULL},
    {"indices", (getter)Batch_indices, NULL,
     "each sample's index in the data set (uint64 bytes; 2**64-1 where counts are unknown)",
     NULL},
    {"seeds", (getter)Batch_seeds, NULL,
     "each sample's seed for its crop and flip (uint64 bytes), as decode(seed=) takes it",
     NULL},
    {"repeats", (getter)Batch_repeats, NULL,
     "1 byte per sample: 1 where it is padding (equal mode with pad)", NULL},
    {"fields", (getter)Batch_fields, NULL,
     "raw fields: {name: [bytes, or None where a sample lacks it]}", NULL},
    {"size", (getter)Batch_size, NULL, "samples in the batch", NULL},
    {"index", (getter)Batch_index, NULL, "batch number in the epoch", NULL},
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

/* ---- functions ------------------------------------------------------------------------- */

static PyObject *py_decode_rgb(PyObject *m, PyObject *arg)
{
    (void)m;
    Py_buffer in;
    if (PyObject_GetBuffer(arg, &in, PyBUF_SIMPLE))
        return NULL;
    unsigned char *out;
    int w, h, rc;
    char msg[256] = "";
    Py_BEGIN_ALLOW_THREADS rc = shard_decode_rgb(in.buf, (size_t)in.len, &out, &w, &h, msg, sizeof msg);
    Py_END_ALLOW_THREADS PyBuffer_Release(&in);
    if (rc)
        return shard_py_raise(rc, msg);
    PyObject *b = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)w * h * 3);
    free(out);
    if (!b)
        return NULL;
    return Py_BuildValue("(Nii)", b, w, h);
}

/* The transform decode and crop_box take from their keywords; -1 with an exception set. */
static int parse_transform(ShardTransform *t, int width, int height, const char *crop, int fast,
                           int flip, const char *layout, PyObject *scale, PyObject *ratio)
{
    shard_transform_default(t);
    if (width <= 0 || height <= 0) {
        PyErr_SetString(PyExc_ValueError, "width and height must be positive");
        return -1;
    }
    t->width = width;
    t->height = height;
    return transform_options(t, crop, fast, flip, layout, scale, ratio);
}

static PyObject *py_decode(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"data", "width", "height", "crop", "fast", "flip", "seed", "layout",
                             "scale", "ratio", NULL};
    Py_buffer in;
    int width = 224, height = 224, fast = 1, flip = 0;
    unsigned long long seed = 0;
    const char *crop = "random_resized", *layout = "nhwc";
    PyObject *scale = NULL, *ratio = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|iisppKsOO", kwlist, &in, &width, &height, &crop,
                                     &fast, &flip, &seed, &layout, &scale, &ratio))
        return NULL;
    ShardTransform t;
    if (parse_transform(&t, width, height, crop, fast, flip, layout, scale, ratio)) {
        PyBuffer_Release(&in);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)shard_transform_output_size(&t));
    if (!out) {
        PyBuffer_Release(&in);
        return NULL;
    }
    char msg[256] = "";
    int rc;
    char *dst = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS rc = shard_decode_transform(in.buf, (size_t)in.len, &t, seed, dst, msg, sizeof msg);
    Py_END_ALLOW_THREADS PyBuffer_Release(&in);
    if (rc) {
        Py_DECREF(out);
        return shard_py_raise(rc, msg);
    }
    return out;
}

static PyObject *py_crop_box(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"image_width", "image_height", "width", "height", "crop", "flip",
                             "seed", "scale", "ratio", NULL};
    int iw, ih, width = 224, height = 224, flip = 0;
    unsigned long long seed = 0;
    const char *crop = "random_resized";
    PyObject *scale = NULL, *ratio = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ii|iispKOO", kwlist, &iw, &ih, &width, &height,
                                     &crop, &flip, &seed, &scale, &ratio))
        return NULL;
    ShardTransform t;
    if (parse_transform(&t, width, height, crop, 1, flip, "nhwc", scale, ratio))
        return NULL;
    double box[4];
    int flipped;
    int rc = shard_transform_box(&t, iw, ih, seed, box, &flipped);
    if (rc)
        return shard_py_raise(rc, "crop_box: the image size must be positive");
    return Py_BuildValue("(dddd)O", box[0], box[1], box[2], box[3], flipped ? Py_True : Py_False);
}

static PyObject *py_resize_rgb(PyObject *m, PyObject *args)
{
    (void)m;
    Py_buffer in;
    int w, h, ow, oh;
    double x0, y0, bw, bh;
    if (!PyArg_ParseTuple(args, "y*ii(dddd)ii", &in, &w, &h, &x0, &y0, &bw, &bh, &ow, &oh))
        return NULL;
    if (in.len != (Py_ssize_t)w * h * 3) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "data is not w * h * 3 bytes");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)ow * oh * 3);
    if (!out) {
        PyBuffer_Release(&in);
        return NULL;
    }
    int rc = shard_resize_rgb(in.buf, w, h, x0, y0, bw, bh, (unsigned char *)PyBytes_AS_STRING(out), ow, oh);
    PyBuffer_Release(&in);
    if (rc) {
        Py_DECREF(out);
        return shard_py_raise(rc, "resize: bad box or sizes");
    }
    return out;
}

static PyObject *py_cpus_available(PyObject *m, PyObject *unused)
{
    (void)m, (void)unused;
    return PyLong_FromLong(shard_cpus_available());
}

static PyMethodDef module_methods[] = {
    {"cpus_available", py_cpus_available, METH_NOARGS,
     "cpus_available() -> int: the CPUs this process may use (affinity, cgroup quota): what "
     "threads=0 starts"},
    {"decode_rgb", py_decode_rgb, METH_O, "decode_rgb(data) -> (bytes, width, height): full RGB decode"},
    {"decode", (PyCFunction)(void (*)(void))py_decode, METH_VARARGS | METH_KEYWORDS,
     "decode(data, width=224, height=224, crop='random_resized', fast=True, flip=False, seed=0, "
     "layout='nhwc') -> bytes"},
    {"list_shards", (PyCFunction)(void (*)(void))py_list_shards, METH_VARARGS | METH_KEYWORDS,
     "list_shards(specs, *, remote options) -> [(url, samples or None)]: manifests, brace "
     "patterns and prefixes expanded, counts from manifests or indexes"},
    {"crop_box", (PyCFunction)(void (*)(void))py_crop_box, METH_VARARGS | METH_KEYWORDS,
     "crop_box(image_width, image_height, width=224, height=224, crop='random_resized', "
     "flip=False, seed=0, scale=None, ratio=None) -> ((x, y, w, h), flipped): the box and "
     "mirroring decode draws for an image of that size with that seed"},
    {"resize_rgb", py_resize_rgb, METH_VARARGS,
     "resize_rgb(data, w, h, (x0, y0, bw, bh), out_w, out_h) -> bytes (PIL BILINEAR)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_libshard", "libshard's C core.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__libshard(void);
PyMODINIT_FUNC PyInit__libshard(void)
{
    if (PyType_Ready(&ReaderType) < 0 || PyType_Ready(&LoaderType) < 0 || PyType_Ready(&BatchType) < 0 ||
        PyType_Ready(&ShardFilesType) < 0 || PyType_Ready(&ShardPyWriterType) < 0 ||
        PyType_Ready(&ShardPyPackPlanType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    ShardErrorType = PyErr_NewException("libshard.ShardError", PyExc_RuntimeError, NULL);
    Py_INCREF(ShardErrorType);
    PyModule_AddObject(m, "ShardError", ShardErrorType);
    Py_INCREF(&ReaderType);
    PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType);
    Py_INCREF(&ShardFilesType);
    PyModule_AddObject(m, "ShardFiles", (PyObject *)&ShardFilesType);
    Py_INCREF(&LoaderType);
    PyModule_AddObject(m, "Loader", (PyObject *)&LoaderType);
    Py_INCREF(&BatchType);
    PyModule_AddObject(m, "Batch", (PyObject *)&BatchType);
    Py_INCREF(&ShardPyWriterType);
    PyModule_AddObject(m, "Writer", (PyObject *)&ShardPyWriterType);
    Py_INCREF(&ShardPyPackPlanType);
    PyModule_AddObject(m, "PackPlan", (PyObject *)&ShardPyPackPlanType);
    PyModule_AddStringConstant(m, "version", shard_version());
    if (shard_py_gpu_ready(m)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
