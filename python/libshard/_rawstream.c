/*
 * libshard._libshard, RawStream: the raw bytes of a local path, file://, pipe:, http(s)://,
 * gs:// or s3:// URL, in order (shard/stream.h), through a remote made with the remote
 * table's settings. readinto is what io.RawIOBase wants; the GIL is let go while it waits.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <unistd.h>

#include "_common.h"
#include "_rawstream.h"
#include "_settings.h"
#include "_tarmembers.h"

typedef struct {
    PyObject_HEAD
    ShardStream *s;
    ShardRemote *rm;
    PyObject *url;
    pid_t pid; /* the process whose network thread rm runs */
} RawStreamObject;

static const char *const raw_params[] = {"url", NULL};
static const ShardPySignature raw_signature = {"RawStream", raw_params, 1, 1, 0};

typedef struct {
    const char *url;
    ShardRemote *rm;
    ShardStream *s;
    ShardError err;
} RawOpen;

static int raw_open(void *arg)
{
    RawOpen *o = arg;
    return shard_stream_open(&o->s, o->url, o->rm, &o->err);
}

static void raw_close(RawStreamObject *self)
{
    if (self->pid && self->pid != getpid()) { /* inherited through fork: not ours to free */
        self->s = NULL;
        self->rm = NULL;
        return;
    }
    ShardStream *s = self->s;
    ShardRemote *rm = self->rm;
    self->s = NULL;
    self->rm = NULL;
    Py_BEGIN_ALLOW_THREADS /* a pipe's command is waited for */
    shard_stream_free(&s);
    shard_remote_free(&rm);
    Py_END_ALLOW_THREADS
}

static int RawStream_init(RawStreamObject *self, PyObject *args, PyObject *kw)
{
    raw_close(self);
    Py_CLEAR(self->url);
    ShardRemoteSettings rs;
    shard_remote_default_settings(&rs);
    ShardPyTarget target = {&shard_py_remote_table, &rs};
    PyObject *values[1] = {NULL}, *keep = NULL, *path = NULL;
    int rc = shard_py_parse(&raw_signature, args, kw, &target, 1, values, &keep);
    if (!rc && !(path = PyOS_FSPath(values[0])))
        rc = -1;
    if (!rc && !PyUnicode_Check(path)) {
        PyErr_SetString(PyExc_TypeError, "RawStream: url is a str or a path");
        rc = -1;
    }
    const char *url = rc ? NULL : PyUnicode_AsUTF8(path);
    if (!rc && !url)
        rc = -1;
    if (!rc && shard_py_remote_new(&rs, &self->rm))
        rc = -1;
    if (!rc) {
        RawOpen o = {url, self->rm, NULL, {0}};
        int orc = 0;
        self->pid = getpid();
        if (shard_py_blocking(raw_open, &o, self->rm, &orc)) {
            shard_stream_free(&o.s);
            rc = -1;
        } else if (orc) {
            shard_py_raise(orc, o.err.message);
            rc = -1;
        } else {
            self->s = o.s;
            self->url = Py_NewRef(path);
        }
    }
    Py_XDECREF(path);
    Py_XDECREF(keep);
    if (rc)
        raw_close(self);
    return rc;
}

static int raw_live(RawStreamObject *self)
{
    if (self->pid && self->pid != getpid()) {
        PyErr_SetString(PyExc_ValueError, "RawStream: opened in another process (a stream "
                                          "does not cross a fork: open it in this one)");
        return -1;
    }
    if (!self->s) {
        PyErr_SetString(PyExc_ValueError, "RawStream: I/O on a closed stream");
        return -1;
    }
    return 0;
}

static PyObject *RawStream_readinto(RawStreamObject *self, PyObject *arg)
{
    if (raw_live(self))
        return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS))
        return NULL;
    int64_t n;
    Py_BEGIN_ALLOW_THREADS
    n = shard_stream_read(self->s, b.buf, (size_t)b.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (n < 0)
        return shard_py_raise((int)n, shard_stream_error(self->s));
    return PyLong_FromLongLong((long long)n);
}

static PyObject *RawStream_read(RawStreamObject *self, PyObject *args)
{
    Py_ssize_t n = -1;
    if (!PyArg_ParseTuple(args, "|n:read", &n) || raw_live(self))
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n >= 0 ? n : 1 << 16);
    Py_ssize_t got = 0;
    while (out) {
        Py_ssize_t room = PyBytes_GET_SIZE(out) - got;
        if (!room) {
            if (n >= 0)
                break;
            if (_PyBytes_Resize(&out, PyBytes_GET_SIZE(out) * 2))
                return NULL;
            continue;
        }
        int64_t k;
        char *at = PyBytes_AS_STRING(out) + got;
        Py_BEGIN_ALLOW_THREADS
        k = shard_stream_read(self->s, at, (size_t)room);
        Py_END_ALLOW_THREADS
        if (k < 0) {
            Py_DECREF(out);
            return shard_py_raise((int)k, shard_stream_error(self->s));
        }
        if (k == 0 || (n >= 0 && got + k >= n)) {
            got += (Py_ssize_t)k;
            break;
        }
        got += (Py_ssize_t)k;
        if (PyErr_CheckSignals()) {
            Py_DECREF(out);
            return NULL;
        }
    }
    if (out && _PyBytes_Resize(&out, got))
        return NULL;
    return out;
}

