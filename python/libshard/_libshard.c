/*
 * libshard._libshard — the CPython binding, this file its module: the image functions
 * (decode, crop_box, decode_rgb, resize_rgb, cpus_available) and the module's assembly from
 * the files that define its types, each a layer over _common.c (ShardError, Python values of
 * samples, batches and statistics, shard specs):
 *   _tables.c                  the settings tables, one per C settings struct
 *   _settings.c, _args.c,      a row's check and store, a call's keywords parsed by its
 *   _describe.c                tables, the tables as Python data (settings(), check_setting())
 *   _stream.c                  what Reader and Loader share (uses the settings)
 *   _reader.c                  Reader (uses _stream.c)
 *   _indexed.c                 ShardFiles, list_shards
 *   _tarmembers.c              TarMembers
 *   _rawstream.c               RawStream (uses _tarmembers.c: members())
 *   _crossing.c                Ring, RingView (shared memory a DataLoader worker's bytes
 *                              cross to the main process through)
 *   _gpu.c                     Gpu
 *   _loader.c                  Loader, Batch (uses _stream.c, and _gpu.c for pinned memory)
 *   _upload.c                  Uploader, DeviceBatch, DeviceArray (uses _gpu.c, _loader.c)
 *   _writer.c, _pack.c         Writer, PackPlan (uses _writer.c's info dicts)
 * Each uses only those above it in this list: no two call each other (tests/python/
 * test_layout.py).
 *
 * The GIL is released around every call that waits or decodes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stdlib.h>

#include <shard/shard.h>

#include "_common.h"
#include "_crossing.h"
#include "_gpu.h"
#include "_indexed.h"
#include "_loader.h"
#include "_steps.h"
#include "_pack.h"
#include "_rawstream.h"
#include "_reader.h"
#include "_settings.h"
#include "_tarmembers.h"
#include "_upload.h"
#include "_writer.h"

static PyObject *py_decode_rgb(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"data", "planar", "rgbx", NULL};
    Py_buffer in;
    int planar = 0, rgbx = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|$pp:decode_rgb", kwlist, &in, &planar, &rgbx))
        return NULL;
    if (planar && rgbx) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "decode_rgb: planar or rgbx, not both");
        return NULL;
    }
    unsigned char *out;
    int w, h, rc;
    char msg[256] = "";
    Py_BEGIN_ALLOW_THREADS
    rc = rgbx ? shard_decode_rgbx(in.buf, (size_t)in.len, &out, &w, &h, msg, sizeof msg)
              : shard_decode_rgb(in.buf, (size_t)in.len, &out, &w, &h, msg, sizeof msg);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    if (rc)
        return shard_py_raise(rc, msg);
    PyObject *b = PyBytes_FromStringAndSize(planar ? NULL : (const char *)out,
                                            (Py_ssize_t)w * h * (rgbx ? 4 : 3));
    if (b && planar)
        shard_rgb_planar(out, w, h, (unsigned char *)PyBytes_AS_STRING(b));
    free(out);
    if (!b)
        return NULL;
    return Py_BuildValue("(Nii)", b, w, h);
}

/* The transform decode and crop_box take: the output table's width and height and the
 * transform table's rows their signature names, over the defaults; the seed (masked to 64
 * bits, as it always was) into *seed. values[] receives the other parameters. */
static int parse_transform(const ShardPySignature *sig, PyObject *args, PyObject *kw,
                           ShardTransform *t, PyObject **values, int seed_at,
                           unsigned long long *seed)
{
    shard_transform_default_settings(t);
    t->layout = SHARD_LAYOUT_NHWC; /* decode's bytes come out as PIL's */
    ShardPyTarget targets[] = {{&shard_py_output_table, t}, {&shard_py_transform_table, t}};
    PyObject *keep = NULL;
    int rc = shard_py_parse(sig, args, kw, targets, 2, values, &keep);
    Py_XDECREF(keep); /* no strings in a transform */
    *seed = 0;
    if (!rc && values[seed_at]) {
        *seed = PyLong_AsUnsignedLongLongMask(values[seed_at]);
        rc = PyErr_Occurred() ? -1 : 0;
    }
    return rc;
}

static const char *const decode_params[] = {"data", "width", "height", "crop", "fast", "flip",
                                            "seed", "layout", "scale", "ratio", NULL};
static const ShardPySignature decode_signature = {"decode", decode_params, 10, 1, 1};

