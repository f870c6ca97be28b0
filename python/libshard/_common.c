/*
 * libshard._libshard, the lowest layer: ShardError, and the conversions of library values
 * to Python values that several types share (_common.h).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "_common.h"

/* The exception type, made once when the module is first imported (the module is
 * single-phase: its types are static, and so is this). */
static PyObject *ShardErrorType, *NotFoundType;

int shard_py_common_ready(PyObject *m)
{
    if (!ShardErrorType &&
        !(ShardErrorType = PyErr_NewException("libshard.ShardError", PyExc_RuntimeError, NULL)))
        return -1;
    if (!NotFoundType) { /* a missing shard or manifest: caught as either */
        PyObject *bases = PyTuple_Pack(2, ShardErrorType, PyExc_FileNotFoundError);
        NotFoundType = bases ? PyErr_NewException("libshard.ShardNotFoundError", bases, NULL)
                             : NULL;
        Py_XDECREF(bases);
        if (!NotFoundType)
            return -1;
    }
    Py_INCREF(ShardErrorType);
    if (PyModule_AddObject(m, "ShardError", ShardErrorType)) {
        Py_DECREF(ShardErrorType);
        return -1;
    }
    Py_INCREF(NotFoundType);
    if (PyModule_AddObject(m, "ShardNotFoundError", NotFoundType)) {
        Py_DECREF(NotFoundType);
        return -1;
    }
    return 0;
}

/* Sets e.name to a str, an int (digits) or None. */
static void set_field(PyObject *e, const char *name, const char *s, size_t n, int number)
{
    PyObject *v = !s ? (Py_INCREF(Py_None), Py_None)
                  : number ? PyLong_FromUnsignedLongLong(strtoull(s, NULL, 10))
                           : PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "surrogateescape");
    if (!v || PyObject_SetAttrString(e, name, v))
        PyErr_Clear();
    Py_XDECREF(v);
}

/* The library's messages say where as "URL: offset N: member 'M': what": those parts as
 * attributes (url, offset, member; None where the message has none) and the code. */
static void set_where(PyObject *e, int code, const char *msg)
{
    const char *colon = strstr(msg, ": ");
    size_t n = colon ? (size_t)(colon - msg) : 0;
    /* a path or URL has a '/' or a '.'; "reader: ..." names a component instead */
    int url = n && !memchr(msg, ' ', n) && (memchr(msg, '/', n) || memchr(msg, '.', n));
    set_field(e, "url", url ? msg : NULL, n, 0);
    const char *off = strstr(msg, "offset ");
    set_field(e, "offset", off && off[7] >= '0' && off[7] <= '9' ? off + 7 : NULL, 0, 1);
    const char *mem = strstr(msg, "member '");
    const char *end = mem ? strchr(mem + 8, '\'') : NULL;
    set_field(e, "member", end ? mem + 8 : NULL, end ? (size_t)(end - mem - 8) : 0, 0);
    PyObject *c = PyLong_FromLong(code);
    if (!c || PyObject_SetAttrString(e, "code", c))
        PyErr_Clear();
    Py_XDECREF(c);
}

/* A library message with the settings it names as Python's keywords name them ("set
 * shuffle_buffer=N" becomes "set shuffle=N"), into buf; a setting inside a state's text
 * (after ',' or ':') stays as it is. */
static const char *python_names(const char *msg, char *buf, size_t size)
{
    static const char *const names[][2] = {{"shuffle_buffer=", "shuffle="}};
    size_t n = 0;
    for (const char *p = msg; *p && n + 1 < size;) {
        size_t k = 0;
        while (k < sizeof names / sizeof *names &&
               (strncmp(p, names[k][0], strlen(names[k][0])) || (p > msg && p[-1] != ' ')))
            k++;
        if (k < sizeof names / sizeof *names) {
            n += (size_t)snprintf(buf + n, size - n, "%s", names[k][1]);
            p += strlen(names[k][0]);
        } else {
            buf[n++] = *p++;
        }
        if (n >= size)
            n = size - 1;
    }
    buf[n] = 0;
    return buf;
}

