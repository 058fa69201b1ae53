/*
 * hdmlp.Dataset, sample access: ds[i], read, read_into (the GIL released around the read),
 * info, find and verify (see py_dataset.c).
 */
#include "py_dataset.h"

#include <stdlib.h>
#include <string.h>

hdmlp_dataset *py_dataset_handle(py_state *st, DatasetObject *self)
{
    if (self->ds == NULL) {
        PyErr_SetString(st->StateError, "dataset is closed");
        return NULL;
    }
    return self->ds;
}

static int sample_index(DatasetObject *self, PyObject *key, uint64_t *out)
{
    py_state *st = state_of((PyObject *)self);
    hdmlp_dataset *ds = py_dataset_handle(st, self);
    if (ds == NULL) {
        return -1;
    }
    if (!PyIndex_Check(key) || PyBool_Check(key)) {
        PyErr_Format(PyExc_TypeError, "dataset indices must be integers, not %.80s",
                     Py_TYPE(key)->tp_name);
        return -1;
    }
    const Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) {
        return -1;
    }
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    const int64_t signed_n = n > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)n;
    const int64_t u = i < 0 ? (int64_t)i + signed_n : (int64_t)i;
    if (u < 0 || u >= signed_n) {
        PyErr_Format(PyExc_IndexError, "sample index %zd out of range (dataset has %llu)", i,
                     (unsigned long long)n);
        return -1;
    }
    *out = (uint64_t)u;
    return 0;
}

/* hdmlp_dataset_sample_info without the GIL: a version-2 dataset may read the sample's
 * table (and key block) from storage. The error detail stays in this thread's. */
static int info_nogil(DatasetObject *self, uint64_t index, hdmlp_sample_info *info)
{
    hdmlp_dataset *ds = self->ds;
    self->busy++;
    PyThreadState *ts = PyEval_SaveThread();
    const int rc = hdmlp_dataset_sample_info(ds, index, info);
    PyEval_RestoreThread(ts);
    self->busy--;
    return rc;
}

static PyObject *read_sample(DatasetObject *self, uint64_t index)
{
    py_state *st = state_of((PyObject *)self);
    hdmlp_sample_info info;
    int rc = info_nogil(self, index, &info);
    if (rc != HDMLP_OK) {
        return py_raise(st, rc, "read", NULL);
    }
    if (info.raw_size > (uint64_t)PY_SSIZE_T_MAX) {
        return PyErr_NoMemory();
    }
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)info.raw_size);
    if (bytes == NULL) {
        return NULL;
    }
    char *buf = PyBytes_AS_STRING(bytes);
    size_t got = 0;
    char detail[1024] = "";
    hdmlp_dataset *ds = self->ds;
    self->busy++;
    PyThreadState *ts = PyEval_SaveThread();
    rc = hdmlp_dataset_read_sample(ds, index, buf, (size_t)info.raw_size, &got);
    if (rc != HDMLP_OK) {
        snprintf(detail, sizeof(detail), "%s", hdmlp_last_error());
    }
    PyEval_RestoreThread(ts);
    self->busy--;
    if (rc != HDMLP_OK) {
        Py_DECREF(bytes);
        return py_raise(st, rc, "read", detail);
    }
    if (got != info.raw_size) {
        Py_DECREF(bytes);
        return PyErr_Format(st->CorruptDataError,
                            "read: sample %llu decoded to %zu bytes, the index says %llu",
                            (unsigned long long)index, got, (unsigned long long)info.raw_size);
    }
    return bytes;
}

PyObject *py_dataset_subscript(DatasetObject *self, PyObject *key)
{
    uint64_t index = 0;
    if (sample_index(self, key, &index) < 0) {
        return NULL;
    }
    return read_sample(self, index);
}

PyObject *py_dataset_item(DatasetObject *self, Py_ssize_t i)
{
    PyObject *key = PyLong_FromSsize_t(i);
    if (key == NULL) {
        return NULL;
    }
    PyObject *r = py_dataset_subscript(self, key);
    Py_DECREF(key);
    return r;
}

PyObject *py_dataset_read(DatasetObject *self, PyObject *key)
{
    return py_dataset_subscript(self, key);
}

