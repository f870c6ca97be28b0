/*
 * libshard._libshard.StepPlan: which samples were in step N (shard/loader.h,
 * shard_step_plan_*), for a job of the Loader's settings and topology, from the order
 * alone. Each answer is a list of dicts, one per sample. A plan answers one call at a time
 * (its answer is borrowed until the next): calls from several threads take turns on its
 * lock, the GIL let go while they wait and while the plan works.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <shard/shard.h>

#include "_common.h"
#include "_settings.h"
#include "_steps.h"
#include "_stream.h"

typedef struct {
    PyObject_HEAD
    ShardStepPlan *p;
    ShardRemote *rm; /* freed after p */
    PyThread_type_lock mu; /* one call on p at a time */
} StepPlanObject;

/* Takes the plan's lock, the GIL let go while waiting; 0, or -1 with MemoryError. */
static int take(StepPlanObject *self)
{
    if (!self->mu && !(self->mu = PyThread_allocate_lock())) {
        PyErr_NoMemory();
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->mu, WAIT_LOCK);
    Py_END_ALLOW_THREADS
    return 0;
}

static void give(StepPlanObject *self) { PyThread_release_lock(self->mu); }

static const char *const plan_params[] = {"urls", "state", NULL};
static const ShardPySignature plan_signature = {"StepPlan", plan_params, 1, 1, 0};

static void plan_clear(StepPlanObject *self)
{
    Py_BEGIN_ALLOW_THREADS
    shard_step_plan_free(&self->p);
    shard_remote_free(&self->rm);
    Py_END_ALLOW_THREADS
}

typedef struct {
    const ShardLoaderSettings *s;
    ShardStepPlan *p;
    ShardError err;
    int rc;
} PlanOpen;

static int StepPlan_init(StepPlanObject *self, PyObject *args, PyObject *kw)
{
    if (take(self))
        return -1;
    plan_clear(self);
    give(self);
    ShardLoaderSettings s;
    shard_loader_default_settings(&s);
    ShardPyTarget more[] = {{&shard_py_loader_table, &s},
                            {&shard_py_transform_table, &s.transform}};
    PyObject *values[2], *keep = NULL;
    ShardPySpecs sp;
    int rc = shard_py_stream_settings(&plan_signature, args, kw, &s.reader, more, 2, values,
                                      &sp, &self->rm, &keep);
    const char *state = NULL;
    if (!rc && values[1] && values[1] != Py_None && !(state = PyUnicode_AsUTF8(values[1])))
        rc = -1;
    if (!rc) {
        PlanOpen o = {&s, NULL, {0}, 0};
        Py_BEGIN_ALLOW_THREADS
        o.rc = shard_step_plan_open(&o.p, &s, state, &o.err);
        Py_END_ALLOW_THREADS
        if (take(self)) {
            shard_step_plan_free(&o.p);
            rc = -1;
        } else {
            ShardStepPlan *old = self->p; /* another thread's __init__ meanwhile; the remote
                                             this one made (self->rm) stays */
            self->p = o.p;
            give(self);
            Py_BEGIN_ALLOW_THREADS
            shard_step_plan_free(&old);
            Py_END_ALLOW_THREADS
        }
        if (!rc && o.rc) {
            shard_py_raise(o.rc, o.err.message);
            rc = -1;
        }
    }
    shard_py_specs_free(&sp);
    Py_XDECREF(keep);
    return rc;
}

