/*
 * libshard._libshard, TarMembers: the regular files of a tar read by libshard's reader
 * (shard/file.h with members set), each as (name, bytes), in tar order: what WebDataset's
 * tar_file_iterator takes from Python's tarfile. Made by RawStream.members(), which hands
 * its stream over, so a URL opened once is read once. The GIL is let go while it reads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <unistd.h>

#include "_common.h"
#include "_tarmembers.h"

typedef struct {
    PyObject_HEAD
    ShardFile *f;
    ShardRemote *rm; /* what f's source reads through: freed after f */
    PyObject *url;
    pid_t pid;
    unsigned long long members, bytes;
} TarMembersObject;

static void members_close(TarMembersObject *self)
{
    if (self->pid != getpid()) { /* inherited through fork: not ours to free */
        self->f = NULL;
        self->rm = NULL;
        return;
    }
    ShardFile *f = self->f;
    ShardRemote *rm = self->rm;
    self->f = NULL;
    self->rm = NULL;
    Py_BEGIN_ALLOW_THREADS
    shard_file_free(&f);
    shard_remote_free(&rm);
    Py_END_ALLOW_THREADS
}

static PyObject *TarMembers_next(TarMembersObject *self)
{
    if (!self->f || self->pid != getpid())
        return NULL; /* closed: the end */
    const ShardSampleView *v;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_file_next(self->f, &v);
    Py_END_ALLOW_THREADS
    if (rc == SHARD_EOS)
        return NULL;
    if (rc)
        return shard_py_raise(rc, shard_file_error(self->f));
    const ShardFieldView *m = &v->fields[0];
    if (m->size > (uint64_t)PY_SSIZE_T_MAX)
        return shard_py_raise(SHARD_ERR_NOMEM, "a member larger than Python's bytes hold");
    PyObject *name = PyUnicode_DecodeFSDefault(m->member); /* as tarfile: surrogateescape */
    PyObject *data = name ? PyBytes_FromStringAndSize((const char *)m->data,
                                                      (Py_ssize_t)m->size) : NULL;
    if (!data) {
        Py_XDECREF(name);
        return NULL;
    }
    self->members++;
    self->bytes += m->size;
    PyObject *out = PyTuple_Pack(2, name, data);
    Py_DECREF(name);
    Py_DECREF(data);
    return out;
}

static PyObject *TarMembers_close(TarMembersObject *self, PyObject *unused)
{
    (void)unused;
    members_close(self);
    Py_RETURN_NONE;
}

static PyObject *TarMembers_get_members(TarMembersObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->members);
}

static PyObject *TarMembers_get_bytes(TarMembersObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->bytes);
}

static PyObject *TarMembers_get_url(TarMembersObject *self, void *c)
{
    (void)c;
    return Py_NewRef(self->url);
}

static void TarMembers_dealloc(TarMembersObject *self)
{
    members_close(self);
    Py_XDECREF(self->url);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef TarMembers_methods[] = {
    {"close", (PyCFunction)TarMembers_close, METH_NOARGS, "Stops reading; the shard is closed."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef TarMembers_getset[] = {
    {"members", (getter)TarMembers_get_members, NULL, "Members handed out so far.", NULL},
    {"bytes", (getter)TarMembers_get_bytes, NULL, "Their bytes.", NULL},
    {"url", (getter)TarMembers_get_url, NULL, "The shard, as opened.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TarMembersType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.TarMembers",
    .tp_basicsize = sizeof(TarMembersObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The regular files of a tar as (name, bytes), in order, read by libshard's "
              "reader (any tar dialect, plain, gzip or zstd); made by RawStream.members().",
    .tp_iter = shard_py_self_iter,
    .tp_iternext = (iternextfunc)TarMembers_next,
    .tp_dealloc = (destructor)TarMembers_dealloc,
    .tp_methods = TarMembers_methods,
    .tp_getset = TarMembers_getset,
};

typedef struct {
    ShardFile *f;
    ShardStream *s;
    ShardFileSettings fs;
    ShardError err;
} MembersOpen;

static int members_open(void *arg)
{
    MembersOpen *o = arg;
    return shard_file_open_stream(&o->f, &o->s, &o->fs, &o->err);
}

PyObject *shard_py_tarmembers_new(ShardStream **s, ShardRemote **rm, PyObject *url,
                                  uint64_t max_member, uint64_t max_sample)
{
    MembersOpen o = {.s = *s};
    *s = NULL;
    shard_file_default_settings(&o.fs);
    o.fs.members = 1;
    /* the caller's limits (libshard.webdataset's, by default the library's); names of
     * any length as WebDataset reads them, up to a bound */
    o.fs.max_member_size = max_member;
    o.fs.max_sample_size = max_sample;
    o.fs.max_name = 1u << 20;
    o.fs.remote = *rm;
    int rc = 0;
    if (shard_py_blocking(members_open, &o, *rm, &rc)) {
        shard_file_free(&o.f);
        shard_remote_free(rm);
        return NULL;
    }
    if (rc) {
        shard_remote_free(rm);
        return shard_py_raise(rc, o.err.message);
    }
    TarMembersObject *self = PyObject_New(TarMembersObject, &TarMembersType);
    if (!self) {
        shard_file_free(&o.f);
        shard_remote_free(rm);
        return NULL;
    }
    self->f = o.f;
    self->rm = *rm;
    *rm = NULL;
    self->url = Py_NewRef(url);
    self->pid = getpid();
    self->members = self->bytes = 0;
    return (PyObject *)self;
}

int shard_py_tarmembers_ready(PyObject *m)
{
    PyTypeObject *types[] = {&TarMembersType};
    return shard_py_add_types(m, types, 1);
}
