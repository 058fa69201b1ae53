/*
 * Error codes → exceptions.
 *
 *   Error(Exception)                          base of everything raised for an HDMLP_E_* code
 *   ├── CorruptDataError                      HDMLP_E_CORRUPT
 *   ├── FormatVersionError                    HDMLP_E_VERSION
 *   ├── StorageError(Error, OSError)          HDMLP_E_IO, HDMLP_E_NOSPC, HDMLP_E_MFILE
 *   │   ├── NotFoundError(.., FileNotFoundError)   HDMLP_E_NOTFOUND
 *   │   ├── ExistsError(.., FileExistsError)       HDMLP_E_EXISTS
 *   │   └── PeerError(.., ConnectionError)         HDMLP_E_PEER
 *   ├── InvalidArgumentError(Error, ValueError)    HDMLP_E_INVAL, HDMLP_E_RANGE
 *   ├── OutOfMemoryError(Error, MemoryError)       HDMLP_E_NOMEM (also the budget)
 *   ├── UnsupportedError(Error, NotImplementedError) HDMLP_E_UNSUPPORTED
 *   ├── StateError(Error, RuntimeError)            HDMLP_E_STATE, misuse of objects
 *   ├── Interrupted(Error, InterruptedError)       HDMLP_E_INTERRUPTED
 *   └── TimedOutError(Error, TimeoutError)          HDMLP_E_TIMEOUT
 *
 * Every instance carries `code` (the HDMLP_E_* value), `name` ("HDMLP_E_CORRUPT") and
 * `detail` (hdmlp_last_error() at the failure); OSError subclasses also get `errno`.
 */
#include "py_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <strings.h>

typedef struct exc_def {
    const char *name; /* "hdmlp.X" */
    size_t slot;      /* offsetof(py_state, X) */
    size_t parent;    /* offsetof(py_state, parent) or SIZE_MAX for Error */
    PyObject *(*builtin)(void);
    const char *doc;
} exc_def;

static PyObject *b_exception(void) { return PyExc_Exception; }
static PyObject *b_none(void) { return NULL; }
static PyObject *b_oserror(void) { return PyExc_OSError; }
static PyObject *b_notfound(void) { return PyExc_FileNotFoundError; }
static PyObject *b_exists(void) { return PyExc_FileExistsError; }
static PyObject *b_connection(void) { return PyExc_ConnectionError; }
static PyObject *b_value(void) { return PyExc_ValueError; }
static PyObject *b_memory(void) { return PyExc_MemoryError; }
static PyObject *b_notimpl(void) { return PyExc_NotImplementedError; }
static PyObject *b_runtime(void) { return PyExc_RuntimeError; }
static PyObject *b_interrupted(void) { return PyExc_InterruptedError; }
static PyObject *b_timeout(void) { return PyExc_TimeoutError; }

#define SLOT(x) offsetof(py_state, x)
static const exc_def exc_defs[] = {
    {"hdmlp.Error", SLOT(Error), SIZE_MAX, b_exception,
     "Base of all hdmlp errors; attributes code, name and detail."},
    {"hdmlp.CorruptDataError", SLOT(CorruptDataError), SLOT(Error), b_none,
     "A checksum or bounds check failed (HDMLP_E_CORRUPT)."},
    {"hdmlp.FormatVersionError", SLOT(FormatVersionError), SLOT(Error), b_none,
     "The dataset was written by an unsupported format version (HDMLP_E_VERSION)."},
    {"hdmlp.StorageError", SLOT(StorageError), SLOT(Error), b_oserror,
     "Reading or writing storage failed (HDMLP_E_IO, HDMLP_E_NOSPC, HDMLP_E_MFILE)."},
    {"hdmlp.NotFoundError", SLOT(NotFoundError), SLOT(StorageError), b_notfound,
     "A dataset, file or key does not exist (HDMLP_E_NOTFOUND)."},
    {"hdmlp.ExistsError", SLOT(ExistsError), SLOT(StorageError), b_exists,
     "The target already exists (HDMLP_E_EXISTS)."},
    {"hdmlp.PeerError", SLOT(PeerError), SLOT(StorageError), b_connection,
     "A peer rank failed or went silent (HDMLP_E_PEER)."},
    {"hdmlp.InvalidArgumentError", SLOT(InvalidArgumentError), SLOT(Error), b_value,
     "An argument is invalid or out of range (HDMLP_E_INVAL, HDMLP_E_RANGE); the message "
     "names the parameter."},
    {"hdmlp.OutOfMemoryError", SLOT(OutOfMemoryError), SLOT(Error), b_memory,
     "Out of memory, or the loader's budget is held by unreleased batches (HDMLP_E_NOMEM)."},
    {"hdmlp.UnsupportedError", SLOT(UnsupportedError), SLOT(Error), b_notimpl,
     "The operation is not supported by this build or configuration (HDMLP_E_UNSUPPORTED)."},
    {"hdmlp.StateError", SLOT(StateError), SLOT(Error), b_runtime,
     "The object is in the wrong state for this call (HDMLP_E_STATE, closed objects)."},
    {"hdmlp.Interrupted", SLOT(InterruptedError), SLOT(Error), b_interrupted,
     "A wait was interrupted (HDMLP_E_INTERRUPTED)."},
    {"hdmlp.TimedOutError", SLOT(TimedOutError), SLOT(Error), b_timeout,
     "A wait timed out (HDMLP_E_TIMEOUT)."},
};
#undef SLOT

