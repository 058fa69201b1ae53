/* Argument conversion: non-negative integers, memory sizes, enumerated choices. */
#include "py_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

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

static const struct {
    const char *suffix;
    double factor;
} units[] = {
    {"", 1.0},
    {"b", 1.0},
    {"k", 1024.0},
    {"kib", 1024.0},
    {"kb", 1e3},
    {"m", 1048576.0},
    {"mib", 1048576.0},
    {"mb", 1e6},
    {"g", 1073741824.0},
    {"gib", 1073741824.0},
    {"gb", 1e9},
    {"t", 1099511627776.0},
    {"tib", 1099511627776.0},
    {"tb", 1e12},
};

/* Parses s into bytes; -1 if malformed. */
static int parse_size(const char *s, uint64_t raw_bytes, uint64_t *out)
{
    while (isspace((unsigned char)*s)) {
        s++;
    }
    if (!(isdigit((unsigned char)s[0]) || s[0] == '.')) {
        return -1;
    }
    char *end = NULL;
    const double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0) {
        return -1;
    }
    while (isspace((unsigned char)*end)) {
        end++;
    }
    size_t len = strlen(end);
    while (len > 0 && isspace((unsigned char)end[len - 1])) {
        len--;
    }
    if (len == 1 && end[0] == '%') {
        if (v <= 0) {
            return -1;
        }
        const double bytes = floor((double)raw_bytes * v / 100.0);
        if (bytes >= 18446744073709551616.0) {
            return -1;
        }
        *out = (uint64_t)bytes;
        return 0;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strlen(units[i].suffix) == len && strncasecmp(end, units[i].suffix, len) == 0) {
            const double bytes = floor(v * units[i].factor);
            if (bytes >= 18446744073709551616.0) {
                return -1;
            }
            *out = (uint64_t)bytes;
            return 0;
        }
    }
    return -1;
}

int py_arg_memory(py_state *st, PyObject *obj, uint64_t raw_bytes, uint64_t *out)
{
    if (PyUnicode_Check(obj)) {
        const char *s = PyUnicode_AsUTF8(obj);
        if (s == NULL) {
            return -1;
        }
        if (parse_size(s, raw_bytes, out) != 0) {
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
