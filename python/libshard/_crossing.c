/*
 * libshard._libshard, Ring and RingView: a ring of shared memory (a memfd) one process writes
 * values into and another copies them out of, in the order they were written. The writer
 * (a DataLoader worker) puts a value and sends where it lies, a few numbers, through its
 * pipe; the reader (the main process) maps the ring once, copies the value out as bytes and
 * gives its space back. The bytes cross with one copy on each side instead of through the
 * pipe and two pickles.
 *
 * The ring's first 64 bytes hold the reader's position (tail); the writer's (head) is its own.
 * Positions only grow; a value never wraps: the space left before the end is skipped. A
 * reader gives a value's space back only if it is the next one (tail == its start), so a
 * value copied out of order, or by another process, holds the ring still instead of letting
 * the writer overwrite one not yet read: the writer then finds it full and its caller
 * pickles the value as before.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "_crossing.h"
#include "_common.h"

#define RING_HEADER 64

typedef struct {
    _Atomic uint64_t tail; /* the reader's: every byte before it is free again */
} RingHeader;

typedef struct {
    PyObject_HEAD
    int fd;
    unsigned char *map;
    uint64_t size; /* of the data, after the header */
    uint64_t head;
    pid_t pid; /* the writer: a forked child must not write into its parent's ring */
} RingObject;

typedef struct {
    PyObject_HEAD
    unsigned char *map;
    uint64_t size;
    int users;   /* take_alls copying out with the GIL let go: close() waits for them */
    int closing; /* closed while in use: the last user unmaps */
} RingViewObject;

/* 0 when an object (what: Ring, RingView) not yet made may map a ring of size bytes; -1
 * with ValueError. */
static int ring_new(const char *what, const unsigned char *map, unsigned long long size)
{
    if (map) {
        PyErr_Format(PyExc_ValueError, "%s: already made", what);
        return -1;
    }
    if (size < 4096 || size > (1ull << 40)) {
        PyErr_Format(PyExc_ValueError, "%s: size %llu: must be 4096 to 2**40 bytes", what, size);
        return -1;
    }
    return 0;
}

static int ring_map(int fd, uint64_t size, unsigned char **map)
{
    void *p = mmap(NULL, RING_HEADER + size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    *map = p;
    return 0;
}

static int Ring_init(RingObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"size", NULL};
    unsigned long long size;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "K", names, &size) ||
        ring_new("Ring", self->map, size))
        return -1;
    int fd = memfd_create("libshard-crossing", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)(RING_HEADER + size)) || ring_map(fd, size, &self->map)) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, "memfd libshard-crossing");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    self->fd = fd;
    self->size = size;
    self->head = 0;
    self->pid = getpid();
    return 0;
}

/* Reserves n bytes: 0 and where they lie (start, offset, end), or -1: no room, or not ours. */
static int ring_reserve(RingObject *self, uint64_t n, uint64_t where[3])
{
    if (!self->map || self->pid != getpid())
        return -1;
    RingHeader *h = (RingHeader *)self->map;
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    uint64_t start = self->head, pos = start, off = pos % self->size;
    if (off + n > self->size) { /* would wrap: skip to the ring's start */
        pos += self->size - off;
        off = 0;
    }
    /* an empty ring takes any value that fits it; else the value must end a lap before
     * the oldest one not yet taken (tail) */
    if (n > self->size || (tail != start && pos + n - tail > self->size))
        return -1;
    self->head = pos + n;
    where[0] = start;
    where[1] = off;
    where[2] = self->head;
    return 0;
}

/* Every value is reserved while the GIL is held (another thread's put comes after), and
 * copied in once it is let go. */
static PyObject *Ring_put_all(PyObject *op, PyObject *arg)
{
    RingObject *self = (RingObject *)op;
    PyObject *seq = PySequence_Fast(arg, "Ring.put_all: a sequence of bytes-like values");
    if (!seq)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(count);
    Py_buffer *b = PyMem_Calloc(count ? (size_t)count : 1, sizeof *b);
    unsigned char **to = PyMem_Calloc(count ? (size_t)count : 1, sizeof *to);
    Py_ssize_t got = 0;
    if (!out || !b || !to)
        goto fail;
    for (; got < count; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &b[got], PyBUF_SIMPLE))
            goto fail;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t where[3];
        PyObject *item;
        if (ring_reserve(self, (uint64_t)b[i].len, where)) {
            item = Py_NewRef(Py_None); /* no room: the caller pickles it */
        } else {
            to[i] = self->map + RING_HEADER + where[1];
            item = Py_BuildValue("KKK", (unsigned long long)where[0],
                                 (unsigned long long)where[1], (unsigned long long)where[2]);
            if (!item)
                goto fail; /* reserved but never sent: the ring holds still, safely */
        }
        PyList_SET_ITEM(out, i, item);
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        if (to[i])
            memcpy(to[i], b[i].buf, (size_t)b[i].len);
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    PyMem_Free(b);
    PyMem_Free(to);
    Py_DECREF(seq);
    return out;
