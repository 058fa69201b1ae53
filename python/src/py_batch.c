/*
 * hdmlp.Batch: one delivered batch (hdmlp_batch), and _SampleBuffer, the buffer-protocol
 * exporter of one sample.
 *
 * Ownership: a Batch owns its C batch until it is released (release(), or deallocation).
 * Every memoryview of a sample is exported by a _SampleBuffer that holds a strong
 * reference to its Batch, so the C batch outlives every view; `exports` counts the live
 * buffer exports so release() can refuse while views exist. Nothing the Batch holds refers
 * back to it (no cycles: batches are freed by reference counting, promptly), which is why
 * `samples` builds a new list on every access.
 *
 * A Batch inherited by a forked child (DataLoader workers) is never released there: the
 * child has no loader threads and the loader's mutex may be held in the copy.
 *
 * The memory's owner is an hdmlp_batch, or a record of the shared-memory ring of
 * py_ring.c (hdmlp.torch's DataLoader workers): the Batch only calls its release function.
 */
#include "py_internal.h"

#include <string.h>
#include <structmember.h>
#include <unistd.h>

typedef struct SampleBufferObject {
    PyObject ob_base;
    BatchObject *batch;
    Py_ssize_t i;
    int writable;
    int record; /* a field record (Batch.records), not a sample */
} SampleBufferObject;

static const char empty_sample[1] = {0};

static py_state *state_of(PyObject *self) { return py_state_from_type(Py_TYPE(self)); }

/* ---- _SampleBuffer ---- */

static int sb_getbuffer(SampleBufferObject *self, Py_buffer *view, int flags)
{
    BatchObject *b = self->batch;
    if (b->batch == NULL) {
        PyErr_SetString(PyExc_BufferError, "the batch was released");
        view->obj = NULL;
        return -1;
    }
    const hdmlp_sample_view *v = &(self->record ? b->records : b->views)[self->i];
    void *data = v->data != NULL ? (void *)v->data : (void *)empty_sample;
    if (PyBuffer_FillInfo(view, (PyObject *)self, data, (Py_ssize_t)v->size, !self->writable,
                          flags) < 0) {
        return -1;
    }
    b->exports++;
    return 0;
}

static void sb_releasebuffer(SampleBufferObject *self, Py_buffer *view)
{
    (void)view;
    self->batch->exports--;
}

