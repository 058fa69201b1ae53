/*
 * The image pipeline's Python side: hdmlp.ImagePipeline (a plain Python object, see
 * hdmlp/__init__.py) → hdmlp_image_config, and Batch.images, the decoded batch as one
 * zero-copy N-dimensional array.
 *
 * _ImageBuffer exports the batch's output buffer (hdmlp_batch_image) with its shape and
 * strides through the buffer protocol; like _SampleBuffer it holds a strong reference to
 * its Batch and counts in the Batch's `exports`, so the C batch outlives every array.
 */
#include "py_internal.h"

#include <structmember.h>

/* ---- ImagePipeline → hdmlp_image_config ------------------------------------------------ */

static int get_double(PyObject *obj, const char *name, double *out)
{
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v == NULL) {
        return -1;
    }
    *out = PyFloat_AsDouble(v);
    Py_DECREF(v);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

static int get_long(PyObject *obj, const char *name, long *out)
{
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v == NULL) {
        return -1;
    }
    *out = PyLong_AsLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A sequence attribute of exactly n floats into out (NULL attribute: *given = 0). */
static int get_doubles(PyObject *obj, const char *name, double *out, Py_ssize_t n, int *given)
{
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v == NULL) {
        return -1;
    }
    *given = v != Py_None;
    if (v == Py_None) {
        Py_DECREF(v);
        return 0;
    }
    PyObject *seq = PySequence_Fast(v, "expected a sequence of numbers");
    Py_DECREF(v);
    if (seq == NULL) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "ImagePipeline.%s: expected %zd numbers, got %zd", name,
                     n, PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

static int get_str(PyObject *obj, const char *name, const char *const *names, int n, int *out)
{
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v == NULL) {
        return -1;
    }
    const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    for (int i = 0; s != NULL && i < n; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            *out = i;
            Py_DECREF(v);
            return 0;
        }
    }
    if (!PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "ImagePipeline.%s: unexpected value %R", name, v);
    }
    Py_DECREF(v);
    return -1;
}

/* Applies the setter's status: HDMLP_OK, or the mapped exception ("image: <detail>"). */
static int check(py_state *st, int rc)
{
    if (rc != HDMLP_OK) {
        py_raise(st, rc, "image", NULL);
        return -1;
    }
    return 0;
}

