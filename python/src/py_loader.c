/*
 * hdmlp.Loader: the batched random-access loader (hdmlp_loader_*), iterated epoch by epoch.
 *
 * The C loader delivers one stream of batches across epochs (lookahead crosses epoch
 * boundaries). The object tracks the stream position (epoch, batch within it), so that
 * `for batch in loader` yields exactly one epoch and stops at its last batch without
 * waiting for the next one. Each iter(loader) starts the next epoch; set_epoch(e) picks
 * the epoch the next iter() delivers (see the Loader docstring for the cost).
 *
 * The C loader and taking batches from it are in py_loader_fetch.c, epoch iteration in
 * py_loader_iter.c.
 */
#include "py_loader.h"

#include <structmember.h>
#include <unistd.h>

/* ---- construction ---- */

/* image=hdmlp.ImagePipeline(...) (None or absent: raw sample bytes). 0 or -1. */
static int set_image(py_state *st, hdmlp_config *cfg, PyObject *image)
{
    if (image == NULL || image == Py_None) {
        return 0;
    }
    hdmlp_image_config *ic = NULL;
    if (py_image_config(st, image, &ic) < 0) {
        return -1;
    }
    const int rc = hdmlp_config_set_image(cfg, ic);
    hdmlp_image_config_free(ic);
    if (rc != HDMLP_OK) {
        py_raise(st, rc, "image", NULL);
        return -1;
    }
    return 0;
}

/* order: 'strict' or 'pool' (None or absent: the library's default, strict); relaxed, a
 * truth value, is the pool order's former name; pool_reads: reads per chunk per epoch, None
 * or 0 = auto. */
static int set_order(py_state *st, hdmlp_config *cfg, PyObject *order, PyObject *relaxed,
                     PyObject *pool_reads)
{
    static const char *const names[] = {"strict", "pool"}; /* HDMLP_ORDER_* */
    int rc = HDMLP_OK;
    if (relaxed != NULL && relaxed != Py_None) {
        const int on = PyObject_IsTrue(relaxed);
        if (on < 0) {
            return -1;
        }
        if (on && order != NULL && order != Py_None) {
            PyErr_SetString(PyExc_ValueError, "relaxed=True is order='pool': give one of them");
            return -1;
        }
        rc = hdmlp_config_set_relaxed(cfg, on);
    }
    if (rc == HDMLP_OK && order != NULL && order != Py_None) {
        int o;
        if (py_arg_choice(st, order, "order", names, 2, &o) < 0) {
            return -1;
        }
        rc = hdmlp_config_set_order(cfg, (hdmlp_order)o);
    }
    if (rc == HDMLP_OK && pool_reads != NULL && pool_reads != Py_None) {
        const long r = PyLong_Check(pool_reads) ? PyLong_AsLong(pool_reads) : -1;
        if (r == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (!PyLong_Check(pool_reads) || r < 0 || r > (long)HDMLP_POOL_READS_MAX) {
            PyErr_Format(PyExc_ValueError,
                         "pool_reads: expected an int in 0..%u (0 or None = auto), got %R",
                         HDMLP_POOL_READS_MAX, pool_reads);
            return -1;
        }
        rc = hdmlp_config_set_pool_reads(cfg, (uint32_t)r);
    }
    if (rc != HDMLP_OK) {
        py_raise(st, rc, "order", NULL);
        return -1;
    }
    return 0;
}

/* same_host: 'shm' (the default), 'socket' or 'tcp', as hdmlp_config_set_same_host. */
static int set_same_host(py_state *st, hdmlp_config *cfg, PyObject *mode)
{
    static const char *const names[] = {"tcp", "shm", "socket"}; /* HDMLP_SAME_HOST_* */
    int m;
    if (mode == NULL || mode == Py_None) {
        return 0;
    }
    if (py_arg_choice(st, mode, "same_host", names, 3, &m) < 0) {
        return -1;
    }
    const int rc = hdmlp_config_set_same_host(cfg, m);
    if (rc != HDMLP_OK) {
        py_raise(st, rc, "same_host", NULL);
        return -1;
    }
    return 0;
}

static char *loader_kwlist[] = {
    "dataset",       "batch_size", "memory",       "seed",       "epochs",     "rank",
    "world",         "drop_last",  "threads",      "refill",     "policy",     "engine",
    "lookahead",     "direct_io",  "storage_cost", "peers",      "listen",     "job_token",
    "remote_memory", "prefetch",   "peer_timeout", "on_corrupt", "tls",        "state",
    "image",         "relaxed",    "same_host",    "order",      "pool_reads", NULL};

/* Loader's arguments, as given (NULL = not given). */
typedef struct loader_args {
    PyObject *dataset, *image, *relaxed, *same_host, *order, *pool_reads;
    PyObject *a[PY_LOADER_NARGS]; /* py_loader_configure's, then state */
} loader_args;

static int parse_args(PyObject *args, PyObject *kwds, loader_args *la)
{
    memset(la, 0, sizeof(*la));
    PyObject **a = la->a;
    if (py_arg_keywords(kwds, loader_kwlist, "Loader") < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kwds, "OOO|$OOOOOOOOOOOOOOOOOOOOOOOOOO:Loader",
                                     loader_kwlist, &la->dataset, &a[0], &a[1], &a[2], &a[3],
                                     &a[4], &a[5], &a[6], &a[7], &a[8], &a[9], &a[10], &a[11],
                                     &a[12], &a[13], &a[14], &a[15], &a[16], &a[17], &a[18],
                                     &a[19], &a[20], &a[21], &a[22], &la->image, &la->relaxed,
                                     &la->same_host, &la->order, &la->pool_reads)) {
        return -1;
    }
    return 0;
}

