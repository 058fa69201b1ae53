/*
 * _hdmlp module: multi-phase initialisation (PEP 489), module state, version check and
 * the small module-level functions.
 */
#include "py_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

static PyObject *mod_strerror(PyObject *m, PyObject *arg)
{
    (void)m;
    const long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (code < INT_MIN || code > INT_MAX) {
        return PyUnicode_FromString(hdmlp_strerror(INT_MIN));
    }
    return PyUnicode_FromString(hdmlp_strerror((int)code));
}

static PyObject *mod_err_name(PyObject *m, PyObject *arg)
{
    (void)m;
    const long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (code < INT_MIN || code > INT_MAX) {
        return PyUnicode_FromString(hdmlp_err_name(INT_MIN));
    }
    return PyUnicode_FromString(hdmlp_err_name((int)code));
}

static PyObject *mod_parse_memory(PyObject *m, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"memory", "raw_bytes", NULL};
    PyObject *memory = NULL;
    unsigned long long raw = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|K:parse_memory", kwlist, &memory, &raw)) {
        return NULL;
    }
    uint64_t out = 0;
    if (py_arg_memory(PyModule_GetState(m), memory, raw, &out) < 0) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(out);
}

/* The watch thread of _exit_when_readable: never touches Python, so a thread holding the
 * GIL (or blocked with it) cannot delay the exit. */
static void *exit_watch_main(void *arg)
{
    const uintptr_t packed = (uintptr_t)arg;
    struct pollfd p = {.fd = (int)(packed >> 8), .events = POLLIN};
    int rc;
    do {
        rc = poll(&p, 1, -1);
    } while (rc < 0 && errno == EINTR);
    if (rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        _exit((int)(packed & 0xff));
    }
    return NULL; /* the descriptor was not one to watch: no watch */
}

