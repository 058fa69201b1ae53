/*
 * Loader arguments → hdmlp_config: type and range checks, each error naming the Python
 * parameter (the library's setters add their own detail).
 */
#include "py_internal.h"

#include "loader_units.h"

static int set_or_raise(py_state *st, int rc, const char *param)
{
    if (rc != HDMLP_OK) {
        py_raise(st, rc, param, NULL);
        return -1;
    }
    return 0;
}

/* Whether memory was given as a share of the dataset ('25%'): the library then raises it to
 * the least the dataset needs (a small dataset's 25 % can be less than two batches), and
 * py_loader_make_c warns; a budget in bytes stays a hard ceiling. */
static int memory_is_share(PyObject *obj)
{
    const char *s = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;
    uint64_t bytes = 0;
    double percent = 0;
    if (s == NULL) {
        PyErr_Clear();
        return 0;
    }
    return units_parse_size(s, 0, &bytes, &percent, NULL, 0) == 0 && percent > 0;
}

/* The ranges hdmlp.h gives for hdmlp_config_set_batch_size and hdmlp_config_set_threads,
 * checked here so that a message states them whatever the value's type and sign. */
#define PY_BATCH_SIZE_MAX (1u << 20)
#define PY_THREADS_MAX 64u

static int opt_u64(py_state *st, PyObject *obj, const char *param, uint64_t dflt, uint64_t *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = dflt;
        return 0;
    }
    return py_arg_u64(st, obj, param, out);
}

/* As opt_u64 for a value in lo..hi. */
static int opt_range(py_state *st, PyObject *obj, const char *param, uint64_t dflt, uint64_t lo,
                     uint64_t hi, uint64_t *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = dflt;
        return 0;
    }
    return py_arg_range(st, obj, param, lo, hi, out);
}

/* tls=(ca_file, cert_file, key_file): str or os.PathLike each (a[21]; None = off). */
static int configure_tls(py_state *st, hdmlp_config *cfg, PyObject *arg)
{
    static const char *const what = "tls: expected None or (ca_file, cert_file, key_file)";
    if (arg == NULL || arg == Py_None) {
        return 0;
    }
    if (PyUnicode_Check(arg) || PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, what);
        return -1;
    }
    PyObject *seq = PySequence_Fast(arg, what);
    if (seq == NULL) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(seq) != 3) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_TypeError, what);
        return -1;
    }
    PyObject *paths[3] = {NULL, NULL, NULL};
    int rc = 0;
    for (int i = 0; rc == 0 && i < 3; i++) {
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, i), &paths[i])) {
            rc = -1;
        }
    }
    if (rc == 0) {
        rc = set_or_raise(st,
                          hdmlp_config_set_tls(cfg, PyBytes_AS_STRING(paths[0]),
                                               PyBytes_AS_STRING(paths[1]),
                                               PyBytes_AS_STRING(paths[2])),
                          "tls");
    }
    for (int i = 0; i < 3; i++) {
        Py_XDECREF(paths[i]);
    }
    Py_DECREF(seq);
    return rc;
}

/* Distributed settings: peers, listen, job_token, remote_memory, prefetch, peer_timeout
 * (a[14..19]; NULL or None = library default), tls (a[21]). */
