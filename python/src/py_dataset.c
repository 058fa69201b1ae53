/*
 * hdmlp.Dataset: an open packed dataset (hdmlp_dataset_*), map-style random access.
 *
 * The handle is immutable and thread-safe in C; the object counts calls in progress with
 * the GIL released (`busy`) and live loaders (`users`) so close() cannot pull the handle
 * from under them.
 */
#include "py_internal.h"

#include <stdlib.h>

#include <structmember.h>

hdmlp_dataset *py_dataset_handle(py_state *st, DatasetObject *self)
{
    if (self->ds == NULL) {
        PyErr_SetString(st->StateError, "dataset is closed");
        return NULL;
    }
    return self->ds;
}

static py_state *state_of(PyObject *self) { return py_state_from_type(Py_TYPE(self)); }

static PyObject *dataset_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", NULL};
    PyObject *path = NULL;
    PyObject *fspath = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Dataset", kwlist, &path)) {
        return NULL;
    }
    if (!PyUnicode_FSConverter(path, &fspath)) {
        return NULL;
    }
    py_state *st = py_state_from_type(type);
    DatasetObject *self = (DatasetObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(fspath);
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(fspath);
    hdmlp_dataset *ds = NULL;
    int rc;
    char detail[1024] = "";
    PyThreadState *ts = PyEval_SaveThread();
    rc = hdmlp_dataset_open(p, &ds);
    if (rc != HDMLP_OK) {
        snprintf(detail, sizeof(detail), "%s", hdmlp_last_error());
    }
    PyEval_RestoreThread(ts);
    if (rc != HDMLP_OK) {
        PyObject *ctx = PyUnicode_FromFormat("Dataset(%R)", path);
        if (ctx != NULL) {
            py_raise(st, rc, PyUnicode_AsUTF8(ctx), detail);
            Py_DECREF(ctx);
        }
        Py_DECREF(fspath);
        Py_DECREF(self);
        return NULL;
    }
    Py_DECREF(fspath);
    self->ds = ds;
    self->path = Py_NewRef(path);
    return (PyObject *)self;
}

static int dataset_traverse(DatasetObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->path);
    Py_VISIT(self->labels);
    return 0;
}

static int dataset_clear(DatasetObject *self)
{
    Py_CLEAR(self->path);
    Py_CLEAR(self->labels);
    return 0;
}