static PyObject *mod_exit_when_readable(PyObject *m, PyObject *args)
{
    (void)m;
    int fd = -1;
    int status = 0;
    if (!PyArg_ParseTuple(args, "ii:_exit_when_readable", &fd, &status)) {
        return NULL;
    }
    if (fd < 0 || fd > (INT_MAX >> 8) || status < 0 || status > 255) {
        PyErr_SetString(PyExc_ValueError, "_exit_when_readable: fd >= 0, status in 0..255");
        return NULL;
    }
    /* No signal for this thread: Ctrl-C and friends stay with the Python threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    const uintptr_t packed = ((uintptr_t)fd << 8) | (uintptr_t)status;
    const int rc = pthread_create(&t, &attr, exit_watch_main, (void *)packed);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"strerror", mod_strerror, METH_O, "strerror(code) -> str: message of an HDMLP_E_* code."},
    {"err_name", mod_err_name, METH_O, "err_name(code) -> str: e.g. 'HDMLP_E_CORRUPT'."},
    {"parse_memory", (PyCFunction)(void (*)(void))mod_parse_memory,
     METH_VARARGS | METH_KEYWORDS,
     "parse_memory(memory, raw_bytes=0) -> int: bytes for an int or a size string "
     "('256M', '1.5GiB', '500MB', '25%' of raw_bytes), as Loader does."},
    {"_exit_when_readable", mod_exit_when_readable, METH_VARARGS,
     "_exit_when_readable(fd, status): a detached thread waits until fd (a pidfd, say) is "
     "readable, then ends this process at once with _exit(status). fd must stay open."},
    {NULL, NULL, 0, NULL},
};

static int add_constants(PyObject *m)
{
#define ADD_CODE(name, value, msg)                                                             \
    if (PyModule_AddIntConstant(m, #name, HDMLP_##name) < 0) {                                 \
        return -1;                                                                             \
    }
    HDMLP_ERRNO_MAP(ADD_CODE)
#undef ADD_CODE
    if (PyModule_AddIntConstant(m, "HEADER_VERSION_NUMBER", HDMLP_VERSION_NUMBER) < 0 ||
        PyModule_AddIntConstant(m, "LIBRARY_VERSION_NUMBER", (long)hdmlp_version_number()) <
            0 ||
        PyModule_AddStringConstant(m, "library_version", hdmlp_version_string()) < 0 ||
        PyModule_AddIntConstant(m, "STATE_MAX", HDMLP_STATE_MAX) < 0) {
        return -1;
    }
    return 0;
}

static int module_exec(PyObject *m)
{
    const unsigned have = hdmlp_version_number();
    if (have != HDMLP_VERSION_NUMBER) {
        PyErr_Format(PyExc_ImportError,
                     "hdmlp: the loaded libhdmlp is version %s (%u) but this extension was "
                     "built against %d.%d.%d (%d); rebuild the extension or fix the library "
                     "search path (LD_LIBRARY_PATH / RPATH)",
                     hdmlp_version_string(), have, HDMLP_VERSION_MAJOR, HDMLP_VERSION_MINOR,
                     HDMLP_VERSION_PATCH, HDMLP_VERSION_NUMBER);
        return -1;
    }
    py_state *st = PyModule_GetState(m);
    PyObject *array = PyImport_ImportModule("array");
    if (array == NULL) {
        return -1;
    }
    st->array_type = PyObject_GetAttrString(array, "array");
    Py_DECREF(array);
    if (st->array_type == NULL) {
        return -1;
    }
    if (py_errors_init(m, st) < 0 || py_dataset_init_type(m, st) < 0 ||
        py_batch_init_types(m, st) < 0 || py_loader_init_types(m, st) < 0 ||
        py_ring_add_functions(m) < 0 || py_image_init(m, st) < 0 || add_constants(m) < 0) {
        return -1;
    }
    return 0;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    py_state *st = PyModule_GetState(m);
    if (st == NULL) {
        return 0;
    }
    Py_VISIT(st->Error);
    Py_VISIT(st->CorruptDataError);
    Py_VISIT(st->FormatVersionError);
    Py_VISIT(st->StorageError);
    Py_VISIT(st->NotFoundError);
    Py_VISIT(st->ExistsError);
    Py_VISIT(st->PeerError);
    Py_VISIT(st->InvalidArgumentError);
    Py_VISIT(st->OutOfMemoryError);
    Py_VISIT(st->UnsupportedError);
    Py_VISIT(st->StateError);
    Py_VISIT(st->InterruptedError);
    Py_VISIT(st->TimedOutError);
    Py_VISIT(st->DatasetType);
    Py_VISIT(st->LoaderType);
    Py_VISIT(st->EpochIterType);
    Py_VISIT(st->BatchType);
    Py_VISIT(st->SampleBufferType);
    Py_VISIT(st->ImageBufferType);
    Py_VISIT(st->array_type);
    return 0;
}

static int module_clear(PyObject *m)
{
    py_state *st = PyModule_GetState(m);
    if (st == NULL) {
        return 0;
    }
    Py_CLEAR(st->Error);
    Py_CLEAR(st->CorruptDataError);
    Py_CLEAR(st->FormatVersionError);
    Py_CLEAR(st->StorageError);
    Py_CLEAR(st->NotFoundError);
    Py_CLEAR(st->ExistsError);
    Py_CLEAR(st->PeerError);
    Py_CLEAR(st->InvalidArgumentError);
    Py_CLEAR(st->OutOfMemoryError);
    Py_CLEAR(st->UnsupportedError);
    Py_CLEAR(st->StateError);
    Py_CLEAR(st->InterruptedError);
    Py_CLEAR(st->TimedOutError);
    Py_CLEAR(st->DatasetType);
    Py_CLEAR(st->LoaderType);
    Py_CLEAR(st->EpochIterType);
    Py_CLEAR(st->BatchType);
    Py_CLEAR(st->SampleBufferType);
    Py_CLEAR(st->ImageBufferType);
    Py_CLEAR(st->array_type);
    return 0;
}

static void module_free(void *m) { module_clear((PyObject *)m); }

static PyModuleDef_Slot module_slots[2]; /* filled by PyInit__hdmlp (see py_fn) */

PyMODINIT_FUNC PyInit__hdmlp(void);

PyMODINIT_FUNC PyInit__hdmlp(void)
{
    module_slots[0] = (PyModuleDef_Slot)PY_SLOT(Py_mod_exec, module_exec);
    module_slots[1] = (PyModuleDef_Slot){0, NULL};
    py_module_def.m_methods = module_methods;
    py_module_def.m_slots = module_slots;
    py_module_def.m_traverse = module_traverse;
    py_module_def.m_clear = module_clear;
    py_module_def.m_free = module_free;
    return PyModuleDef_Init(&py_module_def);
}