int py_image_config(py_state *st, PyObject *pipe, hdmlp_image_config **out)
{
    static const char *const modes[] = {"train", "val"};
    static const char *const layouts[] = {"NHWC", "NCHW"};
    static const char *const dtypes[] = {"uint8", "float32"};
    *out = NULL;
    double size[2], scale[2], ratio[2], mean[3], stdv[3], crop, flip;
    long channels, threads, prefetch, dct, fast;
    int mode, layout, dtype, has_size, has_scale, has_ratio, has_mean, has_std;
    if (get_doubles(pipe, "size", size, 2, &has_size) < 0 ||
        get_str(pipe, "mode", modes, 2, &mode) < 0 ||
        get_doubles(pipe, "scale", scale, 2, &has_scale) < 0 ||
        get_doubles(pipe, "ratio", ratio, 2, &has_ratio) < 0 ||
        get_double(pipe, "crop_fraction", &crop) < 0 || get_double(pipe, "flip", &flip) < 0 ||
        get_str(pipe, "layout", layouts, 2, &layout) < 0 ||
        get_str(pipe, "dtype", dtypes, 2, &dtype) < 0 ||
        get_doubles(pipe, "mean", mean, 3, &has_mean) < 0 ||
        get_doubles(pipe, "std", stdv, 3, &has_std) < 0 ||
        get_long(pipe, "channels", &channels) < 0 || get_long(pipe, "threads", &threads) < 0 ||
        get_long(pipe, "prefetch", &prefetch) < 0 || get_long(pipe, "dct_scaling", &dct) < 0 ||
        get_long(pipe, "fast_decode", &fast) < 0) {
        return -1;
    }
    if (!has_size || size[0] < 1 || size[1] < 1 || size[0] > UINT32_MAX ||
        size[1] > UINT32_MAX || channels < 0 || threads < 0 || prefetch < 0 ||
        channels > UINT32_MAX || threads > UINT32_MAX || prefetch > UINT32_MAX) {
        py_raise_arg(st, "image", "size, channels, threads and prefetch must be positive");
        return -1;
    }
    hdmlp_image_config *ic = NULL;
    if (check(st, hdmlp_image_config_create(&ic)) < 0) {
        return -1;
    }
    const float m[3] = {(float)mean[0], (float)mean[1], (float)mean[2]};
    const float s[3] = {(float)stdv[0], (float)stdv[1], (float)stdv[2]};
    static const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    if (check(st, hdmlp_image_config_set_size(ic, (uint32_t)size[0], (uint32_t)size[1])) < 0 ||
        check(st, hdmlp_image_config_set_mode(ic, (hdmlp_image_mode)mode)) < 0 ||
        (has_scale && check(st, hdmlp_image_config_set_scale(ic, scale[0], scale[1])) < 0) ||
        (has_ratio && check(st, hdmlp_image_config_set_ratio(ic, ratio[0], ratio[1])) < 0) ||
        check(st, hdmlp_image_config_set_crop_fraction(ic, crop)) < 0 ||
        check(st, hdmlp_image_config_set_flip(ic, flip)) < 0 ||
        check(st, hdmlp_image_config_set_layout(ic, (hdmlp_image_layout)layout)) < 0 ||
        check(st, hdmlp_image_config_set_dtype(ic, (hdmlp_image_dtype)dtype)) < 0 ||
        ((has_mean || has_std) &&
         check(st, hdmlp_image_config_set_normalize(ic, has_mean ? m : zero,
                                                    has_std ? s : one)) < 0) ||
        check(st, hdmlp_image_config_set_channels(ic, (uint32_t)channels)) < 0 ||
        check(st, hdmlp_image_config_set_decode_threads(ic, (uint32_t)threads)) < 0 ||
        check(st, hdmlp_image_config_set_prefetch(ic, (uint32_t)prefetch)) < 0 ||
        check(st, hdmlp_image_config_set_dct_scaling(ic, dct != 0)) < 0 ||
        check(st, hdmlp_image_config_set_fast_decode(ic, fast != 0)) < 0) {
        hdmlp_image_config_free(ic);
        return -1;
    }
    /* field: samples with fields, the one decoded (None: the dataset's one image field) */
    PyObject *field = PyObject_GetAttrString(pipe, "field");
    if (field == NULL) {
        PyErr_Clear(); /* an object without it: the default */
    } else if (field != Py_None) {
        const char *name = PyUnicode_Check(field) ? PyUnicode_AsUTF8(field) : NULL;
        if (name == NULL) {
            PyErr_Clear();
            py_raise_arg(st, "image", "field must be a str or None");
        }
        if (name == NULL || check(st, hdmlp_image_config_set_field(ic, name)) < 0) {
            Py_DECREF(field);
            hdmlp_image_config_free(ic);
            return -1;
        }
    }
    Py_XDECREF(field);
    *out = ic;
    return 0;
}

/* _hdmlp._check_image(pipeline): raises what a Loader would for this pipeline. */
static PyObject *mod_check_image(PyObject *m, PyObject *pipe)
{
    hdmlp_image_config *ic = NULL;
    if (py_image_config(PyModule_GetState(m), pipe, &ic) < 0) {
        return NULL;
    }
    hdmlp_image_config_free(ic);
    Py_RETURN_NONE;
}

/* ---- Batch.images --------------------------------------------------------------------------
 */

typedef struct ImageBufferObject {
    PyObject ob_base;
    BatchObject *batch;
    Py_ssize_t shape[4];
    Py_ssize_t strides[4];
} ImageBufferObject;

