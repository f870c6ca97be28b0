/*
 * libshard._libshard, the settings engine (_settings.h): a row's check (the messages the
 * Python API gives, word for word the same wherever a setting is taken) and its store into
 * the C struct. A call's keywords are parsed in _args.c; the tables are described to
 * Python, their defaults read back from the structs, in _describe.c.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <shard/shard.h>

#include "_common.h"
#include "_settings.h"

/* ---- checks: a Python value in, the normalized value out (a new reference) -------------- */

/* isinstance(v, numbers.<abc>): what the Python API has always checked, numpy's scalars
 * included. */
static int is_number(PyObject *v, const char *abc)
{
    if (PyLong_Check(v) || (PyFloat_Check(v) && strcmp(abc, "Real") == 0))
        return 1;
    PyObject *mod = PyImport_ImportModule("numbers");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, abc) : NULL;
    int r = cls ? PyObject_IsInstance(v, cls) : -1;
    Py_XDECREF(cls);
    Py_XDECREF(mod);
    return r;
}

/* "name: what it accepts, not repr(v)" as a TypeError (or ValueError). */
static PyObject *refuse(PyObject *type, const ShardPySetting *row, const char *what, PyObject *v)
{
    const char *none = (row->flags & SHARD_PY_NONE) && !row->accepts ? " or None" : "";
    PyErr_Format(type, "%s: %s%s, not %R", row->name, row->accepts ? row->accepts : what, none, v);
    return NULL;
}

/* The range of a field's integers, as Python ints. */
static PyObject *field_bound(ShardPyField f, int upper)
{
    switch (f) {
    case SHARD_PY_F_INT:
        return PyLong_FromLong(upper ? INT_MAX : INT_MIN);
    case SHARD_PY_F_I64:
        return PyLong_FromLongLong(upper ? INT64_MAX : INT64_MIN);
    case SHARD_PY_F_U32:
        return PyLong_FromUnsignedLong(upper ? UINT32_MAX : 0);
    case SHARD_PY_F_SIZE:
        return PyLong_FromSize_t(upper ? SIZE_MAX : 0);
    default:
        return PyLong_FromUnsignedLongLong(upper ? UINT64_MAX : 0);
    }
}

/* i (an int) against the row's bounds and its field's: 0, or -1 with "name: at least lo,
 * not v" (or "at most"), or the row's own words. */
static int check_range(const ShardPySetting *row, PyObject *i, PyObject *v)
{
    for (int upper = 0; upper < 2; upper++) {
        unsigned flag = upper ? SHARD_PY_MAX : SHARD_PY_MIN;
        long long own = upper ? row->max : row->min;
        PyObject *bound = field_bound(row->field, upper);
        PyObject *mine = (row->flags & flag) ? PyLong_FromLongLong(own) : NULL;
        if (!bound || ((row->flags & flag) && !mine)) {
            Py_XDECREF(bound);
            return -1;
        }
        /* the tighter of the two */
        if (mine && PyObject_RichCompareBool(mine, bound, upper ? Py_LT : Py_GT) == 1)
            Py_SETREF(bound, Py_NewRef(mine));
        Py_XDECREF(mine);
        int out = PyObject_RichCompareBool(i, bound, upper ? Py_GT : Py_LT);
        if (out == 1) {
            if (row->kind == SHARD_PY_WHOLE)
                refuse(PyExc_ValueError, row, "a whole number >= 0", v);
            else
                PyErr_Format(PyExc_ValueError, "%s: %s %S, not %S", row->name,
                             upper ? "at most" : "at least", bound, v);
        }
        Py_DECREF(bound);
        if (out)
            return -1;
    }
    return 0;
}

static PyObject *check_int(const ShardPySetting *row, PyObject *v)
{
    int ok = PyBool_Check(v) ? 0 : is_number(v, "Integral");
    if (ok <= 0)
        return ok < 0 ? NULL : refuse(PyExc_TypeError, row, "an int", v);
    PyObject *i = PyNumber_Index(v);
    if (i && check_range(row, i, v))
        Py_CLEAR(i);
    return i;
}

static PyObject *check_whole(const ShardPySetting *row, PyObject *v)
{
    PyObject *i = NULL;
    if (PyFloat_Check(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        if (d >= 0 && d < 1.8e19 && d == (double)(uint64_t)d)
            i = PyLong_FromDouble(d);
    } else if (PyLong_Check(v)) {
        i = Py_NewRef(v);
    }
    if (!i)
        return PyErr_Occurred() ? NULL : refuse(PyExc_ValueError, row, "a whole number >= 0", v);
    if (check_range(row, i, v))
        Py_CLEAR(i);
    return i;
}

static PyObject *check_real(const ShardPySetting *row, PyObject *v)
{
    int ok = PyBool_Check(v) ? 0 : is_number(v, "Real");
    if (ok <= 0)
        return ok < 0 ? NULL : refuse(PyExc_TypeError, row, "a number", v);
    PyObject *f = PyNumber_Float(v);
    if (f && (row->flags & SHARD_PY_MIN) && PyFloat_AS_DOUBLE(f) < (double)row->min) {
        PyObject *lo = PyFloat_FromDouble((double)row->min);
        if (lo)
            PyErr_Format(PyExc_ValueError, "%s: at least %S, not %S", row->name, lo, v);
        Py_XDECREF(lo);
        Py_CLEAR(f);
    }
    return f;
}

static PyObject *check_path(const ShardPySetting *row, PyObject *v)
{
    PyObject *p = PyOS_FSPath(v);
    if (!p) {
        PyErr_Clear();
        return refuse(PyExc_TypeError, row, "a path (a str or an os.PathLike)", v);
    }
    if (PyBytes_Check(p))
        Py_SETREF(p, PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p)));
    return p;
}