static PyObject *RawStream_close(RawStreamObject *self, PyObject *unused)
{
    (void)unused;
    raw_close(self);
    Py_RETURN_NONE;
}

static PyObject *RawStream_get_size(RawStreamObject *self, void *c)
{
    (void)c;
    if (raw_live(self))
        return NULL;
    int64_t n = shard_stream_size(self->s);
    return n < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong((long long)n);
}

static PyObject *RawStream_tell(RawStreamObject *self, PyObject *unused)
{
    (void)unused;
    if (raw_live(self))
        return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)shard_stream_tell(self->s));
}

static PyObject *RawStream_members(RawStreamObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"max_member_size", "max_sample_size", NULL};
    unsigned long long member = 0, sample = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$KK:members", names, &member, &sample) ||
        raw_live(self))
        return NULL;
    if (!member || !sample || member > (1ull << 62) || sample > (1ull << 62)) {
        PyErr_SetString(PyExc_ValueError, "members(): max_member_size and max_sample_size are "
                                          "from 1 to 2**62 bytes");
        return NULL;
    }
    ShardStream *s = self->s;
    ShardRemote *rm = self->rm;
    self->s = NULL; /* the stream is the members' now: this one is closed */
    self->rm = NULL;
    return shard_py_tarmembers_new(&s, &rm, self->url, member, sample);
}

static PyObject *RawStream_get_closed(RawStreamObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->s == NULL);
}

static PyObject *RawStream_get_url(RawStreamObject *self, void *c)
{
    (void)c;
    return Py_NewRef(self->url ? self->url : Py_None);
}

static PyObject *RawStream_remote_stats(RawStreamObject *self, PyObject *unused)
{
    (void)unused;
    if (raw_live(self))
        return NULL;
    return shard_py_remote_stats(self->rm);
}

static void RawStream_dealloc(RawStreamObject *self)
{
    raw_close(self);
    Py_XDECREF(self->url);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef RawStream_methods[] = {
    {"readinto", (PyCFunction)RawStream_readinto, METH_O,
     "readinto(buffer) -> n: the next bytes into buffer; 0 at the end"},
    {"read", (PyCFunction)RawStream_read, METH_VARARGS,
     "read(n=-1) -> bytes: the next n bytes (fewer at the end), or all the rest"},
    {"tell", (PyCFunction)RawStream_tell, METH_NOARGS, "Bytes read so far."},
    {"members", (PyCFunction)(void (*)(void))RawStream_members, METH_VARARGS | METH_KEYWORDS,
     "members(*, max_member_size, max_sample_size) -> TarMembers: the stream, nothing read "
     "from it yet, read as a tar: its regular files as (name, bytes) in order, a member "
     "declaring more than max_member_size bytes, or consecutive members of one key "
     "(WebDataset's grouping) more than max_sample_size, refused before they are read; the "
     "stream is closed, its source theirs"},
    {"close", (PyCFunction)RawStream_close, METH_NOARGS,
     "Closes the stream (a pipe's command is waited for)."},
    {"remote_stats", (PyCFunction)RawStream_remote_stats, METH_NOARGS,
     "Counters of the remote reads: bytes, requests, retries, resumes, cache hits."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef RawStream_getset[] = {
    {"size", (getter)RawStream_get_size, NULL, "The object's size in bytes; None when not known "
                                                "(a pipe).", NULL},
    {"closed", (getter)RawStream_get_closed, NULL, "Whether close() was called.", NULL},
    {"url", (getter)RawStream_get_url, NULL, "The URL, as given.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RawStreamType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.RawStream",
    .tp_basicsize = sizeof(RawStreamObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RawStream(url, *, remote settings): the raw bytes of a path, file://, pipe:, "
              "http(s)://, gs:// or s3:// URL, in order, read through libshard's sources (the "
              "remote's retries, resumes, credentials and cache).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)RawStream_init,
    .tp_dealloc = (destructor)RawStream_dealloc,
    .tp_methods = RawStream_methods,
    .tp_getset = RawStream_getset,
};

int shard_py_rawstream_ready(PyObject *m)
{
    PyTypeObject *types[] = {&RawStreamType};
    return shard_py_add_types(m, types, 1);
}