/* The Dataset of la (a new reference; a path is opened). NULL with an exception set. */
static DatasetObject *args_dataset(py_state *st, const loader_args *la)
{
    DatasetObject *d;
    if (PyObject_TypeCheck(la->dataset, st->DatasetType)) {
        d = (DatasetObject *)Py_NewRef(la->dataset);
    } else {
        d = (DatasetObject *)PyObject_CallOneArg((PyObject *)st->DatasetType, la->dataset);
    }
    if (d != NULL && py_dataset_handle(st, d) == NULL) {
        Py_CLEAR(d);
    }
    return d;
}

/* Every argument but state into cfg and *p. 0 or -1. */
static int configure(py_state *st, DatasetObject *d, hdmlp_config *cfg, const loader_args *la,
                     py_loader_params *p)
{
    if (py_loader_configure(st, d->ds, cfg, la->a, p) < 0 ||
        set_image(st, cfg, la->image) < 0 ||
        set_order(st, cfg, la->order, la->relaxed, la->pool_reads) < 0 ||
        set_same_host(st, cfg, la->same_host) < 0) {
        return -1;
    }
    return 0;
}

static PyObject *loader_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    loader_args la;
    if (parse_args(args, kwds, &la) < 0) {
        return NULL;
    }
    py_state *st = py_state_from_type(type);
    LoaderObject *self = (LoaderObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->pid = getpid();
    self->dataset = args_dataset(st, &la);
    if (self->dataset == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    int rc = hdmlp_config_create(&self->cfg);
    if (rc != HDMLP_OK) {
        py_raise(st, rc, "Loader", NULL);
        Py_DECREF(self);
        return NULL;
    }
    PyObject *state = la.a[PY_LOADER_NARGS - 1];
    if (configure(st, self->dataset, self->cfg, &la, &self->p) < 0 ||
        (state != NULL && state != Py_None ? py_loader_resume(st, self, state)
                                           : py_loader_create_c(st, self)) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->dataset->users++;
    return (PyObject *)self;
}

/* Loader._check(...): Loader's argument checks without a loader (see loader_methods). */
static PyObject *loader_check(PyObject *type, PyObject *args, PyObject *kwds)
{
    loader_args la;
    if (parse_args(args, kwds, &la) < 0) {
        return NULL;
    }
    py_state *st = py_state_from_type((PyTypeObject *)type);
    DatasetObject *d = args_dataset(st, &la);
    if (d == NULL) {
        return NULL;
    }
    hdmlp_config *cfg = NULL;
    const int rc = hdmlp_config_create(&cfg);
    py_loader_params p;
    int ok = rc == HDMLP_OK;
    if (!ok) {
        py_raise(st, rc, "Loader", NULL);
    } else {
        ok = configure(st, d, cfg, &la, &p) == 0;
    }
    hdmlp_config_free(cfg);
    Py_DECREF(d);
    if (!ok) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static void loader_close_impl(LoaderObject *self)
{
    if (self->ld != NULL) {
        py_loader_free_c(self);
        self->dataset->users--;
    }
}

static void loader_dealloc(LoaderObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (self->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    loader_close_impl(self);
    hdmlp_config_free(self->cfg);
    Py_CLEAR(self->dataset);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *loader_close(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (self->busy) {
        PyErr_SetString(state_of((PyObject *)self)->StateError,
                        "cannot close the loader while another thread takes a batch from it");
        return NULL;
    }
    loader_close_impl(self);
    Py_RETURN_NONE;
}

static PyObject *loader_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *loader_exit(LoaderObject *self, PyObject *args)
{
    (void)args;
    PyObject *r = loader_close(self, NULL);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

/* ---- methods ---- */

static PyObject *loader_next_batch(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    py_state *st = state_of((PyObject *)self);
    if (self->p.epoch_batches == 0) {
        Py_RETURN_NONE; /* epochs without batches (drop_last, or no samples for this rank) */
    }
    self->resumed = 0;
    hdmlp_batch *b = NULL;
    const int rc = py_loader_fetch(st, self, &b);
    if (rc == PY_ERR_SET) {
        return NULL;
    }
    if (rc == HDMLP_END) {
        Py_RETURN_NONE;
    }
    return py_batch_new(st, b);
}

static PyObject *loader_set_epoch(LoaderObject *self, PyObject *arg)
{
    py_state *st = state_of((PyObject *)self);
    uint64_t e = 0;
    if (py_arg_u64(st, arg, "epoch", &e) < 0) {
        return NULL;
    }
    if (self->p.epochs != 0 && e >= self->p.epochs) {
        return py_raise_arg(st, "epoch", "%llu is past the last epoch (%llu epochs configured)",
                            (unsigned long long)e, (unsigned long long)self->p.epochs);
    }
    self->want_set = 1;
    self->want_epoch = e;
    Py_RETURN_NONE;
}

static PyObject *loader_stats(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    py_state *st = state_of((PyObject *)self);
    if (self->ld == NULL) {
        PyErr_SetString(st->StateError, "the loader is closed");
        return NULL;
    }
    if (self->pid != getpid()) {
        PyErr_SetString(st->StateError, "the loader was created in another process");
        return NULL;
    }
    hdmlp_stats s;
    const int rc = hdmlp_loader_stats(self->ld, &s, sizeof s);
    if (rc != HDMLP_OK) {
        return py_raise(st, rc, "stats", NULL);
    }
    return py_stats_dict(&s);
}

static Py_ssize_t loader_len(LoaderObject *self) { return (Py_ssize_t)self->p.epoch_batches; }

static PyObject *get_u64(uint64_t v) { return PyLong_FromUnsignedLongLong(v); }

static PyObject *get_epoch(LoaderObject *self, void *c)
{
    (void)c;
    return get_u64(py_loader_next_epoch(self));
}

static PyObject *get_epochs(LoaderObject *self, void *c)
{
    (void)c;
    if (self->p.epochs == 0) {
        Py_RETURN_NONE;
    }
    return get_u64(self->p.epochs);
}

static PyObject *get_position(LoaderObject *self, void *c)
{
    (void)c;
    return Py_BuildValue("(KK)", (unsigned long long)self->pos_epoch,
                         (unsigned long long)self->pos_batch);
}

static PyObject *get_dataset(LoaderObject *self, void *c)
{
    (void)c;
    return Py_NewRef((PyObject *)self->dataset);
}

static PyObject *get_closed(LoaderObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->ld == NULL);
}

static PyObject *get_field(LoaderObject *self, void *c)
{
    const char *name = c;
    if (strcmp(name, "batch_size") == 0) {
        return get_u64(self->p.batch_size);
    } else if (strcmp(name, "memory") == 0) {
        return get_u64(self->p.memory);
    } else if (strcmp(name, "seed") == 0) {
        return get_u64(self->p.seed);
    } else if (strcmp(name, "rank") == 0) {
        return get_u64(self->p.rank);
    } else if (strcmp(name, "world") == 0) {
        return get_u64(self->p.world);
    } else if (strcmp(name, "drop_last") == 0) {
        return PyBool_FromLong(self->p.drop_last);
    } else if (strcmp(name, "samples_per_epoch") == 0) {
        return get_u64(self->p.epoch_samples);
    } else if (strcmp(name, "drained_batches") == 0) {
        return get_u64(self->drained);
    } else if (strcmp(name, "restarts") == 0) {
        return get_u64(self->restarts);
    }
    return get_u64(self->p.threads);
}

static PyObject *get_on_corrupt(LoaderObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(self->p.skip_corrupt ? "skip" : "fail");
}

static PyObject *get_last_skip(LoaderObject *self, void *c)
{
    (void)c;
    if (self->ld == NULL || self->pid != getpid()) {
        return PyUnicode_FromString("");
    }
    char buf[1024];
    hdmlp_loader_last_skip(self->ld, buf, sizeof(buf));
    return PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strlen(buf), "replace");
}

static PyObject *loader_repr(LoaderObject *self)
{
    return PyUnicode_FromFormat(
        "<hdmlp.Loader batch_size=%llu memory=%llu seed=%llu rank=%u world=%u epoch=%llu%s>",
        (unsigned long long)self->p.batch_size, (unsigned long long)self->p.memory,
        (unsigned long long)self->p.seed, (unsigned)self->p.rank, (unsigned)self->p.world,
        (unsigned long long)py_loader_next_epoch(self), self->ld == NULL ? " closed" : "");
}

static PyMethodDef loader_methods[] = {
    {"next_batch", (PyCFunction)loader_next_batch, METH_NOARGS,
     "next_batch() -> Batch | None: the next batch of the stream, whatever its epoch; None "
     "after the last epoch. Advances the epoch position like iteration does."},
    {"set_epoch", (PyCFunction)loader_set_epoch, METH_O,
     "set_epoch(e): the next iter(loader) delivers epoch e (as DistributedSampler)."},
    {"stats", (PyCFunction)loader_stats, METH_NOARGS,
     "stats() -> dict: the hdmlp_stats counters, by field name (fill_hist is a list)."},
    {"state_dict", (PyCFunction)py_loader_state_dict, METH_NOARGS,
     "state_dict() -> dict: the position after the last batch handed out (small, picklable: "
     "'format', 'version', 'state' bytes, 'epoch', 'batch'). A Loader made with the same "
     "dataset and order-shaping arguments and given it (load_state_dict, or state=) "
     "delivers exactly what this one would have delivered next."},
    {"load_state_dict", (PyCFunction)py_loader_load_state_dict, METH_O,
     "load_state_dict(state): before the first batch, recreates the C loader resuming from "
     "state_dict()'s dict; the next iter() delivers the rest of the saved epoch. Another "
     "dataset or order-changing argument raises InvalidArgumentError (a ValueError) naming "
     "it; a damaged state raises CorruptDataError. world > 1: pass state= to the "
     "constructor instead (the running loader already talks to its peers)."},
    {"_check", (PyCFunction)(void (*)(void))loader_check,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "_check(dataset, batch_size, memory, **kwargs): raises what Loader() with these "
     "arguments would raise for an unknown keyword or a bad type or range, without making "
     "a loader (no thread, no I/O; the budget's minimum is checked by Loader() only); "
     "state= is not checked."},
    {"close", (PyCFunction)loader_close, METH_NOARGS,
     "close(): stops the I/O threads and frees the loader; batches stay valid. Idempotent."},
    {"__enter__", loader_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)loader_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
    {"dataset", (getter)get_dataset, NULL, "The Dataset.", NULL},
    {"epoch", (getter)get_epoch, NULL, "Epoch the next iter(loader) delivers.", NULL},
    {"epochs", (getter)get_epochs, NULL, "Configured epochs (None = unbounded).", NULL},
    {"position", (getter)get_position, NULL,
     "(epoch, batch): where the next batch of the stream comes from.", NULL},
    {"closed", (getter)get_closed, NULL, "True once closed.", NULL},
    {"on_corrupt", (getter)get_on_corrupt, NULL,
     "'fail' (a corrupt or unreadable sample raises) or 'skip' (left out of its batch, "
     "counted in stats()['skipped_samples']).",
     NULL},
    {"last_skip", (getter)get_last_skip, NULL,
     "Detail of the last skipped sample, naming segment, chunk and sample ('' if none).", NULL},
    {"batch_size", (getter)get_field, NULL, "Samples per batch.", "batch_size"},
    {"memory", (getter)get_field, NULL, "Memory budget in bytes.", "memory"},
    {"seed", (getter)get_field, NULL, "Seed of the delivery order.", "seed"},
    {"rank", (getter)get_field, NULL, "This rank.", "rank"},
    {"world", (getter)get_field, NULL, "World size.", "world"},
    {"threads", (getter)get_field, NULL, "I/O threads.", "threads"},
    {"drop_last", (getter)get_field, NULL, "Whether short last batches are dropped.",
     "drop_last"},
    {"samples_per_epoch", (getter)get_field, NULL, "Samples this rank gets per epoch.",
     "samples_per_epoch"},
    {"drained_batches", (getter)get_field, NULL,
     "Batches read and dropped to reach a requested epoch (set_epoch, abandoned epochs).",
     "drained_batches"},
    {"restarts", (getter)get_field, NULL, "Times the C loader was recreated (set_epoch back).",
     "restarts"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef loader_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(LoaderObject, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(
    loader_doc,
    "Loader(dataset, batch_size, memory, *, seed=None, epochs=None, rank=0, world=1,\n"
    "       drop_last=False, threads=2, refill='auto', policy='fill-rate', engine='auto',\n"
    "       lookahead=0, direct_io='auto', storage_cost=None, peers=None, listen=None,\n"
    "       job_token=None, remote_memory=None, prefetch=None, peer_timeout=None,\n"
    "       on_corrupt='fail', tls=None, state=None, image=None, relaxed=False,\n"
    "       same_host='shm', order='strict', pool_reads=None)\n\n"
    "Batches in a globally random order, each sample once per epoch, within `memory` bytes\n"
    "(int, or '256M', '1.5GiB', '25%' of the dataset's raw bytes). dataset: a Dataset or a\n"
    "path. seed None means 0: every rank must use the same seed. epochs None = unbounded.\n"
    "world > 1: peers lists every rank's 'host:port' in rank order (this rank listens on\n"
    "its own entry, or on `listen`); job_token, remote_memory (like memory), prefetch\n"
    "(window) and peer_timeout (seconds) as in hdmlp.h. hdmlp.torch fills them from\n"
    "torch.distributed. tls=(ca_file, cert_file, key_file): mutual TLS between the ranks\n"
    "(PEM paths, as hdmlp_config_set_tls; every rank must use it). same_host: how ranks on\n"
    "this host exchange: 'shm' (shared-memory rings, samples lent without a copy), 'socket'\n"
    "(gRPC over a Unix socket) or 'tcp' (as remote ranks). on_corrupt='skip' leaves\n"
    "corrupt or unreadable samples out of their batch (which is then shorter), counts them in\n"
    "stats()['skipped_samples'] and names the last in last_skip; 'fail' raises\n"
    "CorruptDataError / StorageError. order='pool' reads every byte once per epoch and\n"
    "draws each sample uniformly from a pool held in `memory` (relaxed=True is its former\n"
    "name); pool_reads, reads per chunk per epoch, is its knob (None = one device request\n"
    "per read), as hdmlp_config_set_order and hdmlp_config_set_pool_reads.\n"
    "state: a dict from state_dict() to resume from (see load_state_dict).\n"
    "image=hdmlp.ImagePipeline(...): the loader decodes and augments every sample (an\n"
    "encoded image) on its own threads; batch.images is then one (n, H, W, C) numpy array\n"
    "(zero-copy) and batch.labels its labels. Corrupt images follow on_corrupt.\n\n"
    "for batch in loader: one epoch (len(loader) batches); each new iteration delivers the\n"
    "next epoch, as with a PyTorch DataLoader. Leaving an epoch early and iterating again\n"
    "skips the rest of it (its batches are read and dropped). set_epoch(e) chooses the\n"
    "epoch of the next iteration: a later epoch drains the epochs in between, an earlier\n"
    "one recreates the C loader and drains from epoch 0. With epochs=N, an iteration past\n"
    "epoch N - 1 raises StateError (not an empty epoch).\n\n"
    "One thread at a time takes batches; the GIL is released while waiting and Ctrl-C\n"
    "interrupts a wait (nothing is lost: the next call resumes). Batches stay valid after\n"
    "the loader is closed. A loader does not survive fork().");

int py_loader_init_types(PyObject *module, py_state *st)
{
    PyType_Slot loader_slots[] = {
        {Py_tp_doc, (void *)loader_doc},
        PY_SLOT(Py_tp_new, loader_new),
        PY_SLOT(Py_tp_dealloc, loader_dealloc),
        PY_SLOT(Py_tp_repr, loader_repr),
        PY_SLOT(Py_tp_iter, py_loader_iter),
        {Py_tp_methods, (void *)loader_methods},
        {Py_tp_getset, (void *)loader_getset},
        {Py_tp_members, (void *)loader_members},
        PY_SLOT(Py_mp_length, loader_len),
        PY_SLOT(Py_sq_length, loader_len),
        {0, NULL},
    };
    PyType_Spec loader_spec = {
        .name = "hdmlp.Loader",
        .basicsize = sizeof(LoaderObject),
        .flags = Py_TPFLAGS_DEFAULT,
        .slots = loader_slots,
    };
    st->LoaderType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &loader_spec, NULL);
    if (st->LoaderType == NULL) {
        return -1;
    }
    if (py_loader_init_epochiter(module, st) < 0) {
        return -1;
    }
    /* Loader._keywords: its keyword arguments (hdmlp.torch checks what it passes on). */
    PyObject *names =
        PyTuple_New((Py_ssize_t)(sizeof(loader_kwlist) / sizeof(*loader_kwlist)) - 1);
    for (Py_ssize_t i = 0; names != NULL && loader_kwlist[i] != NULL; i++) {
        PyObject *name = PyUnicode_FromString(loader_kwlist[i]);
        if (name == NULL) {
            Py_CLEAR(names);
        } else {
            PyTuple_SET_ITEM(names, i, name);
        }
    }
    const int rc = names == NULL
                       ? -1
                       : PyObject_SetAttrString((PyObject *)st->LoaderType, "_keywords", names);
    Py_XDECREF(names);
    if (rc < 0) {
        return -1;
    }
    return PyModule_AddType(module, st->LoaderType);
}