static const ShardPyChoice *find_choice(const ShardPySetting *row, PyObject *v)
{
    for (const ShardPyChoice *c = row->choices; PyUnicode_Check(v) && c && c->name; c++)
        if (!PyUnicode_CompareWithASCIIString(v, c->name))
            return c;
    return NULL;
}

static PyObject *check_choice(const ShardPySetting *row, PyObject *v)
{
    if (find_choice(row, v))
        return Py_NewRef(v);
    PyObject *names = PyUnicode_FromString("");
    for (const ShardPyChoice *c = row->choices; names && c->name; c++)
        if (!c->hidden)
            Py_SETREF(names, PyUnicode_FromFormat(
                                 "%U%s'%s'", names, PyUnicode_GET_LENGTH(names) ? ", " : "", c->name));
    if (names)
        PyErr_Format(PyExc_ValueError, "%s: one of %U, not %R", row->name, names, v);
    Py_XDECREF(names);
    return NULL;
}

/* A tuple of row->count floats, as float() makes them from the items of v (or of
 * v.tolist()). */
static PyObject *check_numbers(const ShardPySetting *row, PyObject *v)
{
    PyObject *items = NULL, *out = NULL;
    if (!PyUnicode_Check(v) && !PyBytes_Check(v)) {
        PyObject *src = PyObject_HasAttrString(v, "tolist") ? PyObject_CallMethod(v, "tolist", NULL)
                                                            : Py_NewRef(v);
        items = src ? PySequence_List(src) : NULL;
        Py_XDECREF(src);
    }
    if (items && PyList_GET_SIZE(items) == row->count && (out = PyTuple_New(row->count)))
        for (int i = 0; out && i < row->count; i++) {
            PyObject *f = PyNumber_Float(PyList_GET_ITEM(items, i));
            if (f)
                PyTuple_SET_ITEM(out, i, f);
            else
                Py_CLEAR(out);
        }
    Py_XDECREF(items);
    if (!out && (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError) ||
                 PyErr_ExceptionMatches(PyExc_ValueError))) {
        PyErr_Clear();
        return refuse(PyExc_TypeError, row, "numbers", v);
    }
    return out;
}

/* An int, or a (height, width) pair of ints, each checked as the row's int. */
static PyObject *check_size(const ShardPySetting *row, PyObject *v)
{
    if (!PyBool_Check(v) && is_number(v, "Integral") == 1)
        return check_int(row, v);
    if ((PyTuple_Check(v) || PyList_Check(v)) && PySequence_Size(v) == 2) {
        PyObject *h = PySequence_GetItem(v, 0), *w = PySequence_GetItem(v, 1);
        int ints = h && w && !PyBool_Check(h) && !PyBool_Check(w) &&
                   is_number(h, "Integral") == 1 && is_number(w, "Integral") == 1;
        PyObject *out = NULL;
        if (ints) {
            PyObject *hi = check_int(row, h), *wi = hi ? check_int(row, w) : NULL;
            out = wi ? PyTuple_Pack(2, hi, wi) : NULL;
            Py_XDECREF(hi);
            Py_XDECREF(wi);
        }
        Py_XDECREF(h);
        Py_XDECREF(w);
        if (ints || PyErr_Occurred())
            return out;
    }
    return refuse(PyExc_TypeError, row, "an int or a pair of ints (height, width)", v);
}

static PyObject *check_label(const ShardPySetting *row, PyObject *v)
{
    PyObject *minus = PyLong_FromLong(-1);
    int ok = minus && ((PyUnicode_Check(v) && !PyUnicode_CompareWithASCIIString(v, "error")) ||
                       PyObject_RichCompareBool(v, minus, Py_EQ) == 1);
    if (!ok && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "%s: one of 'error', -1, not %R", row->name, v);
    Py_XDECREF(minus);
    return ok ? Py_NewRef(v) : NULL;
}

static PyObject *check_digests(const ShardPySetting *row, PyObject *v)
{
    const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    int bits;
    if (s && !shard_digests_parse(s, &bits))
        return Py_NewRef(v);
    if (!PyErr_Occurred())
        refuse(s ? PyExc_ValueError : PyExc_TypeError, row, "digest names", v);
    return NULL;
}