static void sb_dealloc(SampleBufferObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_DECREF(self->batch);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* A memoryview of sample i, or of its field record (0 <= i < n, batch not released). */
static PyObject *sample_view(py_state *st, BatchObject *b, Py_ssize_t i, int writable,
                             int record)
{
    SampleBufferObject *sb = PyObject_New(SampleBufferObject, st->SampleBufferType);
    if (sb == NULL) {
        return NULL;
    }
    sb->batch = (BatchObject *)Py_NewRef(b);
    sb->i = i;
    sb->writable = writable;
    sb->record = record;
    PyObject *mv = PyMemoryView_FromObject((PyObject *)sb);
    Py_DECREF(sb);
    return mv;
}

/* ---- Batch ---- */

static void release_c_batch(void *batch) { hdmlp_batch_release(batch); }

PyObject *py_batch_new(py_state *st, hdmlp_batch *batch)
{
    hdmlp_image_batch image;
    const int has_image = hdmlp_batch_image(batch, &image) == HDMLP_OK;
    BatchObject *b = (BatchObject *)py_batch_wrap(
        st, batch, release_c_batch, (Py_ssize_t)hdmlp_batch_size(batch),
        hdmlp_batch_samples(batch), hdmlp_batch_epoch(batch));
    if (b != NULL && has_image) {
        b->has_image = 1;
        b->image = image;
        b->records = hdmlp_batch_fields(batch);
    }
    return (PyObject *)b;
}

PyObject *py_batch_wrap(py_state *st, void *owner, void (*release)(void *), Py_ssize_t n,
                        const hdmlp_sample_view *views, uint64_t epoch)
{
    BatchObject *self = PyObject_New(BatchObject, st->BatchType);
    if (self == NULL) {
        release(owner);
        return NULL;
    }
    self->batch = owner;
    self->release = release;
    self->views = views;
    self->n = n;
    self->epoch = epoch;
    self->exports = 0;
    self->pid = getpid();
    self->labels = NULL;
    self->indices = NULL;
    self->weakrefs = NULL;
    self->has_image = 0;
    memset(&self->image, 0, sizeof(self->image));
    self->records = NULL;
    return (PyObject *)self;
}

static void batch_dealloc(BatchObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (self->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    if (self->batch != NULL && self->pid == getpid()) {
        self->release(self->batch);
    }
    self->batch = NULL;
    Py_CLEAR(self->labels);
    Py_CLEAR(self->indices);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int check_live(BatchObject *self)
{
    if (self->batch == NULL) {
        PyErr_SetString(state_of((PyObject *)self)->StateError, "the batch was released");
        return -1;
    }
    return 0;
}

static Py_ssize_t batch_len(BatchObject *self) { return self->n; }

static PyObject *batch_item(BatchObject *self, Py_ssize_t i)
{
    if (check_live(self) < 0) {
        return NULL;
    }
    if (i < 0 || i >= self->n) {
        PyErr_SetString(PyExc_IndexError, "batch index out of range");
        return NULL;
    }
    return sample_view(state_of((PyObject *)self), self, i, 0, 0);
}

static PyObject *view_list(BatchObject *self, int writable, int records)
{
    if (check_live(self) < 0) {
        return NULL;
    }
    py_state *st = state_of((PyObject *)self);
    PyObject *list = PyList_New(self->n);
    for (Py_ssize_t i = 0; list != NULL && i < self->n; i++) {
        PyObject *mv = sample_view(st, self, i, writable, records);
        if (mv == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, mv);
    }
    return list;
}

static PyObject *get_samples(BatchObject *self, void *c)
{
    (void)c;
    return view_list(self, 0, 0);
}

static PyObject *get_records(BatchObject *self, void *c)
{
    (void)c;
    if (self->records == NULL) {
        return check_live(self) < 0 ? NULL : Py_NewRef(Py_None);
    }
    return view_list(self, 1, 1);
}

static PyObject *batch_views(BatchObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"writable", NULL};
    int writable = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$p:views", kwlist, &writable)) {
        return NULL;
    }
    return view_list(self, writable, 0);
}

/* array(typecode) built from one 64-bit field of every view. */
static PyObject *field_array(BatchObject *self, const char *typecode, int field)
{
    py_state *st = state_of((PyObject *)self);
    PyObject *raw = PyBytes_FromStringAndSize(NULL, self->n * 8);
    if (raw == NULL) {
        return NULL;
    }
    uint64_t *p = (uint64_t *)PyBytes_AS_STRING(raw);
    for (Py_ssize_t i = 0; i < self->n; i++) {
        const hdmlp_sample_view *v = &self->views[i];
        p[i] = field == 0 ? v->label : field == 1 ? v->index : v->size;
    }
    PyObject *arr = PyObject_CallFunction(st->array_type, "sO", typecode, raw);
    Py_DECREF(raw);
    return arr;
}

static PyObject *get_labels(BatchObject *self, void *c)
{
    (void)c;
    if (self->labels == NULL) {
        if (check_live(self) < 0) {
            return NULL;
        }
        self->labels = field_array(self, "q", 0);
    }
    return Py_XNewRef(self->labels);
}

static PyObject *get_indices(BatchObject *self, void *c)
{
    (void)c;
    if (self->indices == NULL) {
        if (check_live(self) < 0) {
            return NULL;
        }
        self->indices = field_array(self, "Q", 1);
    }
    return Py_XNewRef(self->indices);
}

static PyObject *get_sizes(BatchObject *self, void *c)
{
    (void)c;
    if (check_live(self) < 0) {
        return NULL;
    }
    return field_array(self, "Q", 2);
}

static PyObject *get_images(BatchObject *self, void *c)
{
    (void)c;
    if (check_live(self) < 0) {
        return NULL;
    }
    return py_image_array(state_of((PyObject *)self), self);
}

static PyObject *get_epoch(BatchObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->epoch);
}

static PyObject *get_released(BatchObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->batch == NULL);
}

static PyObject *get_exports(BatchObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(self->exports);
}