static int configure_peers(py_state *st, hdmlp_dataset *ds, hdmlp_config *cfg,
                           PyObject *const *a)
{
    if (a[14] != NULL && a[14] != Py_None) {
        if (PyUnicode_Check(a[14])) {
            PyErr_SetString(PyExc_TypeError, "peers: expected a sequence of 'host:port' str");
            return -1;
        }
        PyObject *seq = PySequence_Fast(a[14], "peers: expected a sequence of 'host:port' str");
        if (seq == NULL) {
            return -1;
        }
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        const char **eps = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(*eps));
        int rc = eps == NULL ? -1 : 0;
        for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
            if (!PyUnicode_Check(item)) {
                PyErr_Format(PyExc_TypeError, "peers: item %zd is %.80s, not str", i,
                             Py_TYPE(item)->tp_name);
                rc = -1;
            } else if ((eps[i] = PyUnicode_AsUTF8(item)) == NULL) {
                rc = -1;
            }
        }
        if (eps == NULL) {
            PyErr_NoMemory();
        } else if (rc == 0 && n > UINT32_MAX) {
            py_raise_arg(st, "peers", "too many endpoints");
            rc = -1;
        } else if (rc == 0) {
            rc = set_or_raise(st, hdmlp_config_set_peers(cfg, eps, (uint32_t)n), "peers");
        }
        PyMem_Free(eps);
        Py_DECREF(seq);
        if (rc < 0) {
            return -1;
        }
    }
    if (a[15] != NULL && a[15] != Py_None) {
        if (!PyUnicode_Check(a[15])) {
            PyErr_SetString(PyExc_TypeError, "listen: expected a 'host:port' str");
            return -1;
        }
        const char *addr = PyUnicode_AsUTF8(a[15]);
        if (addr == NULL ||
            set_or_raise(st, hdmlp_config_set_listen(cfg, addr), "listen") < 0) {
            return -1;
        }
    }
    uint64_t v = 0;
    if (a[16] != NULL && a[16] != Py_None) {
        if (py_arg_u64(st, a[16], "job_token", &v) < 0 ||
            set_or_raise(st, hdmlp_config_set_job_token(cfg, v), "job_token") < 0) {
            return -1;
        }
    }
    if (a[17] != NULL && a[17] != Py_None) {
        const uint64_t raw = hdmlp_dataset_raw_bytes(ds);
        if (py_arg_memory(st, a[17], raw, &v) < 0 ||
            set_or_raise(st, hdmlp_config_set_remote_memory(cfg, v), "remote_memory") < 0) {
            return -1;
        }
    }
    if (a[18] != NULL && a[18] != Py_None) {
        if (py_arg_u64(st, a[18], "prefetch", &v) < 0) {
            return -1;
        }
        if (v > UINT32_MAX) {
            py_raise_arg(st, "prefetch", "%llu is too large", (unsigned long long)v);
            return -1;
        }
        if (set_or_raise(st, hdmlp_config_set_prefetch(cfg, (uint32_t)v), "prefetch") < 0) {
            return -1;
        }
    }
    if (a[19] != NULL && a[19] != Py_None) {
        const double secs = PyFloat_AsDouble(a[19]);
        if (secs == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        if (!(secs >= 0.0 && secs * 1000.0 <= (double)UINT32_MAX)) {
            py_raise_arg(st, "peer_timeout", "expected seconds in 0.1..3600, got %R", a[19]);
            return -1;
        }
        const uint32_t ms = (uint32_t)(secs * 1000.0 + 0.5);
        if (set_or_raise(st, hdmlp_config_set_peer_timeout(cfg, ms), "peer_timeout") < 0) {
            return -1;
        }
    }
    return configure_tls(st, cfg, a[21]);
}