fail:
    for (Py_ssize_t i = 0; b && i < got; i++)
        PyBuffer_Release(&b[i]);
    PyMem_Free(b);
    PyMem_Free(to);
    Py_XDECREF(out);
    Py_DECREF(seq);
    return NULL;
}

/* What all(self, [arg]) gives for arg: the one-value forms of put_all and take_all. */
static PyObject *one_of(PyObject *(*all)(PyObject *, PyObject *), PyObject *self,
                        PyObject *arg)
{
    PyObject *one = PyTuple_Pack(1, arg);
    if (!one)
        return NULL;
    PyObject *got = all(self, one);
    Py_DECREF(one);
    if (!got)
        return NULL;
    PyObject *out = Py_NewRef(PyList_GET_ITEM(got, 0));
    Py_DECREF(got);
    return out;
}

static PyObject *Ring_put(PyObject *self, PyObject *arg)
{
    return one_of(Ring_put_all, self, arg);
}

/* The pages go back to the system at once, from every process that maps them (the main
 * process keeps its mapping until it sweeps it): what a worker does as it ends. */
static PyObject *Ring_release(RingObject *self, PyObject *unused)
{
    (void)unused;
    if (self->map && self->pid == getpid() &&
        fallocate(self->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                  (off_t)(RING_HEADER + self->size))) {
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, "memfd libshard-crossing");
    }
    Py_RETURN_NONE;
}

static PyObject *Ring_get_fd(RingObject *self, void *c)
{
    (void)c;
    return PyLong_FromLong(self->map ? self->fd : -1);
}

static PyObject *Ring_get_size(RingObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->size);
}

static PyObject *Ring_get_tail(RingObject *self, void *c)
{
    (void)c;
    if (!self->map)
        return PyLong_FromLong(0);
    RingHeader *h = (RingHeader *)self->map;
    return PyLong_FromUnsignedLongLong(atomic_load_explicit(&h->tail, memory_order_acquire));
}