static PyObject **state_slot(py_state *st, size_t off)
{
    return (PyObject **)((char *)st + off);
}

int py_errors_init(PyObject *module, py_state *st)
{
    for (size_t i = 0; i < sizeof(exc_defs) / sizeof(exc_defs[0]); i++) {
        const exc_def *d = &exc_defs[i];
        PyObject *bases = NULL;
        PyObject *builtin = d->builtin();
        if (d->parent == SIZE_MAX) {
            bases = PyTuple_Pack(1, builtin);
        } else if (builtin == NULL) {
            bases = PyTuple_Pack(1, *state_slot(st, d->parent));
        } else {
            bases = PyTuple_Pack(2, *state_slot(st, d->parent), builtin);
        }
        if (bases == NULL) {
            return -1;
        }
        PyObject *cls = PyErr_NewExceptionWithDoc(d->name, d->doc, bases, NULL);
        Py_DECREF(bases);
        if (cls == NULL) {
            return -1;
        }
        *state_slot(st, d->slot) = cls;
        if (PyModule_AddObjectRef(module, strchr(d->name, '.') + 1, cls) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *class_for(py_state *st, int code, int *err_no)
{
    *err_no = 0;
    switch (code) {
    case HDMLP_E_CORRUPT:
        return st->CorruptDataError;
    case HDMLP_E_VERSION:
        return st->FormatVersionError;
    case HDMLP_E_IO:
        *err_no = EIO;
        return st->StorageError;
    case HDMLP_E_NOSPC:
        *err_no = ENOSPC;
        return st->StorageError;
    case HDMLP_E_MFILE:
        *err_no = EMFILE;
        return st->StorageError;
    case HDMLP_E_NOTFOUND:
        *err_no = ENOENT;
        return st->NotFoundError;
    case HDMLP_E_EXISTS:
        *err_no = EEXIST;
        return st->ExistsError;
    case HDMLP_E_PEER:
        return st->PeerError;
    case HDMLP_E_INVAL:
    case HDMLP_E_RANGE:
        return st->InvalidArgumentError;
    case HDMLP_E_NOMEM:
        return st->OutOfMemoryError;
    case HDMLP_E_UNSUPPORTED:
        return st->UnsupportedError;
    case HDMLP_E_STATE:
        return st->StateError;
    case HDMLP_E_INTERRUPTED:
        return st->InterruptedError;
    case HDMLP_E_TIMEOUT:
        *err_no = ETIMEDOUT;
        return st->TimedOutError;
    default:
        return st->Error;
    }
}

static int set_attr_long(PyObject *obj, const char *name, long v)
{
    PyObject *o = PyLong_FromLong(v);
    if (o == NULL) {
        return -1;
    }
    const int rc = PyObject_SetAttrString(obj, name, o);
    Py_DECREF(o);
    return rc;
}

static int set_attr_str(PyObject *obj, const char *name, const char *s)
{
    PyObject *o = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
    if (o == NULL) {
        return -1;
    }
    const int rc = PyObject_SetAttrString(obj, name, o);
    Py_DECREF(o);
    return rc;
}

PyObject *py_raise(py_state *st, int code, const char *context, const char *detail)
{
    if (detail == NULL) {
        detail = hdmlp_last_error();
    }
    int err_no = 0;
    PyObject *cls = class_for(st, code, &err_no);
    const size_t clen = strlen(context);
    PyObject *msg = NULL;
    if (detail[0] == '\0') {
        msg = PyUnicode_FromFormat("%s: %s", context, hdmlp_strerror(code));
    } else {
        PyObject *d = PyUnicode_DecodeUTF8(detail, (Py_ssize_t)strlen(detail), "replace");
        const int has_context = strncasecmp(detail, context, clen) == 0 && detail[clen] == ':';
        msg = d == NULL || has_context ? Py_XNewRef(d)
                                       : PyUnicode_FromFormat("%s: %U", context, d);
        Py_XDECREF(d);
    }
    if (msg == NULL) {
        return NULL;
    }
    PyObject *exc = err_no != 0 ? PyObject_CallFunction(cls, "iO", err_no, msg)
                                : PyObject_CallOneArg(cls, msg);
    Py_DECREF(msg);
    if (exc == NULL) {
        return NULL;
    }
    if (set_attr_long(exc, "code", code) < 0 ||
        set_attr_str(exc, "name", hdmlp_err_name(code)) < 0 ||
        set_attr_str(exc, "detail", detail) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *py_raise_arg(py_state *st, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *what = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (what == NULL) {
        return NULL;
    }
    PyObject *msg = PyUnicode_FromFormat("%s: %U", param, what);
    Py_DECREF(what);
    if (msg == NULL) {
        return NULL;
    }
    PyObject *exc = PyObject_CallOneArg(st->InvalidArgumentError, msg);
    Py_DECREF(msg);
    if (exc == NULL) {
        return NULL;
    }
    if (set_attr_long(exc, "code", HDMLP_E_INVAL) < 0 ||
        set_attr_str(exc, "name", hdmlp_err_name(HDMLP_E_INVAL)) < 0 ||
        set_attr_str(exc, "detail", "") < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    PyErr_SetObject(st->InvalidArgumentError, exc);
    Py_DECREF(exc);
    return NULL;
}
