/*
 * libshard._libshard, Gpu: a CUDA device through the driver found at run time (shard/gpu.h),
 * whose pinned allocator a Loader's batches go into and on which an Uploader runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <unistd.h>

#include "_common.h"
#include "_gpu.h"

typedef struct {
    PyObject_HEAD
    ShardGpu *g;
    pid_t pid; /* a forked child's copy lets nothing go: CUDA is not usable there */
} GpuObject;

static int Gpu_init(GpuObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"device", NULL};
    int device = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i", kwlist, &device))
        return -1;
    if (self->g && self->pid != getpid())
        self->g = NULL; /* a forked child's copy: not ours to let go */
    shard_gpu_free(&self->g);
    ShardError err;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_gpu_open(&self->g, device, &err);
    Py_END_ALLOW_THREADS
    if (rc) {
        shard_py_raise(rc, err.message);
        return -1;
    }
    self->pid = getpid();
    return 0;
}

static void Gpu_dealloc(GpuObject *self)
{
    if (self->pid == getpid())
        shard_gpu_free(&self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Gpu_name(GpuObject *self, void *c)
{
    (void)c;
    if (!self->g)
        Py_RETURN_NONE;
    return PyUnicode_FromString(shard_gpu_name(self->g));
}

static PyGetSetDef Gpu_getset[] = {
    {"name", (getter)Gpu_name, NULL, "the device's name", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GpuType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.Gpu",
    .tp_basicsize = sizeof(GpuObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Gpu(device=0): a CUDA device through the driver found at run time; "
              "ShardError (CUDA not available) where there is none.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Gpu_init,
    .tp_dealloc = (destructor)Gpu_dealloc,
    .tp_getset = Gpu_getset,
};

ShardGpu *shard_py_gpu(PyObject *gpu)
{
    if (!PyObject_TypeCheck(gpu, &GpuType) || !((GpuObject *)gpu)->g) {
        PyErr_Format(PyExc_TypeError, "gpu: a libshard Gpu, not %R", gpu);
        return NULL;
    }
    return ((GpuObject *)gpu)->g;
}

const ShardAllocator *shard_py_pinned(PyObject *gpu)
{
    ShardGpu *g = shard_py_gpu(gpu);
    return g ? shard_gpu_pinned_allocator(g) : NULL;
}

int shard_py_gpu_ready(PyObject *m)
{
    PyTypeObject *types[] = {&GpuType};
    if (shard_py_add_types(m, types, 1) ||
        PyModule_AddIntConstant(m, "gpu_kernels", shard_gpu_kernels()))
        return -1;
    return 0;
}