static PyObject *py_decode(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    PyObject *values[10];
    ShardTransform t;
    unsigned long long seed;
    Py_buffer in;
    if (parse_transform(&decode_signature, args, kw, &t, values, 6, &seed) ||
        PyObject_GetBuffer(values[0], &in, PyBUF_SIMPLE))
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)shard_transform_output_size(&t));
    if (!out) {
        PyBuffer_Release(&in);
        return NULL;
    }
    char msg[256] = "";
    int rc;
    char *dst = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    rc = shard_decode_transform(in.buf, (size_t)in.len, &t, seed, dst, msg, sizeof msg);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    if (rc) {
        Py_DECREF(out);
        return shard_py_raise(rc, msg);
    }
    return out;
}

static const char *const box_params[] = {"image_width", "image_height", "width", "height",
                                         "crop", "flip", "seed", "scale", "ratio", NULL};
static const ShardPySignature box_signature = {"crop_box", box_params, 9, 2, 1};

static int int_arg(PyObject *o, int *out)
{
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "an image side past the int range");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static PyObject *py_crop_box(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    PyObject *values[9];
    ShardTransform t;
    unsigned long long seed;
    int iw, ih;
    if (parse_transform(&box_signature, args, kw, &t, values, 6, &seed) ||
        int_arg(values[0], &iw) || int_arg(values[1], &ih))
        return NULL;
    double box[4];
    int flipped;
    int rc = shard_transform_box(&t, iw, ih, seed, box, &flipped);
    if (rc)
        return shard_py_raise(rc, "crop_box: the image size must be positive");
    return Py_BuildValue("(dddd)O", box[0], box[1], box[2], box[3], flipped ? Py_True : Py_False);
}

static PyObject *py_resize_rgb(PyObject *m, PyObject *args)
{
    (void)m;
    Py_buffer in;
    int w, h, ow, oh;
    double x0, y0, bw, bh;
    if (!PyArg_ParseTuple(args, "y*ii(dddd)ii", &in, &w, &h, &x0, &y0, &bw, &bh, &ow, &oh))
        return NULL;
    if (in.len != (Py_ssize_t)w * h * 3) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "data is not w * h * 3 bytes");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)ow * oh * 3);
    if (!out) {
        PyBuffer_Release(&in);
        return NULL;
    }
    int rc = shard_resize_rgb(in.buf, w, h, x0, y0, bw, bh, (unsigned char *)PyBytes_AS_STRING(out),
                              ow, oh);
    PyBuffer_Release(&in);
    if (rc) {
        Py_DECREF(out);
        return shard_py_raise(rc, "resize: bad box or sizes");
    }
    return out;
}

static PyObject *py_cpus_available(PyObject *m, PyObject *unused)
{
    (void)m, (void)unused;
    return PyLong_FromLong(shard_cpus_available());
}

static PyObject *py_image_geometry(PyObject *m, PyObject *arg)
{
    (void)m;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    int w = 0, h = 0;
    size_t need = 0;
    char msg[256];
    int rc = shard_image_geometry(b.buf, (size_t)b.len, &w, &h, &need, msg, sizeof msg);
    PyBuffer_Release(&b);
    if (rc == SHARD_AGAIN)
        return PyLong_FromSize_t(need);
    if (rc)
        return shard_py_raise(rc, msg);
    return Py_BuildValue("(ii)", w, h);
}

typedef struct {
    const char *url, *idx, *cols;
    int skip, rc;
    ShardGeometryStats st;
    ShardError err;
} GeometryBuild;

static int geometry_build_fn(void *arg)
{
    GeometryBuild *g = arg;
    g->rc = shard_geometry_build(g->url, g->idx, g->cols, NULL, g->skip, &g->st, &g->err);
    return 0;
}

static PyObject *py_geometry_build(PyObject *m, PyObject *args, PyObject *kw)
{
    (void)m;
    static char *kwlist[] = {"url", "idx_url", "cols_path", "skip_errors", NULL};
    GeometryBuild g = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zzp:geometry_build", kwlist, &g.url, &g.idx,
                                     &g.cols, &g.skip))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    geometry_build_fn(&g);
    Py_END_ALLOW_THREADS
    if (g.rc)
        return shard_py_raise(g.rc, g.err.message);
    return Py_BuildValue("{s:K,s:K,s:K}", "samples", (unsigned long long)g.st.samples,
                         "bytes_read", (unsigned long long)g.st.bytes_read, "skipped",
                         (unsigned long long)g.st.skipped);
}