PyObject *py_dataset_read_into(DatasetObject *self, PyObject *args)
{
    PyObject *key = NULL;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Ow*:read_into", &key, &view)) {
        return NULL;
    }
    py_state *st = state_of((PyObject *)self);
    uint64_t index = 0;
    if (sample_index(self, key, &index) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    size_t got = 0;
    char detail[1024] = "";
    hdmlp_dataset *ds = self->ds;
    int rc;
    self->busy++;
    PyThreadState *ts = PyEval_SaveThread();
    rc = hdmlp_dataset_read_sample(ds, index, view.buf, (size_t)view.len, &got);
    if (rc != HDMLP_OK) {
        snprintf(detail, sizeof(detail), "%s", hdmlp_last_error());
    }
    PyEval_RestoreThread(ts);
    self->busy--;
    PyBuffer_Release(&view);
    if (rc == HDMLP_E_RANGE) {
        return py_raise_arg(st, "buffer", "%zd bytes is too small for sample %llu (%zu bytes)",
                            view.len, (unsigned long long)index, got);
    }
    if (rc != HDMLP_OK) {
        return py_raise(st, rc, "read_into", detail);
    }
    return PyLong_FromSize_t(got);
}

PyObject *py_dataset_label_str(hdmlp_dataset *ds, uint32_t label)
{
    size_t size = 0;
    const char *name = hdmlp_dataset_label_name(ds, label, &size);
    if (name == NULL) {
        Py_RETURN_NONE;
    }
    return PyUnicode_DecodeUTF8(name, (Py_ssize_t)size, "surrogateescape");
}

PyObject *py_dataset_info(DatasetObject *self, PyObject *key)
{
    py_state *st = state_of((PyObject *)self);
    uint64_t index = 0;
    if (sample_index(self, key, &index) < 0) {
        return NULL;
    }
    hdmlp_sample_info in;
    const int rc = info_nogil(self, index, &in);
    if (rc != HDMLP_OK) {
        return py_raise(st, rc, "info", NULL);
    }
    static const char *const codecs[] = {"none", "zstd", "zstd-dict"};
    PyObject *label_name = py_dataset_label_str(self->ds, in.label);
    PyObject *name = PyUnicode_DecodeUTF8(in.key, in.key_size, "surrogateescape");
    PyObject *d = NULL;
    if (label_name != NULL && name != NULL) {
        d = Py_BuildValue("{s:K,s:K,s:I,s:I,s:O,s:K,s:K,s:s,s:y#,s:O}", "index",
                          (unsigned long long)in.index, "chunk", (unsigned long long)in.chunk,
                          "slot", (unsigned)in.slot, "label", (unsigned)in.label, "label_name",
                          label_name, "raw_size", (unsigned long long)in.raw_size,
                          "stored_size", (unsigned long long)in.stored_size, "codec",
                          in.codec < 3      ? codecs[in.codec]
                          : in.codec == 255 ? "fields"
                                            : "unknown",
                          "key", in.key, (Py_ssize_t)in.key_size, "name", name);
    }
    Py_XDECREF(label_name);
    Py_XDECREF(name);
    return d;
}

PyObject *py_dataset_find(DatasetObject *self, PyObject *key)
{
    py_state *st = state_of((PyObject *)self);
    hdmlp_dataset *ds = py_dataset_handle(st, self);
    if (ds == NULL) {
        return NULL;
    }
    PyObject *bytes = NULL;
    if (PyUnicode_Check(key)) {
        bytes = PyUnicode_AsEncodedString(key, "utf-8", "surrogateescape");
    } else if (PyBytes_Check(key)) {
        bytes = Py_NewRef(key);
    } else {
        return PyErr_Format(PyExc_TypeError, "find: key must be str or bytes, not %.80s",
                            Py_TYPE(key)->tp_name);
    }
    if (bytes == NULL) {
        return NULL;
    }
    uint64_t index = 0;
    int rc;
    const char *k = PyBytes_AS_STRING(bytes);
    const size_t klen = (size_t)PyBytes_GET_SIZE(bytes);
    self->busy++;
    PyThreadState *ts = PyEval_SaveThread();
    rc = hdmlp_dataset_find_key(ds, k, klen, &index);
    PyEval_RestoreThread(ts);
    self->busy--;
    Py_DECREF(bytes);
    if (rc == HDMLP_E_NOTFOUND) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    if (rc != HDMLP_OK) {
        return py_raise(st, rc, "find", NULL);
    }
    return PyLong_FromUnsignedLongLong(index);
}

PyObject *py_dataset_verify(DatasetObject *self, PyObject *unused)
{
    (void)unused;
    py_state *st = state_of((PyObject *)self);
    hdmlp_dataset *ds = py_dataset_handle(st, self);
    if (ds == NULL) {
        return NULL;
    }
    int rc;
    char detail[1024] = "";
    self->busy++;
    PyThreadState *ts = PyEval_SaveThread();
    rc = hdmlp_dataset_verify(ds, NULL, NULL);
    if (rc != HDMLP_OK) {
        snprintf(detail, sizeof(detail), "%s", hdmlp_last_error());
    }
    PyEval_RestoreThread(ts);
    self->busy--;
    if (rc != HDMLP_OK) {
        return py_raise(st, rc, "verify", detail);
    }
    Py_RETURN_NONE;
}
