/*
 * hdmlp.Dataset: an open packed dataset (hdmlp_dataset_*), map-style random access.
 *
 * The handle is immutable and thread-safe in C; the object counts calls in progress with
 * the GIL released (`busy`) and live loaders (`users`) so close() cannot pull the handle
 * from under them.
 * Sample access is in py_dataset_read.c, the properties in py_dataset_props.c.
 */
#include "py_dataset.h"

#include <stdlib.h>

#include <structmember.h>

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
    {"read", (PyCFunction)py_dataset_read, METH_O,
     "read(i) -> bytes: sample i's raw bytes (verified, decompressed); same as ds[i]."},
    {"read_into", (PyCFunction)py_dataset_read_into, METH_VARARGS,
     "read_into(i, buffer) -> int: reads sample i into a writable buffer, returns its size."},
    {"info", (PyCFunction)py_dataset_info, METH_O,
     "info(i) -> dict: index, chunk, slot, label, label_name, raw_size, stored_size, codec, "
     "key (bytes) and name (str) of sample i."},
    {"find", (PyCFunction)py_dataset_find, METH_O,
     "find(key) -> int: index of the first sample whose original name is key (str or "
     "bytes); KeyError if none. Linear in the sample count."},
    {"largest_batch_bytes", (PyCFunction)py_dataset_largest_batch_bytes, METH_O,
     "largest_batch_bytes(n) -> raw bytes of the n largest samples together."},
    {"verify", (PyCFunction)py_dataset_verify, METH_NOARGS,
     "verify(): checks every chunk header and sample checksum; raises CorruptDataError or "
     "StorageError naming the first bad one."},
    {"close", (PyCFunction)dataset_close, METH_NOARGS,
     "close(): closes the dataset (StateError while loaders use it). Idempotent."},
    {"__enter__", dataset_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)dataset_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
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
        {Py_tp_getset, (void *)py_dataset_getset},
        {Py_tp_members, (void *)dataset_members},
        PY_SLOT(Py_mp_length, dataset_len),
        PY_SLOT(Py_mp_subscript, py_dataset_subscript),
        PY_SLOT(Py_sq_length, dataset_len),
        PY_SLOT(Py_sq_item, py_dataset_item),
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
