/*
 * hdmlp.Dataset, properties: the dataset's figures, label names and the labels array, and
 * largest_batch_bytes (see py_dataset.c).
 */
#include "py_dataset.h"

#include <stdlib.h>

/* ---- properties ---- */

#define DS_OR_NULL(self)                                                                       \
    hdmlp_dataset *ds = py_dataset_handle(state_of((PyObject *)(self)), (self));               \
    if (ds == NULL) {                                                                          \
        return NULL;                                                                           \
    }

static PyObject *get_chunk_size(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    return PyLong_FromUnsignedLong(hdmlp_dataset_chunk_size(ds));
}

static PyObject *get_chunk_count(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    return PyLong_FromUnsignedLongLong(hdmlp_dataset_chunk_count(ds));
}

static PyObject *get_segment_count(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    return PyLong_FromUnsignedLong(hdmlp_dataset_segment_count(ds));
}

static PyObject *get_seed(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    return PyLong_FromUnsignedLongLong(hdmlp_dataset_seed(ds));
}

static PyObject *get_raw_bytes(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    return PyLong_FromUnsignedLongLong(hdmlp_dataset_raw_bytes(ds));
}

static PyObject *get_stored_bytes(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    return PyLong_FromUnsignedLongLong(hdmlp_dataset_stored_bytes(ds));
}

static PyObject *get_classes(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    const uint32_t n = hdmlp_dataset_label_count(ds);
    PyObject *list = PyList_New(n);
    for (uint32_t i = 0; list != NULL && i < n; i++) {
        PyObject *s = py_dataset_label_str(ds, i);
        if (s == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, s);
    }
    return list;
}

static PyObject *get_class_to_idx(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    const uint32_t n = hdmlp_dataset_label_count(ds);
    PyObject *d = PyDict_New();
    for (uint32_t i = 0; d != NULL && i < n; i++) {
        PyObject *s = py_dataset_label_str(ds, i);
        PyObject *v = PyLong_FromUnsignedLong(i);
        if (s == NULL || v == NULL || PyDict_SetItem(d, s, v) < 0) {
            Py_CLEAR(d);
        }
        Py_XDECREF(s);
        Py_XDECREF(v);
    }
    return d;
}

static PyObject *get_labels(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    if (self->labels != NULL) {
        return Py_NewRef(self->labels);
    }
    py_state *st = state_of((PyObject *)self);
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    if (n > (uint64_t)PY_SSIZE_T_MAX / 8) {
        return PyErr_NoMemory();
    }
    PyObject *raw = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (raw == NULL) {
        return NULL;
    }
    int64_t *p = (int64_t *)PyBytes_AS_STRING(raw);
    int rc = HDMLP_OK;
    self->busy++;
    PyThreadState *ts = PyEval_SaveThread(); /* version 2 reads the chunks' tables */
    for (uint64_t i = 0; i < n && rc == HDMLP_OK; i++) {
        hdmlp_sample_info in;
        rc = hdmlp_dataset_sample_info(ds, i, &in);
        p[i] = rc == HDMLP_OK ? in.label : 0;
    }
    PyEval_RestoreThread(ts);
    self->busy--;
    if (rc != HDMLP_OK) {
        Py_DECREF(raw);
        return py_raise(st, rc, "labels", NULL);
    }
    self->labels = PyObject_CallFunction(st->array_type, "sO", "q", raw);
    Py_DECREF(raw);
    return Py_XNewRef(self->labels);
}

static int cmp_desc(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

/* largest_batch_bytes(n): raw bytes of the n largest samples together (the most a batch of
 * n samples can hold) */
PyObject *py_dataset_largest_batch_bytes(DatasetObject *self, PyObject *arg)
{
    DS_OR_NULL(self);
    py_state *st = state_of((PyObject *)self);
    uint64_t want = 0;
    if (py_arg_u64(st, arg, "n", &want) < 0) {
        return NULL;
    }
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    uint64_t *sizes = malloc((n > 0 ? n : 1) * sizeof(*sizes));
    if (sizes == NULL) {
        return PyErr_NoMemory();
    }
    int rc = HDMLP_OK;
    self->busy++;
    PyThreadState *ts = PyEval_SaveThread(); /* version 2 reads the chunks' tables */
    for (uint64_t i = 0; i < n && rc == HDMLP_OK; i++) {
        hdmlp_sample_info in;
        rc = hdmlp_dataset_sample_info(ds, i, &in);
        sizes[i] = rc == HDMLP_OK ? in.raw_size : 0;
    }
    PyEval_RestoreThread(ts);
    self->busy--;
    if (rc != HDMLP_OK) {
        free(sizes);
        return py_raise(st, rc, "largest_batch_bytes", NULL);
    }
    qsort(sizes, n, sizeof(*sizes), cmp_desc);
    uint64_t total = 0;
    for (uint64_t i = 0; i < n && i < want; i++) {
        total += sizes[i];
    }
    free(sizes);
    return PyLong_FromUnsignedLongLong(total);
}

static PyObject *get_path(DatasetObject *self, void *c)
{
    (void)c;
    return Py_NewRef(self->path);
}

static PyObject *get_closed(DatasetObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->ds == NULL);
}