PyObject *shard_py_raise(int code, const char *msg)
{
    if (PyErr_Occurred()) /* a KeyboardInterrupt that ended the call goes first */
        return NULL;
    char named[SHARD_ERROR_MAX + 256];
    if (msg && *msg)
        msg = python_names(msg, named, sizeof named);
    PyObject *type = code == SHARD_ERR_INVALID ? PyExc_ValueError
                     : code == SHARD_ERR_NOT_FOUND ? NotFoundType
                     : code == SHARD_ERR_NOMEM    ? PyExc_MemoryError
                                                  : ShardErrorType;
    const char *text = msg && *msg ? msg : shard_strerror(code);
    if (type != ShardErrorType && type != NotFoundType) {
        PyErr_SetString(type, text);
        return NULL;
    }
    PyObject *e = PyObject_CallFunction(type, "s", text);
    if (e) {
        set_where(e, code, text);
        PyErr_SetObject(type, e);
        Py_DECREF(e);
    }
    return NULL;
}

int shard_py_add_types(PyObject *m, PyTypeObject *const *types, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
        const char *name = strrchr(types[i]->tp_name, '.');
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, name ? name + 1 : types[i]->tp_name, (PyObject *)types[i])) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return 0;
}

PyObject *shard_py_self_iter(PyObject *self)
{
    Py_INCREF(self);
    return self;
}

static PyObject *decode_name(const char *s)
{
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "surrogateescape");
}

PyObject *shard_py_sample_dict(const ShardSampleView *v)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    PyObject *k = decode_name(v->key);
    PyObject *u = decode_name(v->url);
    if (!k || !u || PyDict_SetItemString(d, "__key__", k) || PyDict_SetItemString(d, "__url__", u)) {
        Py_XDECREF(k);
        Py_XDECREF(u);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(k);
    Py_DECREF(u);
    for (size_t i = 0; i < v->nfields; i++) {
        const ShardFieldView *f = &v->fields[i];
        PyObject *b = PyBytes_FromStringAndSize((const char *)f->data, (Py_ssize_t)f->size);
        if (!b || PyDict_SetItemString(d, f->name, b)) {
            Py_XDECREF(b);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(b);
    }
    return d;
}

PyObject *shard_py_names(const char *const *names, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *k = decode_name(names[i]);
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
        if (d && i == SHARD_STAGE_LIST) { /* the indexes made at open for shards without one */
            PyObject *b = PyLong_FromUnsignedLongLong(st->indexes_built);
            PyObject *c = PyLong_FromUnsignedLongLong(st->indexes_cached);
            if (!b || !c || PyDict_SetItemString(d, "indexes_built", b) ||
                PyDict_SetItemString(d, "indexes_cached", c))
                Py_CLEAR(d);
            Py_XDECREF(b);
            Py_XDECREF(c);
        }
        if (d && i == SHARD_STAGE_DECODE) { /* decodes that waited for decode_memory */
            PyObject *w = PyLong_FromUnsignedLongLong(st->decode_memory_waits);
            if (!w || PyDict_SetItemString(d, "memory_waits", w))
                Py_CLEAR(d);
            Py_XDECREF(w);
        }
        if (!d || PyDict_SetItemString(stages, g->name, d))
            Py_CLEAR(stages);
        Py_XDECREF(d);
    }
    if (!stages)
        return NULL;
    return Py_BuildValue("{s:d,s:N,s:s,s:s}", "wall_seconds", st->wall_seconds, "stages", stages,
                         "bottleneck", st->stages[st->bottleneck].name, "verdict", st->verdict);
}

PyObject *shard_py_remote_stats(ShardRemote *rm)
{
    ShardRemoteStats st;
    shard_remote_stats(rm, &st);
    return Py_BuildValue("{sKsKsKsKsKsKsdsKsKsKsKsK}", "bytes", (unsigned long long)st.bytes,
                         "requests", (unsigned long long)st.requests, "retries",
                         (unsigned long long)st.retries, "resumes", (unsigned long long)st.resumes,
                         "range_ignored", (unsigned long long)st.range_ignored, "replaced",
                         (unsigned long long)st.replaced, "wait_seconds", st.wait_seconds,
                         "cache_hits", (unsigned long long)st.cache_hits, "cache_misses",
                         (unsigned long long)st.cache_misses, "cache_bytes",
                         (unsigned long long)st.cache_bytes, "resolves",
                         (unsigned long long)st.resolves, "direct", (unsigned long long)st.direct);
}

typedef struct {
    int (*fn)(void *arg);
    void *arg;
    int rc;
} Blocking;

static void *blocking_main(void *p)
{
    Blocking *b = p;
    b->rc = b->fn(b->arg);
    return NULL;
}