static void StepPlan_dealloc(StepPlanObject *self)
{
    plan_clear(self);
    if (self->mu)
        PyThread_free_lock(self->mu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int live(StepPlanObject *self)
{
    if (self->p)
        return 0;
    PyErr_SetString(PyExc_ValueError, "StepPlan: not opened");
    return -1;
}

static PyObject *answer(StepPlanObject *self, int rc, const ShardStepSample *v, size_t n)
{
    if (rc)
        return shard_py_raise(rc, shard_step_plan_error(self->p));
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const ShardStepSample *x = &v[i];
        PyObject *d = Py_BuildValue(
            "{s:s,s:s,s:I,s:K,s:i,s:i,s:K,s:K,s:K,s:O}", "__key__", x->key, "__url__", x->url,
            "shard", (unsigned)x->shard, "index", (unsigned long long)x->index, "rank", x->rank,
            "worker", x->worker, "position", (unsigned long long)x->position, "step",
            (unsigned long long)x->step, "slot", (unsigned long long)x->slot, "pad",
            x->repeat ? Py_True : Py_False);
        if (!d) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    return list;
}

/* The plan's lock taken for a call on a live plan: 0, or -1 with an exception (the lock
 * not held). */
static int begin(StepPlanObject *self)
{
    if (take(self))
        return -1;
    if (live(self)) {
        give(self);
        return -1;
    }
    return 0;
}

static PyObject *StepPlan_keys(StepPlanObject *self, PyObject *args)
{
    unsigned long long epoch, step;
    int rank;
    if (!PyArg_ParseTuple(args, "KKi:keys", &epoch, &step, &rank) || begin(self))
        return NULL;
    const ShardStepSample *v;
    size_t n;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_step_keys(self->p, epoch, step, rank, &v, &n);
    Py_END_ALLOW_THREADS
    PyObject *out = answer(self, rc, v, n);
    give(self);
    return out;
}

static PyObject *StepPlan_where(StepPlanObject *self, PyObject *args)
{
    const char *key;
    unsigned long long epoch;
    if (!PyArg_ParseTuple(args, "sK:where", &key, &epoch) || begin(self))
        return NULL;
    const ShardStepSample *v;
    size_t n;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_step_where(self->p, key, epoch, &v, &n);
    Py_END_ALLOW_THREADS
    PyObject *out = answer(self, rc, v, n);
    give(self);
    return out;
}

static PyObject *StepPlan_steps(StepPlanObject *self, PyObject *args)
{
    unsigned long long epoch;
    int rank;
    if (!PyArg_ParseTuple(args, "Ki:steps", &epoch, &rank) || begin(self))
        return NULL;
    int64_t n;
    Py_BEGIN_ALLOW_THREADS
    n = shard_step_plan_steps(self->p, epoch, rank);
    Py_END_ALLOW_THREADS
    PyObject *out = n < 0 ? shard_py_raise((int)n, shard_step_plan_error(self->p))
                          : PyLong_FromLongLong(n);
    give(self);
    return out;
}

static PyObject *StepPlan_state(StepPlanObject *self, PyObject *args)
{
    unsigned long long epoch, step;
    int rank;
    if (!PyArg_ParseTuple(args, "KKi:state", &epoch, &step, &rank))
        return NULL;
    char *buf = PyMem_Malloc(SHARD_READER_STATE_MAX);
    if (!buf)
        return PyErr_NoMemory();
    if (begin(self)) {
        PyMem_Free(buf);
        return NULL;
    }
    ShardStepConsumer who;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = shard_step_state(self->p, epoch, step, rank, &who, buf, SHARD_READER_STATE_MAX);
    Py_END_ALLOW_THREADS
    PyObject *out = rc ? shard_py_raise(rc, shard_step_plan_error(self->p))
                       : Py_BuildValue("{s:s,s:i,s:i,s:i,s:i}", "state", buf, "world_size",
                                       who.world_size, "num_workers", who.num_workers, "rank",
                                       who.rank, "worker", who.worker);
    give(self);
    PyMem_Free(buf);
    return out;
}

static PyMethodDef StepPlan_methods[] = {
    {"keys", (PyCFunction)StepPlan_keys, METH_VARARGS,
     "keys(epoch, step, rank) -> the samples of the step on rank (-1: every rank's)"},
    {"where", (PyCFunction)StepPlan_where, METH_VARARGS,
     "where(key, epoch) -> every place of key in the epoch"},
    {"state", (PyCFunction)StepPlan_state, METH_VARARGS,
     "state(epoch, step, rank) -> {state, world_size, num_workers, rank, worker}: the "
     "consumer that delivers the step, and the state it delivers it first from"},
    {"steps", (PyCFunction)StepPlan_steps, METH_VARARGS,
     "steps(epoch, rank) -> the rank's steps in the epoch"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StepPlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libshard._libshard.StepPlan",
    .tp_basicsize = sizeof(StepPlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StepPlan(urls, state=None, **loader settings): a job's steps named from the order alone.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)StepPlan_init,
    .tp_dealloc = (destructor)StepPlan_dealloc,
    .tp_methods = StepPlan_methods,
};

int shard_py_steps_ready(PyObject *m)
{
    PyTypeObject *types[] = {&StepPlanType};
    return shard_py_add_types(m, types, 1);
}
