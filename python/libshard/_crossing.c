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
} RingViewObject;

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
    if (!PyArg_ParseTupleAndKeywords(args, kw, "K", names, &size))
        return -1;
    if (size < 4096 || size > (1ull << 40)) {
        PyErr_Format(PyExc_ValueError, "Ring: size %llu: must be 4096 to 2**40 bytes", size);
        return -1;
    }
    if (self->map) {
        PyErr_SetString(PyExc_ValueError, "Ring: already made");
        return -1;
    }
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

static PyObject *Ring_put(RingObject *self, PyObject *arg)
{
    if (!self->map || self->pid != getpid())
        Py_RETURN_NONE;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE))
        return NULL;
    uint64_t n = (uint64_t)b.len;
    RingHeader *h = (RingHeader *)self->map;
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    uint64_t start = self->head, pos = start, off = pos % self->size;
    if (off + n > self->size) { /* would wrap: skip to the ring's start */
        pos += self->size - off;
        off = 0;
    }
    /* an empty ring takes any value that fits it; else the value must end a lap before
     * the oldest one not yet taken (tail) */
    if (n > self->size || (tail != start && pos + n - tail > self->size)) {
        PyBuffer_Release(&b);
        Py_RETURN_NONE; /* full: the caller pickles the value */
    }
    self->head = pos + n; /* taken before the GIL goes: another thread's put comes after */
    Py_BEGIN_ALLOW_THREADS
    memcpy(self->map + RING_HEADER + off, b.buf, n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return Py_BuildValue("KKK", (unsigned long long)start, (unsigned long long)off,
                         (unsigned long long)self->head);
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
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iK", names, &fd, &size))
        return -1;
    if (self->map) {
        PyErr_SetString(PyExc_ValueError, "RingView: already made");
        return -1;
    }
    if (size < 4096 || size > (1ull << 40)) {
        PyErr_Format(PyExc_ValueError, "RingView: size %llu: must be 4096 to 2**40 bytes", size);
        return -1;
    }
    if (ring_map(fd, size, &self->map)) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, "RingView: the ring's memfd");
        self->map = NULL;
        return -1;
    }
    self->size = size;
    return 0;
}

static PyObject *RingView_take(RingViewObject *self, PyObject *args)
{
    unsigned long long start, off, n, end;
    if (!PyArg_ParseTuple(args, "KKKK", &start, &off, &n, &end))
        return NULL;
    if (!self->map)
        return PyErr_Format(PyExc_ValueError, "RingView: closed");
    /* the value, and before it less than a lap skipped at the ring's end */
    if (n > self->size || off > self->size - n || end < start || end - start < n ||
        end - start - n >= self->size) {
        return PyErr_Format(PyExc_ValueError,
                            "RingView: a value at %llu (offset %llu, %llu bytes, end %llu) "
                            "does not lie in a ring of %llu bytes",
                            start, off, n, end, (unsigned long long)self->size);
    }
    if (n > (unsigned long long)PY_SSIZE_T_MAX)
        return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (!out)
        return NULL;
    RingHeader *h = (RingHeader *)self->map;
    Py_BEGIN_ALLOW_THREADS
    memcpy(PyBytes_AS_STRING(out), self->map + RING_HEADER + off, n);
    uint64_t expected = start;
    /* release: the copy is done before the writer may see the space free */
    atomic_compare_exchange_strong_explicit(&h->tail, &expected, end, memory_order_release,
                                            memory_order_relaxed);
    Py_END_ALLOW_THREADS
    return out;
}

static PyObject *RingView_close(RingViewObject *self, PyObject *unused)
{
    (void)unused;
    if (self->map)
        munmap(self->map, RING_HEADER + self->size);
    self->map = NULL;
    Py_RETURN_NONE;
}

static void RingView_dealloc(RingViewObject *self)
{
    if (self->map)
        munmap(self->map, RING_HEADER + self->size);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef RingView_methods[] = {
    {"take", (PyCFunction)RingView_take, METH_VARARGS,
     "take(start, offset, n, end): the value Ring.put placed there, as bytes; its space is "
     "given back if it was the next one."},
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