int py_loader_configure(py_state *st, hdmlp_dataset *ds, hdmlp_config *cfg, PyObject *const *a,
                        py_loader_params *p)
{
    /* a: batch_size, memory, seed, epochs, rank, world, drop_last, threads, refill, policy,
     * engine, lookahead, direct_io, storage_cost, then configure_peers's, then on_corrupt,
     * tls (NULL = not given) */
    static const char *const refills[] = {"auto", "whole", "ranges"};
    static const char *const policies[] = {"fill-rate", "random", "clairvoyant", "auto"};
    static const char *const engines[] = {"auto", "pread", "io_uring"};
    static const char *const on_corrupt[] = {"fail", "skip"};
    uint64_t rank = 0, world = 1, lookahead = 0;
    int refill = 0, policy = -1, engine = 0, corrupt = 0; /* policy -1: the library's */

    if (py_arg_range(st, a[0], "batch_size", 1, PY_BATCH_SIZE_MAX, &p->batch_size) < 0 ||
        py_arg_memory(st, a[1], hdmlp_dataset_raw_bytes(ds), &p->memory) < 0 ||
        opt_u64(st, a[2], "seed", 0, &p->seed) < 0 ||
        opt_range(st, a[3], "epochs", 0, 1, UINT64_MAX, &p->epochs) < 0 ||
        opt_u64(st, a[4], "rank", 0, &rank) < 0 ||
        opt_range(st, a[5], "world", 1, 1, UINT32_MAX, &world) < 0 ||
        opt_range(st, a[7], "threads", 2, 1, PY_THREADS_MAX, &p->threads) < 0 ||
        (a[8] != NULL && py_arg_choice(st, a[8], "refill", refills, 3, &refill) < 0) ||
        (a[9] != NULL && py_arg_choice(st, a[9], "policy", policies, 4, &policy) < 0) ||
        (a[10] != NULL && py_arg_choice(st, a[10], "engine", engines, 3, &engine) < 0) ||
        opt_u64(st, a[11], "lookahead", 0, &lookahead) < 0 ||
        (a[20] != NULL && a[20] != Py_None &&
         py_arg_choice(st, a[20], "on_corrupt", on_corrupt, 2, &corrupt) < 0)) {
        return -1;
    }
    if (rank >= world) {
        py_raise_arg(st, "rank", "need 0 <= rank < world, got rank %llu of world %llu",
                     (unsigned long long)rank, (unsigned long long)world);
        return -1;
    }
    p->rank = (uint32_t)rank;
    p->world = (uint32_t)world;
    p->drop_last = a[6] != NULL ? PyObject_IsTrue(a[6]) : 0;
    /* direct_io: None or 'auto' (the default) lets the library choose; else a truth value. */
    int direct = HDMLP_DIRECT_IO_AUTO;
    if (a[12] != NULL && a[12] != Py_None &&
        !(PyUnicode_Check(a[12]) && PyUnicode_CompareWithASCIIString(a[12], "auto") == 0)) {
        direct = PyObject_IsTrue(a[12]);
    }
    if (p->drop_last < 0 || direct < 0) {
        return -1;
    }
    if (set_or_raise(st, hdmlp_config_set_memory(cfg, p->memory), "memory") < 0 ||
        set_or_raise(st, hdmlp_config_set_memory_raise(cfg, memory_is_share(a[1])), "memory") <
            0 ||
        set_or_raise(st, hdmlp_config_set_batch_size(cfg, (uint32_t)p->batch_size),
                     "batch_size") < 0 ||
        set_or_raise(st, hdmlp_config_set_seed(cfg, p->seed), "seed") < 0 ||
        set_or_raise(st, hdmlp_config_set_epochs(cfg, p->epochs), "epochs") < 0 ||
        set_or_raise(st, hdmlp_config_set_drop_last(cfg, p->drop_last), "drop_last") < 0 ||
        set_or_raise(st, hdmlp_config_set_rank(cfg, p->rank, p->world), "rank/world") < 0 ||
        set_or_raise(st, hdmlp_config_set_threads(cfg, (uint32_t)p->threads), "threads") < 0 ||
        set_or_raise(st, hdmlp_config_set_engine(cfg, (hdmlp_engine)engine), "engine") < 0 ||
        set_or_raise(st, hdmlp_config_set_direct_io(cfg, direct), "direct_io") < 0 ||
        set_or_raise(st, hdmlp_config_set_lookahead(cfg, lookahead), "lookahead") < 0 ||
        (policy >= 0 &&
         set_or_raise(st, hdmlp_config_set_policy(cfg, (hdmlp_policy)policy), "policy") < 0) ||
        set_or_raise(st, hdmlp_config_set_refill(cfg, (hdmlp_refill)refill), "refill") < 0 ||
        set_or_raise(
            st,
            hdmlp_config_set_on_corrupt(cfg, corrupt ? HDMLP_CORRUPT_SKIP : HDMLP_CORRUPT_FAIL),
            "on_corrupt") < 0) {
        return -1;
    }
    p->skip_corrupt = corrupt;
    if (a[13] != NULL && a[13] != Py_None) {
        static const char *const what = "storage_cost: expected (op_us, bytes_per_s)";
        double op_us = 0, bps = 0;
        if (!PyTuple_Check(a[13]) && !PyList_Check(a[13])) {
            PyErr_SetString(PyExc_TypeError, what);
            return -1;
        }
        PyObject *pair = PySequence_Tuple(a[13]);
        const int ok = pair != NULL && PyArg_ParseTuple(pair, "dd", &op_us, &bps);
        Py_XDECREF(pair);
        if (!ok) {
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_SetString(PyExc_TypeError, what);
            }
            return -1;
        }
        if (set_or_raise(st, hdmlp_config_set_storage_cost(cfg, op_us, bps), "storage_cost") <
            0) {
            return -1;
        }
    }
    if (configure_peers(st, ds, cfg, a) < 0) {
        return -1;
    }
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    /* Rank r of R takes the positions p % R == r of each epoch's permutation. */
    p->epoch_samples = n / world + (rank < n % world ? 1 : 0);
    const uint64_t b = p->batch_size;
    p->epoch_batches =
        b == 0 ? 0 : (p->drop_last ? p->epoch_samples / b : (p->epoch_samples + b - 1) / b);
    return 0;
}