static int ib_getbuffer(ImageBufferObject *self, Py_buffer *view, int flags)
{
    BatchObject *b = self->batch;
    view->obj = NULL;
    if (b->batch == NULL) {
        PyErr_SetString(PyExc_BufferError, "the batch was released");
        return -1;
    }
    const int f32 = b->image.dtype == HDMLP_DTYPE_FLOAT32;
    view->buf = b->image.data;
    view->len = (Py_ssize_t)b->image.bytes;
    view->readonly = 0;
    view->itemsize = f32 ? 4 : 1;
    view->format = (flags & PyBUF_FORMAT) ? (f32 ? "f" : "B") : NULL;
    view->ndim = 4;
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? self->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    if (view->shape == NULL) {
        view->ndim = 1;
    }
    view->obj = Py_NewRef((PyObject *)self);
    b->exports++;
    return 0;
}

static void ib_releasebuffer(ImageBufferObject *self, Py_buffer *view)
{
    (void)view;
    self->batch->exports--;
}

static void ib_dealloc(ImageBufferObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_DECREF(self->batch);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyObject *py_image_array(py_state *st, BatchObject *b)
{
    if (!b->has_image) {
        PyErr_SetString(st->StateError,
                        "this batch has no decoded images: give the Loader image="
                        "hdmlp.ImagePipeline(...)");
        return NULL;
    }
    ImageBufferObject *ib = PyObject_New(ImageBufferObject, st->ImageBufferType);
    if (ib == NULL) {
        return NULL;
    }
    ib->batch = (BatchObject *)Py_NewRef(b);
    const hdmlp_image_batch *im = &b->image;
    const Py_ssize_t item = im->dtype == HDMLP_DTYPE_FLOAT32 ? 4 : 1;
    const Py_ssize_t h = im->height, w = im->width, c = im->channels;
    ib->shape[0] = im->n;
    if (im->layout == HDMLP_LAYOUT_NCHW) {
        ib->shape[1] = c;
        ib->shape[2] = h;
        ib->shape[3] = w;
    } else {
        ib->shape[1] = h;
        ib->shape[2] = w;
        ib->shape[3] = c;
    }
    ib->strides[3] = item;
    ib->strides[2] = ib->shape[3] * item;
    ib->strides[1] = ib->shape[2] * ib->strides[2];
    ib->strides[0] = ib->shape[1] * ib->strides[1];
    PyObject *mv = PyMemoryView_FromObject((PyObject *)ib);
    Py_DECREF(ib);
    if (mv == NULL) {
        return NULL;
    }
    /* numpy when it is there (zero-copy: the array's base is the memoryview). */
    PyObject *np = PyImport_ImportModule("numpy");
    if (np == NULL) {
        PyErr_Clear();
        return mv;
    }
    PyObject *arr = PyObject_CallMethod(np, "asarray", "O", mv);
    Py_DECREF(np);
    Py_DECREF(mv);
    return arr;
}

static PyMethodDef image_functions[] = {
    {"_check_image", mod_check_image, METH_O,
     "_check_image(pipeline): raises what hdmlp.Loader(image=pipeline) would for its "
     "parameters."},
    {NULL, NULL, 0, NULL},
};

int py_image_init(PyObject *module, py_state *st)
{
    PyType_Slot slots[] = {
        {Py_tp_doc, (void *)"Buffer-protocol exporter of a Batch's decoded images (internal)."},
        PY_SLOT(Py_tp_dealloc, ib_dealloc),
        PY_SLOT(Py_bf_getbuffer, ib_getbuffer),
        PY_SLOT(Py_bf_releasebuffer, ib_releasebuffer),
        {0, NULL},
    };
    PyType_Spec spec = {
        .name = "hdmlp._ImageBuffer",
        .basicsize = sizeof(ImageBufferObject),
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
        .slots = slots,
    };
    st->ImageBufferType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &spec, NULL);
    if (st->ImageBufferType == NULL) {
        return -1;
    }
    return PyModule_AddFunctions(module, image_functions);
}