static void Ring_dealloc(RingObject *self)
{
    if (self->map) {
        munmap(self->map, RING_HEADER + self->size);
        close(self->fd);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Ring_methods[] = {
    {"put", (PyCFunction)Ring_put, METH_O,
     "put(value): copies a bytes-like value into the ring; (start, offset, end), where it "
     "lies, or None when the ring has no room for it (or belongs to another process)."},
    {"release", (PyCFunction)Ring_release, METH_NOARGS,
     "Gives the ring's pages back to the system (its values are gone): a worker's last "
     "step."},
    {"put_all", (PyCFunction)Ring_put_all, METH_O,
     "put_all(values): put() of each, in order; the list of what each gave."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Ring_getset[] = {
    {"fd", (getter)Ring_get_fd, NULL, "The memfd, for a RingView in another process.", NULL},
    {"size", (getter)Ring_get_size, NULL, "Bytes the ring holds.", NULL},
    {"tail", (getter)Ring_get_tail, NULL, "The reader's position: all before it is free.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.Ring",
    .tp_basicsize = sizeof(RingObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Ring(size): shared memory (a memfd) values are put into, for a RingView "
              "of its fd in another process to take out in the same order.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Ring_init,
    .tp_dealloc = (destructor)Ring_dealloc,
    .tp_methods = Ring_methods,
    .tp_getset = Ring_getset,
};

static int RingView_init(RingViewObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"fd", "size", NULL};
    int fd;
    unsigned long long size;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iK", names, &fd, &size) ||
        ring_new("RingView", self->map, size))
        return -1;
    if (ring_map(fd, size, &self->map)) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, "RingView: the ring's memfd");
        self->map = NULL;
        return -1;
    }
    self->size = size;
    return 0;
}

static void view_unmap(RingViewObject *self)
{
    if (self->map)
        munmap(self->map, RING_HEADER + self->size);
    self->map = NULL;
    self->closing = 0;
}

/* A place (start, offset, n, end) checked against the ring: 0, or -1 with ValueError. */
static int view_place(RingViewObject *self, PyObject *place, uint64_t v[4])
{
    unsigned long long start, off, n, end;
    if (!PyArg_ParseTuple(place, "KKKK", &start, &off, &n, &end))
        return -1;
    if (!self->map || self->closing) {
        PyErr_SetString(PyExc_ValueError, "RingView: closed");
        return -1;
    }
    /* the value, and before it less than a lap skipped at the ring's end */
    if (n > self->size || off > self->size - n || end < start || end - start < n ||
        end - start - n >= self->size || n > (unsigned long long)PY_SSIZE_T_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "RingView: a value at %llu (offset %llu, %llu bytes, end %llu) does not "
                     "lie in a ring of %llu bytes",
                     start, off, n, end, (unsigned long long)self->size);
        return -1;
    }
    v[0] = start;
    v[1] = off;
    v[2] = n;
    v[3] = end;
    return 0;
}

/* Each place a (start, offset, n, end) to copy out, or a value to keep as it is (one the
 * ring had no room for). The copies are made with the GIL let go; each value's space is
 * given back after its copy (release: the writer sees it free only then), if it is the
 * next one. */
static PyObject *RingView_take_all(PyObject *op, PyObject *arg)
{
    RingViewObject *self = (RingViewObject *)op;
    PyObject *seq = PySequence_Fast(arg, "RingView.take_all: a sequence of places");
    if (!seq)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(count);
    uint64_t(*v)[4] = PyMem_Calloc(count ? (size_t)count : 1, sizeof *v);
    if (!out || !v)
        goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *place = PySequence_Fast_GET_ITEM(seq, i), *item;
        if (PyTuple_Check(place)) {
            if (view_place(self, place, v[i]))
                goto fail;
            item = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)v[i][2]);
            if (!item)
                goto fail;
        } else {
            v[i][2] = UINT64_MAX; /* kept */
            item = Py_NewRef(place);
        }
        PyList_SET_ITEM(out, i, item);
    }
    RingHeader *h = (RingHeader *)self->map;
    self->users++;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        if (v[i][2] == UINT64_MAX)
            continue;
        memcpy(PyBytes_AS_STRING(PyList_GET_ITEM(out, i)), self->map + RING_HEADER + v[i][1],
               v[i][2]);
        uint64_t expected = v[i][0];
        atomic_compare_exchange_strong_explicit(&h->tail, &expected, v[i][3],
                                                memory_order_release, memory_order_relaxed);
    }
    Py_END_ALLOW_THREADS
    if (!--self->users && self->closing)
        view_unmap(self);
    PyMem_Free(v);
    Py_DECREF(seq);
    return out;
fail:
    PyMem_Free(v);
    Py_XDECREF(out);
    Py_DECREF(seq);
    return NULL;
}

static PyObject *RingView_take(PyObject *self, PyObject *args)
{
    return one_of(RingView_take_all, self, args);
}

static PyObject *RingView_close(RingViewObject *self, PyObject *unused)
{
    (void)unused;
    if (self->users)
        self->closing = 1; /* another thread is copying out: it unmaps when done */
    else
        view_unmap(self);
    Py_RETURN_NONE;
}

static void RingView_dealloc(RingViewObject *self)
{
    view_unmap(self); /* no user left: each holds a reference while it copies */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef RingView_methods[] = {
    {"take", (PyCFunction)RingView_take, METH_VARARGS,
     "take(start, offset, n, end): the value Ring.put placed there, as bytes; its space is "
     "given back if it was the next one."},
    {"take_all", (PyCFunction)RingView_take_all, METH_O,
     "take_all(places): take() of each (start, offset, n, end), in order; anything else in "
     "places (a value that did not go through the ring) is kept as it is."},
    {"close", (PyCFunction)RingView_close, METH_NOARGS, "Unmaps the ring."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RingViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.RingView",
    .tp_basicsize = sizeof(RingViewObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RingView(fd, size): a Ring mapped from its memfd (fd stays the caller's to "
              "close), to take its values out.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)RingView_init,
    .tp_dealloc = (destructor)RingView_dealloc,
    .tp_methods = RingView_methods,
};

int shard_py_crossing_ready(PyObject *m)
{
    PyTypeObject *types[] = {&RingType, &RingViewType};
    return shard_py_add_types(m, types, 2);
}
