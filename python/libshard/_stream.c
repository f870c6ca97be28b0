/*
 * libshard._libshard, what Reader and Loader share (_stream.h): the methods written once
 * for both, their life in one process, and their reader settings.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>
#include <unistd.h>

#include "_stream.h"

int shard_py_stream_live(ShardPyStream *s)
{
    const char *what = s->ops ? s->ops->what : "the object";
    if (!s->h) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s is not open (its __init__ failed or was not called)", what);
        shard_py_raise(SHARD_ERR_STATE, msg);
        return -1;
    }
    if (s->pid != getpid()) {
        char msg[160];
        snprintf(msg, sizeof msg, "this %s was made in another process (before a fork): make a "
                                  "new one in this process", what);
        shard_py_raise(SHARD_ERR_STATE, msg);
        return -1;
    }
    return 0;
}

PyObject *shard_py_stream_new(PyTypeObject *type, const ShardPyStreamOps *ops)
{
    ShardPyStream *s = (ShardPyStream *)type->tp_alloc(type, 0);
    if (s)
        s->ops = ops;
    return (PyObject *)s;
}

int shard_py_stream_clear(ShardPyStream *s)
{
    if (s->pid && s->pid != getpid()) /* inherited through fork: not ours to free */
        return 0;
    void *h = s->h;
    ShardRemote *rm = s->rm;
    const ShardPyStreamOps *ops = s->ops;
    s->h = NULL;
    s->rm = NULL;
    Py_BEGIN_ALLOW_THREADS
    ops->free(&h);
    shard_remote_free(&rm);
    Py_END_ALLOW_THREADS
    return 1;
}

void shard_py_stream_dealloc(ShardPyStream *s)
{
    shard_py_stream_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* ---- the shared methods ----------------------------------------------------------------- */

static PyObject *stream_state(ShardPyStream *s, PyObject *unused)
{
    (void)unused;
    if (shard_py_stream_live(s))
        return NULL;
    char *buf = PyMem_Malloc(SHARD_READER_STATE_MAX);
    if (!buf)
        return PyErr_NoMemory();
    int rc = s->ops->state(s->h, buf, SHARD_READER_STATE_MAX);
    PyObject *out = rc ? shard_py_raise(rc, "the state does not fit in SHARD_READER_STATE_MAX bytes")
                       : PyUnicode_FromString(buf);
    PyMem_Free(buf);
    return out;
}

static PyObject *stream_restore(ShardPyStream *s, PyObject *arg)
{
    if (shard_py_stream_live(s))
        return NULL;
    const char *st = PyUnicode_AsUTF8(arg);
    if (!st)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = s->ops->restore(s->h, st);
    Py_END_ALLOW_THREADS
    if (rc)
        return shard_py_raise(rc, s->ops->error(s->h));
    Py_RETURN_NONE;
}

static PyObject *stream_set_epoch(ShardPyStream *s, PyObject *arg)
{
    if (shard_py_stream_live(s))
        return NULL;
    unsigned long long e = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = s->ops->set_epoch(s->h, e);
    Py_END_ALLOW_THREADS
    if (rc)
        return shard_py_raise(rc, s->ops->error(s->h));
    Py_RETURN_NONE;
}

static PyObject *stream_remote_stats(ShardPyStream *s, PyObject *unused)
{
    (void)unused;
    return shard_py_stream_live(s) ? NULL : shard_py_remote_stats(s->rm);
}

static PyObject *stream_seed(ShardPyStream *s, void *closure)
{
    (void)closure;
    return shard_py_stream_live(s) ? NULL : PyLong_FromUnsignedLongLong(s->ops->seed(s->h));
}

static PyMethodDef stream_methods[] = {
    {"state", (PyCFunction)stream_state, METH_NOARGS,
     "The state after the last sample or batch handed out, to resume from."},
    {"restore", (PyCFunction)stream_restore, METH_O, "Continue from a state."},
    {"set_epoch", (PyCFunction)stream_set_epoch, METH_O, "Start an epoch."},
    {"remote_stats", (PyCFunction)stream_remote_stats, METH_NOARGS,
     "Counters of the remote reads: bytes, requests, retries, resumes, cache hits."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    {"seed", (getter)stream_seed, NULL, "the seed in use", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

int shard_py_stream_ready(PyTypeObject *type)
{
    for (PyMethodDef *m = stream_methods; m->ml_name; m++) {
        PyObject *d = PyDescr_NewMethod(type, m);
        int rc = d ? PyDict_SetItemString(type->tp_dict, m->ml_name, d) : -1;
        Py_XDECREF(d);
        if (rc)
            return -1;
    }
    for (PyGetSetDef *g = stream_getset; g->name; g++) {
        PyObject *d = PyDescr_NewGetSet(type, g);
        int rc = d ? PyDict_SetItemString(type->tp_dict, g->name, d) : -1;
        Py_XDECREF(d);
        if (rc)
            return -1;
    }
    PyType_Modified(type);
    return 0;
}

/* ---- the reader settings ---------------------------------------------------------------- */

int shard_py_stream_settings(const ShardPySignature *sig, PyObject *args, PyObject *kw,
                             ShardReaderSettings *s, const ShardPyTarget *more, size_t nmore,
                             PyObject **values, ShardPySpecs *sp, ShardRemote **rm,
                             PyObject **keep)
{
    ShardRemoteSettings rs;
    shard_remote_default_settings(&rs);
    ShardPyTarget targets[8] = {{&shard_py_reader_table, s}, {&shard_py_remote_table, &rs}};
    size_t n = 2;
    if (nmore > sizeof targets / sizeof *targets - n) {
        PyErr_Format(PyExc_SystemError, "%s: %zu settings tables, more than %zu", sig->name, nmore + n,
                     sizeof targets / sizeof *targets);
        return -1;
    }
    for (size_t i = 0; i < nmore; i++)
        targets[n++] = more[i];
    memset(sp, 0, sizeof *sp);
    if (shard_py_parse(sig, args, kw, targets, n, values, keep) ||
        shard_py_specs_parse(values[0], sp) || shard_py_remote_new(&rs, rm))
        return -1;
    s->remote = *rm;
    if (sp->nsources) {
        s->sources = sp->sources;
        s->nsources = sp->nsources;
    } else {
        s->urls = sp->urls;
        s->nurls = sp->n;
    }
    return 0;
}
