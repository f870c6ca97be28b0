/*
 * libshard._libshard, a call's arguments (shard_py_parse, _settings.h): its own parameters,
 * by position or keyword, and its settings, each found in the call's tables and checked
 * and stored by its row.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "_settings.h"

static const ShardPySetting *find_row(const ShardPyTarget *targets, size_t ntargets,
                                      const char *name, void **base)
{
    for (size_t t = 0; t < ntargets; t++)
        for (size_t i = 0; i < targets[t].table->nrows; i++)
            if (!strcmp(targets[t].table->rows[i].name, name)) {
                *base = targets[t].base;
                return &targets[t].table->rows[i];
            }
    return NULL;
}

static int param_index(const ShardPySignature *sig, PyObject *key)
{
    for (int i = 0; sig->params[i]; i++)
        if (!PyUnicode_CompareWithASCIIString(key, sig->params[i]))
            return i;
    return -1;
}

/* The keyword arguments: own parameters into values[], settings checked and stored. */
static int parse_keywords(const ShardPySignature *sig, PyObject *kw, const ShardPyTarget *targets,
                          size_t ntargets, PyObject **values, PyObject *keep)
{
    Py_ssize_t pos = 0;
    PyObject *key, *v;
    while (kw && PyDict_Next(kw, &pos, &key, &v)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!name) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s(): keywords must be str, not %R", sig->name, key);
            return -1;
        }
        int i = param_index(sig, key);
        void *base;
        const ShardPySetting *row = i < 0 && !sig->params_only
                                        ? find_row(targets, ntargets, name, &base) : NULL;
        if (i >= 0 && values[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'",
                         sig->name, name);
            return -1;
        } else if (i >= 0) {
            values[i] = v;
        } else if (!row) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'",
                         sig->name, name);
            return -1;
        } else if (shard_py_setting_set(row, v, base, keep)) {
            return -1;
        }
    }
    return 0;
}

int shard_py_parse(const ShardPySignature *sig, PyObject *args, PyObject *kw,
                   const ShardPyTarget *targets, size_t ntargets, PyObject **values,
                   PyObject **keep)
{
    int n = 0;
    while (sig->params[n])
        values[n++] = NULL;
    if (!(*keep = PyList_New(0)))
        return -1;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs > sig->npositional) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional argument%s (%zd given)",
                     sig->name, sig->npositional, sig->npositional == 1 ? "" : "s", nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        values[i] = PyTuple_GET_ITEM(args, i);
    if (parse_keywords(sig, kw, targets, ntargets, values, *keep))
        return -1;
    for (int i = 0; i < n; i++) {
        void *base;
        const ShardPySetting *row = find_row(targets, ntargets, sig->params[i], &base);
        if (!values[i] && i < sig->nrequired) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)",
                         sig->name, sig->params[i], i + 1);
            return -1;
        }
        if (values[i] && row) {
            if (shard_py_setting_set(row, values[i], base, *keep))
                return -1;
            values[i] = NULL;
        }
    }
    return 0;
}