/* The dataset's fields: a list of dicts (name, type, dtype, shape, required, label). */
static PyObject *get_fields(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    static const char *const types[] = {"bytes",   "text",    "json",    "int64",
                                        "float32", "float64", "ndarray", "image"};
    static const char *const dtypes[] = {NULL,    "uint8",   "int8",    "uint16",
                                         "int16", "uint32",  "int32",   "uint64",
                                         "int64", "float16", "float32", "float64"};
    const uint32_t nf = hdmlp_dataset_field_count(ds);
    PyObject *list = PyList_New(nf);
    for (uint32_t f = 0; list != NULL && f < nf; f++) {
        hdmlp_field_info in;
        hdmlp_dataset_field(ds, f, &in);
        PyObject *shape = PyTuple_New(in.ndim);
        for (uint32_t d = 0; shape != NULL && d < in.ndim; d++) {
            PyTuple_SET_ITEM(shape, d,
                             in.shape[d] ? PyLong_FromUnsignedLong(in.shape[d])
                                         : Py_NewRef(Py_None));
        }
        PyObject *name = PyUnicode_DecodeUTF8(in.name, in.name_size, "surrogateescape");
        const char *dtype = in.dtype < 12 ? dtypes[in.dtype] : NULL;
        PyObject *d =
            shape != NULL && name != NULL
                ? Py_BuildValue("{s:O,s:s,s:z,s:O,s:O,s:O}", "name", name, "type",
                                in.type < 8 ? types[in.type] : "unknown", "dtype", dtype,
                                "shape", shape, "required", in.required ? Py_True : Py_False,
                                "label", in.is_label ? Py_True : Py_False)
                : NULL;
        Py_XDECREF(shape);
        Py_XDECREF(name);
        if (d == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, f, d);
    }
    return list;
}

static PyObject *get_field_records(DatasetObject *self, void *c)
{
    (void)c;
    DS_OR_NULL(self);
    return PyBool_FromLong(hdmlp_dataset_field_records(ds));
}

PyGetSetDef py_dataset_getset[] = {
    {"fields", (getter)get_fields, NULL,
     "The dataset's fields: a list of dicts (name, type, dtype, shape, required, label).",
     NULL},
    {"field_records", (getter)get_field_records, NULL,
     "True when samples are delivered as field records (hdmlp.sample_fields reads them), "
     "False when as their one value's bytes.",
     NULL},
    {"path", (getter)get_path, NULL, "The path the dataset was opened with.", NULL},
    {"closed", (getter)get_closed, NULL, "True once closed.", NULL},
    {"chunk_size", (getter)get_chunk_size, NULL, "Samples per chunk (K).", NULL},
    {"chunk_count", (getter)get_chunk_count, NULL, "Number of chunks.", NULL},
    {"segment_count", (getter)get_segment_count, NULL, "Number of segment files.", NULL},
    {"seed", (getter)get_seed, NULL, "Seed the packer shuffled with.", NULL},
    {"raw_bytes", (getter)get_raw_bytes, NULL, "Sum of raw (decompressed) sample sizes.", NULL},
    {"stored_bytes", (getter)get_stored_bytes, NULL, "Sum of stored sample sizes.", NULL},
    {"classes", (getter)get_classes, NULL, "Label names (list of str), by label number.", NULL},
    {"class_to_idx", (getter)get_class_to_idx, NULL, "Dict label name -> label number.", NULL},
    {"labels", (getter)get_labels, NULL, "array('q') of every sample's label, packed order.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