static PyObject *batch_copy_into(BatchObject *self, PyObject *arg)
{
    if (check_live(self) < 0) {
        return NULL;
    }
    Py_buffer out;
    if (PyObject_GetBuffer(arg, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    uint64_t total = 0;
    for (Py_ssize_t i = 0; i < self->n; i++) {
        total += self->views[i].size;
    }
    if ((uint64_t)out.len < total) {
        PyBuffer_Release(&out);
        return py_raise_arg(state_of((PyObject *)self), "buffer",
                            "%zd bytes is too small for the batch's %llu bytes", out.len,
                            (unsigned long long)total);
    }
    const hdmlp_sample_view *v = self->views;
    const Py_ssize_t n = self->n;
    char *dst = out.buf;
    PyThreadState *ts = PyEval_SaveThread();
    for (Py_ssize_t i = 0; i < n; i++) {
        if (v[i].size > 0) {
            memcpy(dst, v[i].data, (size_t)v[i].size);
            dst += v[i].size;
        }
    }
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&out);
    return PyLong_FromUnsignedLongLong(total);
}

static PyObject *batch_release(BatchObject *self, PyObject *unused)
{
    (void)unused;
    if (self->batch == NULL) {
        Py_RETURN_NONE;
    }
    if (self->exports > 0) {
        PyErr_Format(PyExc_BufferError,
                     "cannot release the batch: %zd view(s) of its samples are still alive "
                     "(memoryviews, arrays or tensors); drop them first",
                     self->exports);
        return NULL;
    }
    if (self->pid == getpid()) {
        self->release(self->batch);
    }
    self->batch = NULL;
    Py_RETURN_NONE;
}

static PyObject *batch_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *batch_exit(BatchObject *self, PyObject *args)
{
    (void)args;
    PyObject *r = batch_release(self, NULL);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *batch_addresses(BatchObject *self, PyObject *unused)
{
    (void)unused;
    if (check_live(self) < 0) {
        return NULL;
    }
    PyObject *list = PyList_New(self->n);
    for (Py_ssize_t i = 0; list != NULL && i < self->n; i++) {
        PyObject *a = PyLong_FromVoidPtr((void *)self->views[i].data);
        if (a == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, a);
    }
    return list;
}

static PyObject *batch_repr(BatchObject *self)
{
    return PyUnicode_FromFormat("<hdmlp.Batch epoch %llu, %zd samples%s>",
                                (unsigned long long)self->epoch, self->n,
                                self->batch == NULL ? ", released" : "");
}

static PyMethodDef batch_methods[] = {
    {"views", (PyCFunction)(void (*)(void))batch_views, METH_VARARGS | METH_KEYWORDS,
     "views(*, writable=False) -> list of memoryviews of the samples. writable=True gives "
     "writable views of memory owned by this batch alone (for tensors)."},
    {"copy_into", (PyCFunction)batch_copy_into, METH_O,
     "copy_into(buffer) -> int: copies the samples back to back into a writable, "
     "C-contiguous buffer (without the GIL); returns the bytes copied."},
    {"release", (PyCFunction)batch_release, METH_NOARGS,
     "release(): returns the batch's memory to the loader now. BufferError while views of "
     "its samples are alive. Idempotent; deleting the batch does the same."},
    {"_addresses", (PyCFunction)batch_addresses, METH_NOARGS,
     "C addresses of the samples' data (for tests)."},
    {"__enter__", batch_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)batch_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef batch_getset[] = {
    {"samples", (getter)get_samples, NULL,
     "New list of read-only memoryviews, one per sample (zero-copy).", NULL},
    {"labels", (getter)get_labels, NULL, "array('q') of the samples' labels.", NULL},
    {"indices", (getter)get_indices, NULL,
     "array('Q') of the samples' packed-order indices (as hdmlp-bench --ids).", NULL},
    {"sizes", (getter)get_sizes, NULL, "array('Q') of the samples' sizes in bytes.", NULL},
    {"images", (getter)get_images, NULL,
     "The decoded images (Loader(image=hdmlp.ImagePipeline(...))): a numpy array of shape "
     "(n, H, W, C) or (n, C, H, W), uint8 or float32, viewing the batch's memory (zero-copy, "
     "writable; the batch stays alive while it does).",
     NULL},
    {"records", (getter)get_records, NULL,
     "With an ImagePipeline on samples with fields: each image's sample as its field record "
     "(writable memoryviews; hdmlp.sample_fields reads them), in the images' order; else "
     "None.",
     NULL},
    {"epoch", (getter)get_epoch, NULL, "Epoch (0-based) of every sample in the batch.", NULL},
    {"released", (getter)get_released, NULL, "True once the C batch was released.", NULL},
    {"exports", (getter)get_exports, NULL, "Number of live buffer exports of its samples.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef batch_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(BatchObject, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(batch_doc,
             "A batch delivered by a Loader. len(batch) samples; batch[i] and batch.samples "
             "are zero-copy read-only memoryviews. The memory returns to the loader's budget "
             "when the batch and every view of it are gone (or on release()).");

int py_batch_init_types(PyObject *module, py_state *st)
{
    PyType_Slot batch_slots[] = {
        {Py_tp_doc, (void *)batch_doc},
        PY_SLOT(Py_tp_dealloc, batch_dealloc),
        PY_SLOT(Py_tp_repr, batch_repr),
        {Py_tp_methods, (void *)batch_methods},
        {Py_tp_getset, (void *)batch_getset},
        {Py_tp_members, (void *)batch_members},
        PY_SLOT(Py_sq_length, batch_len),
        PY_SLOT(Py_sq_item, batch_item),
        {0, NULL},
    };
    PyType_Spec batch_spec = {
        .name = "hdmlp.Batch",
        .basicsize = sizeof(BatchObject),
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
        .slots = batch_slots,
    };
    st->BatchType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &batch_spec, NULL);
    if (st->BatchType == NULL) {
        return -1;
    }
    PyType_Slot sb_slots[] = {
        {Py_tp_doc, (void *)"Buffer-protocol exporter of one sample of a Batch (internal)."},
        PY_SLOT(Py_tp_dealloc, sb_dealloc),
        PY_SLOT(Py_bf_getbuffer, sb_getbuffer),
        PY_SLOT(Py_bf_releasebuffer, sb_releasebuffer),
        {0, NULL},
    };
    PyType_Spec sb_spec = {
        .name = "hdmlp._SampleBuffer",
        .basicsize = sizeof(SampleBufferObject),
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
        .slots = sb_slots,
    };
    st->SampleBufferType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &sb_spec, NULL);
    if (st->SampleBufferType == NULL) {
        return -1;
    }
    return PyModule_AddType(module, st->BatchType);
}