int shard_py_blocking(int (*fn)(void *arg), void *arg, ShardRemote *rm, int *rc)
{
    Blocking b = {fn, arg, 0};
    pthread_t t;
    int started, interrupted = 0;
    Py_BEGIN_ALLOW_THREADS
    started = pthread_create(&t, NULL, blocking_main, &b) == 0;
    if (!started) /* no thread to spare: run it here, uninterruptible */
        b.rc = fn(arg);
    Py_END_ALLOW_THREADS
    while (started) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)(SHARD_PY_WAIT_SLICE * 1e9);
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        int joined;
        Py_BEGIN_ALLOW_THREADS
        joined = pthread_timedjoin_np(t, NULL, &until) == 0;
        Py_END_ALLOW_THREADS
        if (joined)
            break;
        if (!interrupted && PyErr_CheckSignals()) {
            interrupted = 1; /* the exception stays set while fn winds down */
            if (rm)
                shard_remote_abort(rm);
        }
    }
    *rc = b.rc;
    return interrupted ? -1 : 0;
}

/* ShardRemoteSettings.on_retry: the line on the "libshard" logger at WARNING, from the
 * thread that retries (a fetch thread, the network thread, the caller's). */
static void log_retry(void *cookie, const char *line)
{
    (void)cookie;
#if PY_VERSION_HEX >= 0x030D0000
    if (!Py_IsInitialized() || Py_IsFinalizing())
#else
    if (!Py_IsInitialized() || _Py_IsFinalizing())
#endif
        return; /* the interpreter is going away: nothing to log to */
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = NULL, *logging = PyImport_ImportModule("logging");
    PyObject *logger = logging ? PyObject_CallMethod(logging, "getLogger", "s", "libshard") : NULL;
    if (logger)
        r = PyObject_CallMethod(logger, "warning", "ss", "%s", line);
    if (!r)
        PyErr_WriteUnraisable(NULL);
    Py_XDECREF(r);
    Py_XDECREF(logger);
    Py_XDECREF(logging);
    PyGILState_Release(g);
}

int shard_py_remote_new(const ShardRemoteSettings *rs, ShardRemote **out)
{
    ShardError err;
    ShardRemoteSettings with_log = *rs;
    with_log.on_retry = log_retry;
    with_log.on_retry_cookie = NULL;
    int rc = shard_remote_new(out, &with_log, &err);
    if (rc) {
        shard_py_raise(rc, err.message);
        return -1;
    }
    return 0;
}

/* ---- shard specs ------------------------------------------------------------------------ */

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

void shard_py_specs_free(ShardPySpecs *sp)
{
    PyMem_Free(sp->urls);
    PyMem_Free(sp->sources);
    Py_CLEAR(sp->keep);
    memset(sp, 0, sizeof *sp);
}

/* The items of seq into sp->keep: specs, or with a tuple among them (spec, weight) pairs
 * into sp->sources. */
static int specs_items(PyObject *seq, ShardPySpecs *sp)
{
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    int mix = 0;
    for (Py_ssize_t i = 0; i < len; i++)
        mix |= PyTuple_Check(PySequence_Fast_GET_ITEM(seq, i));
    if (mix && !(sp->sources = PyMem_Calloc((size_t)len, sizeof *sp->sources))) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (!mix) {
            if (add_specs(sp->keep, it, 0) < 0)
                return -1;
            continue;
        }
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
            PyErr_Format(PyExc_TypeError, "a mix is a list of (spec, weight) pairs; item %zd "
                                          "is %R", i, it);
            return -1;
        }
        Py_ssize_t k = add_specs(sp->keep, PyTuple_GET_ITEM(it, 0), 1);
        if (k < 0)
            return -1;
        double w = PyFloat_AsDouble(PyTuple_GET_ITEM(it, 1));
        if (w == -1 && PyErr_Occurred())
            return -1;
        sp->sources[i] = (ShardMixInput){NULL, (size_t)k, w};
    }
    sp->nsources = mix ? (size_t)len : 0;
    return 0;
}

int shard_py_specs_parse(PyObject *o, ShardPySpecs *sp)
{
    memset(sp, 0, sizeof *sp);
    if (!(sp->keep = PyList_New(0)))
        return -1;
    if (is_path(o)) {
        if (add_specs(sp->keep, o, 0) < 0)
            goto fail;
    } else {
        PyObject *seq = PySequence_Fast(o, "shard specs: a str, a path, a list of them, or a "
                                           "list of (spec, weight) pairs");
        int rc = seq ? specs_items(seq, sp) : -1;
        Py_XDECREF(seq);
        if (rc)
            goto fail;
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
    return 0;
fail:
    shard_py_specs_free(sp);
    return -1;
}

void shard_py_trim(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
