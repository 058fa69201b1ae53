/* Argument conversion: non-negative integers, memory sizes, enumerated choices. */
#include "py_internal.h"

#include "loader_units.h"

#include <ctype.h>

int py_arg_u64(py_state *st, PyObject *obj, const char *param, uint64_t *out)
{
    if (PyBool_Check(obj) || !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int, got %.80s", param,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        py_raise_arg(st, param, "expected an integer in 0..2**64-1, got %R", obj);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

int py_arg_range(py_state *st, PyObject *obj, const char *param, uint64_t lo, uint64_t hi,
                 uint64_t *out)
{
    if (PyBool_Check(obj) || !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int, got %.80s", param,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear(); /* negative or above 2**64-1: outside any range */
    } else if (v >= lo && v <= hi) {
        *out = (uint64_t)v;
        return 0;
    }
    if (hi == UINT64_MAX) {
        py_raise_arg(st, param, "expected an int >= %llu, got %R", (unsigned long long)lo, obj);
    } else {
        py_raise_arg(st, param, "expected an int in %llu..%llu, got %R", (unsigned long long)lo,
                     (unsigned long long)hi, obj);
    }
    return -1;
}

/* TypeError "<func>() got an unexpected keyword argument 'key'", with the closest known
 * keyword (difflib's pick) as a suggestion. */
static void raise_unknown_keyword(PyObject *key, char *const *kwlist, const char *func)
{
    PyObject *suggestion = NULL;
    PyObject *names = PyList_New(0);
    for (Py_ssize_t i = 0; names != NULL && kwlist[i] != NULL; i++) {
        PyObject *name = PyUnicode_FromString(kwlist[i]);
        if (name == NULL || PyList_Append(names, name) < 0) {
            Py_CLEAR(names);
        }
        Py_XDECREF(name);
    }
    PyObject *difflib = names != NULL ? PyImport_ImportModule("difflib") : NULL;
    if (difflib != NULL) {
        PyObject *close =
            PyObject_CallMethod(difflib, "get_close_matches", "OOi", key, names, 1);
        if (close != NULL && PyList_Check(close) && PyList_GET_SIZE(close) == 1) {
            suggestion = Py_NewRef(PyList_GET_ITEM(close, 0));
        }
        Py_XDECREF(close);
        Py_DECREF(difflib);
    }
    Py_XDECREF(names);
    PyErr_Clear(); /* a failed suggestion only shortens the message */
    if (suggestion != NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s() got an unexpected keyword argument %R (did you mean %R?)", func, key,
                     suggestion);
        Py_DECREF(suggestion);
    } else {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", func, key);
    }
}

int py_arg_keywords(PyObject *kwds, char *const *kwlist, const char *func)
{
    PyObject *key = NULL;
    Py_ssize_t pos = 0;
    while (kwds != NULL && PyDict_Next(kwds, &pos, &key, NULL)) {
        if (!PyUnicode_Check(key)) {
            continue; /* PyArg_ParseTupleAndKeywords reports it */
        }
        int known = 0;
        for (Py_ssize_t i = 0; !known && kwlist[i] != NULL; i++) {
            known = PyUnicode_CompareWithASCIIString(key, kwlist[i]) == 0;
        }
        if (!known) {
            raise_unknown_keyword(key, kwlist, func);
            return -1;
        }
    }
    return 0;
}

int py_arg_memory(py_state *st, PyObject *obj, uint64_t raw_bytes, uint64_t *out)
{
    if (PyUnicode_Check(obj)) {
        const char *s = PyUnicode_AsUTF8(obj);
        if (s == NULL) {
            return -1;
        }
        /* A percentage of raw_bytes 0 is 0 (parse_memory's default), not an error. */
        double percent = 0;
        if (units_parse_size(s, raw_bytes, out, &percent, NULL, 0) != 0) {
            py_raise_arg(st, "memory",
                         "expected bytes as an int or a string like '256M', '1.5GiB', "
                         "'500MB' or '25%%' (of the dataset's raw bytes), got %R",
                         obj);
            return -1;
        }
        return 0;
    }
    if (PyBool_Check(obj) || !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "memory: expected an int or a str, got %.80s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return py_arg_u64(st, obj, "memory", out);
}

int py_arg_choice(py_state *st, PyObject *obj, const char *param, const char *const *names,
                  int n, int *out)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a str, got %.80s", param,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *s = PyUnicode_AsUTF8(obj);
    if (s == NULL) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const char *a = s;
        const char *b = names[i];
        while (*a != '\0' && *b != '\0') {
            const int ca = *a == '_' ? '-' : tolower((unsigned char)*a);
            const int cb = *b == '_' ? '-' : *b;
            if (ca != cb) {
                break;
            }
            a++;
            b++;
        }
        if (*a == '\0' && *b == '\0') {
            *out = i;
            return 0;
        }
    }
    PyObject *list = PyUnicode_FromString("");
    for (int i = 0; list != NULL && i < n; i++) {
        Py_SETREF(list, PyUnicode_FromFormat("%U%s'%s'", list, i == 0 ? "" : ", ", names[i]));
    }
    if (list != NULL) {
        py_raise_arg(st, param, "expected one of %U, got %R", list, obj);
        Py_DECREF(list);
    }
    return -1;
}