static void dataset_dealloc(DatasetObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    /* No call can be in progress (callers hold a reference) and loaders hold one too. */
    hdmlp_dataset_close(self->ds);
    self->ds = NULL;
    dataset_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *dataset_close(DatasetObject *self, PyObject *unused)
{
    (void)unused;
    py_state *st = state_of((PyObject *)self);
    if (self->users > 0) {
        return PyErr_Format(st->StateError,
                            "cannot close the dataset: %zd loader(s) still use it; close or "
                            "delete them first",
                            self->users);
    }
    if (self->busy > 0) {
        return PyErr_Format(st->StateError,
                            "cannot close the dataset: %zd call(s) on it are in progress in "
                            "other threads",
                            self->busy);
    }
    hdmlp_dataset_close(self->ds);
    self->ds = NULL;
    Py_RETURN_NONE;
}

static PyObject *dataset_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *dataset_exit(DatasetObject *self, PyObject *args)
{
    (void)args;
    PyObject *r = dataset_close(self, NULL);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static Py_ssize_t dataset_len(DatasetObject *self)
{
    hdmlp_dataset *ds = py_dataset_handle(state_of((PyObject *)self), self);
    if (ds == NULL) {
        return -1;
    }
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    if (n > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "dataset has more samples than Py_ssize_t holds");
        return -1;
    }
    return (Py_ssize_t)n;
}

/* Converts a Python index (negative counts from the end) into a sample number. */
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

static PyObject *read_sample(DatasetObject *self, uint64_t index)
{
    py_state *st = state_of((PyObject *)self);
    hdmlp_sample_info info;
    int rc = hdmlp_dataset_sample_info(self->ds, index, &info);
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

static PyObject *dataset_subscript(DatasetObject *self, PyObject *key)
{
    uint64_t index = 0;
    if (sample_index(self, key, &index) < 0) {
        return NULL;
    }
    return read_sample(self, index);
}

static PyObject *dataset_item(DatasetObject *self, Py_ssize_t i)
{
    PyObject *key = PyLong_FromSsize_t(i);
    if (key == NULL) {
        return NULL;
    }
    PyObject *r = dataset_subscript(self, key);
    Py_DECREF(key);
    return r;
}

static PyObject *dataset_read(DatasetObject *self, PyObject *key)
{
    return dataset_subscript(self, key);
}

static PyObject *dataset_read_into(DatasetObject *self, PyObject *args)
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

static PyObject *label_str(hdmlp_dataset *ds, uint32_t label)
{
    size_t size = 0;
    const char *name = hdmlp_dataset_label_name(ds, label, &size);
    if (name == NULL) {
        Py_RETURN_NONE;
    }
    return PyUnicode_DecodeUTF8(name, (Py_ssize_t)size, "surrogateescape");
}

static PyObject *dataset_info(DatasetObject *self, PyObject *key)
{
    py_state *st = state_of((PyObject *)self);
    uint64_t index = 0;
    if (sample_index(self, key, &index) < 0) {
        return NULL;
    }
    hdmlp_sample_info in;
    const int rc = hdmlp_dataset_sample_info(self->ds, index, &in);
    if (rc != HDMLP_OK) {
        return py_raise(st, rc, "info", NULL);
    }
    static const char *const codecs[] = {"none", "zstd", "zstd-dict"};
    PyObject *label_name = label_str(self->ds, in.label);
    PyObject *name = PyUnicode_DecodeUTF8(in.key, in.key_size, "surrogateescape");
    PyObject *d = NULL;
    if (label_name != NULL && name != NULL) {
        d = Py_BuildValue("{s:K,s:K,s:I,s:I,s:O,s:K,s:K,s:s,s:y#,s:O}", "index",
                          (unsigned long long)in.index, "chunk", (unsigned long long)in.chunk,
                          "slot", (unsigned)in.slot, "label", (unsigned)in.label, "label_name",
                          label_name, "raw_size", (unsigned long long)in.raw_size,
                          "stored_size", (unsigned long long)in.stored_size, "codec",
                          in.codec < 3 ? codecs[in.codec] : "unknown", "key", in.key,
                          (Py_ssize_t)in.key_size, "name", name);
    }
    Py_XDECREF(label_name);
    Py_XDECREF(name);
    return d;
}

static PyObject *dataset_find(DatasetObject *self, PyObject *key)
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

static PyObject *dataset_verify(DatasetObject *self, PyObject *unused)
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
        PyObject *s = label_str(ds, i);
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
        PyObject *s = label_str(ds, i);
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
    for (uint64_t i = 0; i < n; i++) {
        hdmlp_sample_info in;
        const int rc = hdmlp_dataset_sample_info(ds, i, &in);
        if (rc != HDMLP_OK) {
            Py_DECREF(raw);
            return py_raise(st, rc, "labels", NULL);
        }
        p[i] = in.label;
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
static PyObject *dataset_largest_batch_bytes(DatasetObject *self, PyObject *arg)
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
    for (uint64_t i = 0; i < n; i++) {
        hdmlp_sample_info in;
        const int rc = hdmlp_dataset_sample_info(ds, i, &in);
        if (rc != HDMLP_OK) {
            free(sizes);
            return py_raise(st, rc, "largest_batch_bytes", NULL);
        }
        sizes[i] = in.raw_size;
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

static PyObject *dataset_repr(DatasetObject *self)
{
    if (self->ds == NULL) {
        return PyUnicode_FromFormat("<hdmlp.Dataset %R (closed)>", self->path);
    }
    return PyUnicode_FromFormat("<hdmlp.Dataset %R: %llu samples, %u per chunk, %u labels>",
                                self->path,
                                (unsigned long long)hdmlp_dataset_sample_count(self->ds),
                                (unsigned)hdmlp_dataset_chunk_size(self->ds),
                                (unsigned)hdmlp_dataset_label_count(self->ds));
}

static PyMethodDef dataset_methods[] = {
    {"read", (PyCFunction)dataset_read, METH_O,
     "read(i) -> bytes: sample i's raw bytes (verified, decompressed); same as ds[i]."},
    {"read_into", (PyCFunction)dataset_read_into, METH_VARARGS,
     "read_into(i, buffer) -> int: reads sample i into a writable buffer, returns its size."},
    {"info", (PyCFunction)dataset_info, METH_O,
     "info(i) -> dict: index, chunk, slot, label, label_name, raw_size, stored_size, codec, "
     "key (bytes) and name (str) of sample i."},
    {"find", (PyCFunction)dataset_find, METH_O,
     "find(key) -> int: index of the first sample whose original name is key (str or "
     "bytes); KeyError if none. Linear in the sample count."},
    {"largest_batch_bytes", (PyCFunction)dataset_largest_batch_bytes, METH_O,
     "largest_batch_bytes(n) -> raw bytes of the n largest samples together."},
    {"verify", (PyCFunction)dataset_verify, METH_NOARGS,
     "verify(): checks every chunk header and sample checksum; raises CorruptDataError or "
     "StorageError naming the first bad one."},
    {"close", (PyCFunction)dataset_close, METH_NOARGS,
     "close(): closes the dataset (StateError while loaders use it). Idempotent."},
    {"__enter__", dataset_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)dataset_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dataset_getset[] = {
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

static PyMemberDef dataset_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(DatasetObject, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(dataset_doc,
             "Dataset(path)\n\nAn open packed dataset (a directory written by hdmlp-pack).\n"
             "len(ds) samples in packed order; ds[i] is sample i's bytes. Thread-safe.\n"
             "Usable as a context manager; close() fails while loaders use it.");

int py_dataset_init_type(PyObject *module, py_state *st)
{
    PyType_Slot dataset_slots[] = {
        {Py_tp_doc, (void *)dataset_doc},
        PY_SLOT(Py_tp_new, dataset_new),
        PY_SLOT(Py_tp_dealloc, dataset_dealloc),
        PY_SLOT(Py_tp_traverse, dataset_traverse),
        PY_SLOT(Py_tp_clear, dataset_clear),
        PY_SLOT(Py_tp_repr, dataset_repr),
        {Py_tp_methods, (void *)dataset_methods},
        {Py_tp_getset, (void *)dataset_getset},
        {Py_tp_members, (void *)dataset_members},
        PY_SLOT(Py_mp_length, dataset_len),
        PY_SLOT(Py_mp_subscript, dataset_subscript),
        PY_SLOT(Py_sq_length, dataset_len),
        PY_SLOT(Py_sq_item, dataset_item),
        {0, NULL},
    };
    PyType_Spec dataset_spec = {
        .name = "hdmlp.Dataset",
        .basicsize = sizeof(DatasetObject),
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
        .slots = dataset_slots,
    };
    st->DatasetType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &dataset_spec, NULL);
    if (st->DatasetType == NULL) {
        return -1;
    }
    return PyModule_AddType(module, st->DatasetType);
}