static PyObject *py_merge_states(PyObject *m, PyObject *arg)
{
    (void)m;
    PyObject *seq = PySequence_Fast(arg, "merge_states takes a list of states (str)");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const char **states = PyMem_Calloc(n ? (size_t)n : 1, sizeof *states);
    char *buf = PyMem_Malloc(SHARD_READER_STATE_MAX);
    PyObject *out = NULL;
    if (!states || !buf) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(states[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i))))
            goto done;
    ShardError err;
    int rc = shard_reader_state_merge(states, (size_t)n, buf, SHARD_READER_STATE_MAX, &err);
    out = rc ? shard_py_raise(rc, err.message) : PyUnicode_FromString(buf);
done:
    PyMem_Free(states);
    PyMem_Free(buf);
    Py_DECREF(seq);
    return out;
}

static PyObject *py_url_display(PyObject *m, PyObject *arg)
{
    (void)m;
    const char *url = PyUnicode_AsUTF8(arg);
    if (!url)
        return NULL;
    size_t n = strlen(url) + 1;
    char *out = PyMem_Malloc(n);
    if (!out)
        return PyErr_NoMemory();
    shard_url_display(url, out, n);
    PyObject *s = PyUnicode_FromString(out);
    PyMem_Free(out);
    return s;
}

static PyMethodDef module_methods[] = {
    {"url_display", py_url_display, METH_O,
     "url_display(url) -> str: the URL as libshard shows it in messages and output: no user, "
     "password or query (shard_url_display)"},
    {"merge_states", py_merge_states, METH_O,
     "merge_states([state, ...]) -> str: one state from those of a job's consumers taken at "
     "the same point, each partition as the consumer that reads it says "
     "(shard_reader_state_merge)"},
    {"image_geometry", py_image_geometry, METH_O,
     "image_geometry(data) -> (width, height) from the header alone (JPEG, PNG, WebP; as "
     "PIL's Image.size), or an int: the bytes to read before asking again, when data ends "
     "before the header does (shard_image_geometry)"},
    {"geometry_build", (PyCFunction)(void (*)(void))py_geometry_build,
     METH_VARARGS | METH_KEYWORDS,
     "geometry_build(url, idx_url=None, cols_path=None, skip_errors=False) -> {samples, "
     "bytes_read, skipped}: the columns beside a shard's index (its images' sizes) from each "
     "image's header alone, read by range (shard_geometry_build)"},
    {"cpus_available", py_cpus_available, METH_NOARGS,
     "cpus_available() -> int: the CPUs this process may use (affinity, cgroup quota): what "
     "threads=0 starts"},
    {"decode_rgb", (PyCFunction)(void (*)(void))py_decode_rgb, METH_VARARGS | METH_KEYWORDS,
     "decode_rgb(data, *, planar=False, rgbx=False) -> (bytes, width, height): full RGB "
     "decode, interleaved (HWC), planar (CHW), or RGBX (a JPEG's, four bytes a pixel)"},
    {"decode", (PyCFunction)(void (*)(void))py_decode, METH_VARARGS | METH_KEYWORDS,
     "decode(data, width, height, crop, fast, flip, seed=0, layout='nhwc', scale, ratio) -> "
     "bytes: one image decoded and transformed as a Loader's are (the settings' defaults are "
     "the transform table's: libshard.settings)"},
    {"crop_box", (PyCFunction)(void (*)(void))py_crop_box, METH_VARARGS | METH_KEYWORDS,
     "crop_box(image_width, image_height, width, height, crop, flip, seed=0, scale, ratio) -> "
     "((x, y, w, h), flipped): the box and mirroring decode draws for an image of that size "
     "with that seed"},
    {"resize_rgb", py_resize_rgb, METH_VARARGS,
     "resize_rgb(data, w, h, (x0, y0, bw, bh), out_w, out_h) -> bytes (PIL BILINEAR)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_libshard", "libshard's C core.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__libshard(void);
PyMODINIT_FUNC PyInit__libshard(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (shard_py_common_ready(m) || shard_py_settings_ready(m) || shard_py_reader_ready(m) ||
        shard_py_indexed_ready(m) || shard_py_tarmembers_ready(m) ||
        shard_py_crossing_ready(m) ||
        shard_py_rawstream_ready(m) || shard_py_gpu_ready(m) ||
        shard_py_loader_ready(m) || shard_py_steps_ready(m) || shard_py_upload_ready(m) || shard_py_writer_ready(m) ||
        shard_py_pack_ready(m) ||
        PyModule_AddStringConstant(m, "version", shard_version())) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