PyObject *shard_py_setting_check(const ShardPySetting *row, PyObject *v)
{
    if (v == Py_None && (row->flags & SHARD_PY_NONE))
        return Py_NewRef(v);
    switch (row->kind) {
    case SHARD_PY_INT:
        return check_int(row, v);
    case SHARD_PY_WHOLE:
        return check_whole(row, v);
    case SHARD_PY_BOOL:
        if (PyBool_Check(v) || (PyLong_Check(v) && (unsigned long)PyLong_AsLong(v) <= 1))
            return PyBool_FromLong(PyObject_IsTrue(v));
        PyErr_Clear(); /* a long past the C range is no bool either */
        return refuse(PyExc_TypeError, row, "True or False", v);
    case SHARD_PY_REAL:
        return check_real(row, v);
    case SHARD_PY_TEXT:
        return PyUnicode_Check(v) ? Py_NewRef(v) : refuse(PyExc_TypeError, row, "a str", v);
    case SHARD_PY_PATH:
        return check_path(row, v);
    case SHARD_PY_CHOICE:
        return check_choice(row, v);
    case SHARD_PY_NUMBERS:
        return check_numbers(row, v);
    case SHARD_PY_SIZE:
        return check_size(row, v);
    case SHARD_PY_LABEL:
        return check_label(row, v);
    default:
        return check_digests(row, v);
    }
}

/* ---- store into the struct ------------------------------------ */

static void store_integer(ShardPyField f, void *p, PyObject *i)
{
    switch (f) {
    case SHARD_PY_F_INT:
        *(int *)p = (int)PyLong_AsLong(i);
        break;
    case SHARD_PY_F_I64:
        *(int64_t *)p = (int64_t)PyLong_AsLongLong(i);
        break;
    case SHARD_PY_F_U32:
        *(uint32_t *)p = (uint32_t)PyLong_AsUnsignedLong(i);
        break;
    case SHARD_PY_F_SIZE:
        *(size_t *)p = PyLong_AsSize_t(i);
        break;
    default:
        *(uint64_t *)p = (uint64_t)PyLong_AsUnsignedLongLong(i);
    }
}

/* The normalized value v into the row's field(s) of the struct at base; strings are kept
 * alive by keep. 0 or -1. */
static int store_value(const ShardPySetting *row, PyObject *v, void *base, PyObject *keep)
{
    void *p = (char *)base + row->offset;
    if (row->flags & SHARD_PY_GIVEN) /* the flag beside the value: given, or None */
        *(int *)(void *)((char *)base + row->offset2) = v != Py_None;
    if (v == Py_None) { /* numbers keep their default */
        if (row->field == SHARD_PY_F_STR)
            *(const char **)p = NULL;
        else if (row->kind == SHARD_PY_DIGESTS)
            *(int *)p = 0;
        return 0;
    }
    switch (row->kind) {
    case SHARD_PY_INT:
    case SHARD_PY_WHOLE:
        store_integer(row->field, p, v);
        return 0;
    case SHARD_PY_BOOL:
        *(int *)p = v == Py_True;
        return 0;
    case SHARD_PY_REAL:
        *(double *)p = PyFloat_AS_DOUBLE(v);
        return 0;
    case SHARD_PY_TEXT:
    case SHARD_PY_PATH:
        if (PyList_Append(keep, v))
            return -1;
        return (*(const char **)p = PyUnicode_AsUTF8(v)) ? 0 : -1;
    case SHARD_PY_CHOICE:
        *(int *)p = find_choice(row, v)->value;
        return 0;
    case SHARD_PY_NUMBERS:
        for (int i = 0; i < row->count; i++) {
            double d = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(v, i));
            if (row->field == SHARD_PY_F_FLOAT)
                ((float *)p)[i] = (float)d;
            else
                ((double *)p)[i] = d;
        }
        return 0;
    case SHARD_PY_SIZE: { /* (height, width), or one side for both */
        int pair = PyTuple_Check(v);
        int *height = (int *)(void *)((char *)base + row->offset2);
        *(int *)p = (int)PyLong_AsLong(pair ? PyTuple_GET_ITEM(v, 1) : v);
        *height = (int)PyLong_AsLong(pair ? PyTuple_GET_ITEM(v, 0) : v);
        return 0;
    }
    case SHARD_PY_LABEL:
        *(int *)p = PyUnicode_Check(v) ? SHARD_LABEL_ERROR : SHARD_LABEL_MINUS_ONE;
        return 0;
    default:
        return shard_digests_parse(PyUnicode_AsUTF8(v), (int *)p) ? -1 : 0;
    }
}

int shard_py_setting_set(const ShardPySetting *row, PyObject *v, void *base, PyObject *keep)
{
    PyObject *norm = shard_py_setting_check(row, v);
    int rc = norm ? store_value(row, norm, base, keep) : -1;
    Py_XDECREF(norm);
    return rc;
}

