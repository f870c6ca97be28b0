/*
 * libshard._libshard, the settings tables described to Python (_settings.h): settings()
 * gives every row with its C default, read back from the struct its table's default
 * function fills; check_setting() makes a row's check on a value, for the settings the
 * Python package takes before any C object is made (and those it derives from a row).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <shard/shard.h>

#include "_settings.h"

static const char *const kind_names[SHARD_PY_KINDS] = {
    "int", "whole", "bool", "real", "text", "path", "choice", "numbers", "size", "label",
    "digests",
};
static const char *const field_names[SHARD_PY_FIELDS] = {
    "int", "uint32_t", "int64_t", "uint64_t", "size_t", "double", "float", "const char *",
};

#define AT(base, offset, type) ((type *)(void *)((char *)(base) + (offset)))

/* ---- a default read back from the struct ------------------------------------------------ */

/* A float field as Python writes it: the shortest decimal that is the same float (0.485,
 * not 0.48500001430511475). */
static PyObject *float_value(float f)
{
    for (int digits = 1; digits <= 9; digits++) {
        char *s = PyOS_double_to_string(f, 'g', digits, 0, NULL);
        double d = s ? PyOS_string_to_double(s, NULL, NULL) : -1;
        PyMem_Free(s);
        if (!s || PyErr_Occurred())
            return NULL;
        if ((float)d == f || digits == 9)
            return PyFloat_FromDouble(d);
    }
    return NULL;
}

static PyObject *integer_value(ShardPyField f, const void *p)
{
    switch (f) {
    case SHARD_PY_F_INT:
        return PyLong_FromLong(*(const int *)p);
    case SHARD_PY_F_I64:
        return PyLong_FromLongLong(*(const int64_t *)p);
    case SHARD_PY_F_U32:
        return PyLong_FromUnsignedLong(*(const uint32_t *)p);
    case SHARD_PY_F_SIZE:
        return PyLong_FromSize_t(*(const size_t *)p);
    default:
        return PyLong_FromUnsignedLongLong(*(const uint64_t *)p);
    }
}

/* The row's value in the struct at base, as check_value would have normalized it. */
static PyObject *get_value(const ShardPySetting *row, const void *base)
{
    const void *p = (const char *)base + row->offset;
    if ((row->flags & SHARD_PY_GIVEN) && !*AT(base, row->offset2, const int))
        Py_RETURN_NONE;
    switch (row->kind) {
    case SHARD_PY_INT:
    case SHARD_PY_WHOLE:
        return integer_value(row->field, p);
    case SHARD_PY_BOOL:
        return PyBool_FromLong(*(const int *)p);
    case SHARD_PY_REAL:
        return PyFloat_FromDouble(*(const double *)p);
    case SHARD_PY_TEXT:
    case SHARD_PY_PATH:
        return *(char *const *)p ? PyUnicode_FromString(*(char *const *)p) : Py_NewRef(Py_None);
    case SHARD_PY_CHOICE:
        for (const ShardPyChoice *c = row->choices; c->name; c++)
            if (!c->hidden && c->value == *(const int *)p)
                return PyUnicode_FromString(c->name);
        Py_RETURN_NONE;
    case SHARD_PY_NUMBERS: {
        PyObject *t = PyTuple_New(row->count);
        for (int i = 0; t && i < row->count; i++) {
            PyObject *f = row->field == SHARD_PY_F_FLOAT
                              ? float_value(((const float *)p)[i])
                              : PyFloat_FromDouble(((const double *)p)[i]);
            if (f)
                PyTuple_SET_ITEM(t, i, f);
            else
                Py_CLEAR(t);
        }
        return t;
    }
    case SHARD_PY_SIZE: {
        int w = *(const int *)p, h = *AT(base, row->offset2, const int);
        return w == h ? PyLong_FromLong(w) : Py_BuildValue("(ii)", h, w);
    }
    case SHARD_PY_LABEL:
        return *(const int *)p == SHARD_LABEL_MINUS_ONE ? PyLong_FromLong(-1)
                                                       : PyUnicode_FromString("error");
    default: {
        int bits = *(const int *)p;
        return PyUnicode_FromString(bits == (SHARD_DIGEST_MD5 | SHARD_DIGEST_SHA256) ? "md5,sha256"
                                    : bits == SHARD_DIGEST_MD5                     ? "md5"
                                    : bits == SHARD_DIGEST_SHA256                  ? "sha256"
                                                                                   : "none");
    }
    }
}

/* ---- the tables as Python data ---------------------------------------------------------- */

static PyObject *choice_names(const ShardPySetting *row)
{
    if (row->kind != SHARD_PY_CHOICE)
        Py_RETURN_NONE;
    PyObject *names = PyList_New(0);
    for (const ShardPyChoice *c = row->choices; names && c->name; c++) {
        PyObject *s = c->hidden ? NULL : PyUnicode_FromString(c->name);
        if (!c->hidden && (!s || PyList_Append(names, s)))
            Py_CLEAR(names);
        Py_XDECREF(s);
    }
    PyObject *t = names ? PyList_AsTuple(names) : NULL;
    Py_XDECREF(names);
    return t;
}

static PyObject *bound(const ShardPySetting *row, unsigned flag, long long v)
{
    if (!(row->flags & flag))
        Py_RETURN_NONE;
    return row->kind == SHARD_PY_REAL ? PyFloat_FromDouble((double)v) : PyLong_FromLongLong(v);
}

/* One row as a dict: name, table, group, type, ctype, default, minimum, maximum, none,
 * choices, count, accepts, doc. */
static PyObject *row_dict(const ShardPyTable *t, const ShardPySetting *row, const void *defaults)
{
    const char *group = (row->flags & SHARD_PY_PLACEMENT) ? "placement" : t->name;
    return Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:N,s:N,s:N,s:O,s:N,s:i,s:z,s:s}", "name",
                         row->name, "table", t->name, "group", group, "type",
                         kind_names[row->kind], "ctype", field_names[row->field], "default",
                         get_value(row, defaults), "minimum", bound(row, SHARD_PY_MIN, row->min),
                         "maximum", bound(row, SHARD_PY_MAX, row->max), "none",
                         (row->flags & SHARD_PY_NONE) ? Py_True : Py_False, "choices",
                         choice_names(row), "count", row->count, "accepts", row->accepts,
                         "doc", row->doc);
}

static PyObject *table_rows(const ShardPyTable *t)
{
    void *defaults = PyMem_Calloc(1, t->size);
    if (!defaults)
        return PyErr_NoMemory();
    t->defaults(defaults);
    PyObject *rows = PyTuple_New((Py_ssize_t)t->nrows);
    for (size_t i = 0; rows && i < t->nrows; i++) {
        PyObject *d = row_dict(t, &t->rows[i], defaults);
        if (d)
            PyTuple_SET_ITEM(rows, (Py_ssize_t)i, d);
        else
            Py_CLEAR(rows);
    }
    PyMem_Free(defaults);
    return rows;
}

static const ShardPyTable *const tables[] = {
    &shard_py_reader_table, &shard_py_remote_table, &shard_py_bucket_table, &shard_py_loader_table,
    &shard_py_transform_table, &shard_py_output_table, &shard_py_upload_table,
    &shard_py_writer_table, &shard_py_pack_table, &shard_py_reader_batch_table,
};

static PyObject *py_settings(PyObject *m, PyObject *unused)
{
    (void)m, (void)unused;
    PyObject *out = PyDict_New();
    for (size_t i = 0; out && i < sizeof tables / sizeof *tables; i++) {
        PyObject *rows = table_rows(tables[i]);
        if (!rows || PyDict_SetItemString(out, tables[i]->name, rows))
            Py_CLEAR(out);
        Py_XDECREF(rows);
    }
    return out;
}

static int index_of(const char *const *names, int n, PyObject *s)
{
    for (int i = 0; s && PyUnicode_Check(s) && i < n; i++)
        if (!PyUnicode_CompareWithASCIIString(s, names[i]))
            return i;
    return -1;
}

/* A row as settings() gives it (or one made from it in Python) back into the C form, for
 * its check; choices borrowed from the dict's tuple into *choices (PyMem). */
static int row_from_dict(PyObject *d, ShardPySetting *row, ShardPyChoice **choices)
{
    memset(row, 0, sizeof *row);
    PyObject *name = PyDict_Check(d) ? PyDict_GetItemString(d, "name") : NULL;
    int kind = index_of(kind_names, SHARD_PY_KINDS, PyDict_GetItemString(d, "type"));
    int field = index_of(field_names, SHARD_PY_FIELDS, PyDict_GetItemString(d, "ctype"));
    PyObject *lo = PyDict_GetItemString(d, "minimum"), *hi = PyDict_GetItemString(d, "maximum");
    PyObject *ch = PyDict_GetItemString(d, "choices"), *count = PyDict_GetItemString(d, "count");
    PyObject *accepts = PyDict_GetItemString(d, "accepts"), *none = PyDict_GetItemString(d, "none");
    if (!name || !PyUnicode_Check(name) || kind < 0 || field < 0) {
        PyErr_Format(PyExc_TypeError, "check_setting: a row as settings() gives it, not %R", d);
        return -1;
    }
    row->name = PyUnicode_AsUTF8(name);
    row->kind = (ShardPyKind)kind;
    row->field = (ShardPyField)field;
    row->flags = (none && PyObject_IsTrue(none) ? SHARD_PY_NONE : 0) |
                 (lo && lo != Py_None ? SHARD_PY_MIN : 0) |
                 (hi && hi != Py_None ? SHARD_PY_MAX : 0);
    row->min = lo && lo != Py_None ? (long long)PyFloat_AsDouble(lo) : 0;
    row->max = hi && hi != Py_None ? (long long)PyFloat_AsDouble(hi) : 0;
    row->count = count ? (int)PyLong_AsLong(count) : 0;
    row->accepts = accepts && accepts != Py_None ? PyUnicode_AsUTF8(accepts) : NULL;
    Py_ssize_t n = ch && PyTuple_Check(ch) ? PyTuple_GET_SIZE(ch) : 0;
    if (!(*choices = PyMem_Calloc((size_t)n + 1, sizeof **choices)))
        return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!((*choices)[i].name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(ch, i))))
            return -1;
    row->choices = *choices;
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *py_check_setting(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *d, *v;
    if (!PyArg_ParseTuple(args, "OO", &d, &v))
        return NULL;
    ShardPySetting row;
    ShardPyChoice *choices = NULL;
    PyObject *out = row_from_dict(d, &row, &choices) ? NULL : shard_py_setting_check(&row, v);
    PyMem_Free(choices);
    return out;
}

static PyMethodDef settings_functions[] = {
    {"settings", py_settings, METH_NOARGS,
     "settings() -> {table: (row, ...)}: every setting the extension takes, one table per C "
     "settings struct; a row is a dict of name, table, group ('placement' for where the "
     "consumer is), type, ctype, default (the C default), minimum, maximum, none (None "
     "accepted), choices, count, accepts and doc"},
    {"check_setting", py_check_setting, METH_VARARGS,
     "check_setting(row, value) -> the value normalized (an int, bool, float, str or tuple), "
     "or TypeError / ValueError naming the setting: the check the extension makes"},
    {NULL, NULL, 0, NULL},
};

int shard_py_settings_ready(PyObject *m)
{
    return PyModule_AddFunctions(m, settings_functions);
}
