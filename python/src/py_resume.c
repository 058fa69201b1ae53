/*
 * Exact resume for hdmlp.Loader: state_dict() / load_state_dict(state) / Loader(state=).
 *
 * The dict holds the C library's state bytes (hdmlp_loader_save_state: position after the
 * last batch handed out plus a fingerprint of the dataset and of the order-shaping
 * config) and the binding's own stream position (epoch, batch within it), so that the
 * resumed loader's next iter() delivers the rest of the saved epoch. The C library checks
 * the fingerprint when the loader is created (another dataset, seed, batch size, memory,
 * world, ... → HDMLP_E_INVAL naming the field, raised as InvalidArgumentError).
 *
 *   {"format": "hdmlp.Loader", "version": 1, "state": bytes, "epoch": int, "batch": int}
 *
 * (epoch, batch): batches of `epoch` handed out. batch == batches per epoch when the state
 * was saved after an epoch's last batch but before its iteration ended (inside the loop
 * body): the resumed loader's next iter() then ends that epoch at once, so a training loop
 * that re-enters "epoch e" neither repeats nor skips anything.
 */
#include "py_internal.h"

#include <unistd.h>

#define STATE_FORMAT "hdmlp.Loader"

PyObject *py_loader_state_dict(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    py_state *st = py_state_from_type(Py_TYPE(self));
    if (py_loader_check_usable(st, self) < 0) {
        return NULL;
    }
    if (self->have_stash && self->stash != NULL) {
        /* The C position already counts it, but Python has not handed it out. */
        PyErr_SetString(st->StateError,
                        "state_dict: a batch taken by an interrupted wait has not been handed "
                        "out yet; take it (next) before saving the state");
        return NULL;
    }
    uint8_t buf[HDMLP_STATE_MAX];
    size_t len = 0;
    const int rc = hdmlp_loader_save_state(self->ld, buf, sizeof(buf), &len);
    if (rc != HDMLP_OK) {
        return py_raise(st, rc, "state_dict", NULL);
    }
    /* Saved inside an epoch whose batches are all out: (epoch, batches per epoch). */
    const uint64_t epoch = self->tail ? self->pos_epoch - 1 : self->pos_epoch;
    const uint64_t batch = self->tail ? self->p.epoch_batches : self->pos_batch;
    return Py_BuildValue("{s:s,s:i,s:y#,s:K,s:K}", "format", STATE_FORMAT, "version",
                         PY_STATE_VERSION, "state", (const char *)buf, (Py_ssize_t)len, "epoch",
                         (unsigned long long)epoch, "batch", (unsigned long long)batch);
}

typedef struct parsed_state {
    uint8_t bytes[HDMLP_STATE_MAX];
    size_t len;
    uint64_t epoch, batch;
} parsed_state;

/* Item `key` of dict d (borrowed), or NULL with InvalidArgumentError "state: ..." set. */
static PyObject *item(py_state *st, PyObject *d, const char *key)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (v == NULL) {
        py_raise_arg(st, "state", "missing '%s' (not a dict from Loader.state_dict())", key);
    }
    return v;
}

static int parse(py_state *st, const LoaderObject *self, PyObject *d, parsed_state *out)
{
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError,
                     "state: expected the dict of Loader.state_dict(), got %.80s",
                     Py_TYPE(d)->tp_name);
        return -1;
    }
    PyObject *fmt = item(st, d, "format");
    if (fmt == NULL) {
        return -1;
    }
    if (!PyUnicode_Check(fmt) || PyUnicode_CompareWithASCIIString(fmt, STATE_FORMAT) != 0) {
        py_raise_arg(st, "state", "format %R is not '%s'", fmt, STATE_FORMAT);
        return -1;
    }
    PyObject *ver = item(st, d, "version");
    if (ver == NULL) {
        return -1;
    }
    const long v = PyLong_Check(ver) ? PyLong_AsLong(ver) : -1;
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v != PY_STATE_VERSION) {
        py_raise_arg(st, "state", "version %R is not supported (this hdmlp reads version %d)",
                     ver, PY_STATE_VERSION);
        return -1;
    }
    PyObject *bytes = item(st, d, "state");
    PyObject *epoch = bytes != NULL ? item(st, d, "epoch") : NULL;
    PyObject *batch = epoch != NULL ? item(st, d, "batch") : NULL;
    if (batch == NULL) {
        return -1;
    }
    if (py_arg_u64(st, epoch, "state['epoch']", &out->epoch) < 0 ||
        py_arg_u64(st, batch, "state['batch']", &out->batch) < 0) {
        return -1;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(bytes, &view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    const int fits = view.len > 0 && (size_t)view.len <= sizeof(out->bytes);
    if (fits) {
        memcpy(out->bytes, view.buf, (size_t)view.len);
        out->len = (size_t)view.len;
    }
    PyBuffer_Release(&view);
    if (!fits) {
        py_raise_arg(st, "state", "'state' holds %zd bytes, not 1..%d", view.len,
                     HDMLP_STATE_MAX);
        return -1;
    }
    const py_loader_params *p = &self->p;
    if ((p->epochs != 0 && out->epoch >= p->epochs) || out->batch > p->epoch_batches) {
        py_raise_arg(st, "state",
                     "position (epoch %llu, batch %llu) is outside this loader's %llu "
                     "epoch(s) of %llu batches",
                     (unsigned long long)out->epoch, (unsigned long long)out->batch,
                     (unsigned long long)p->epochs, (unsigned long long)p->epoch_batches);
        return -1;
    }
    return 0;
}

/* Checks the dict's (epoch, batch) against the position inside the C state (which the C
 * loader, already made from it, has accepted for this batch size). 0 or -1 with the
 * exception set. */
static int check_position(py_state *st, const LoaderObject *self, const parsed_state *ps)
{
    const py_loader_params *p = &self->p;
    uint64_t c_epoch = 0, c_pos = 0;
    const int rc = hdmlp_state_position(ps->bytes, ps->len, &c_epoch, &c_pos);
    if (rc != HDMLP_OK) {
        py_raise(st, rc, "state", NULL);
        return -1;
    }
    /* The C state counts this rank's samples taken (skipped ones included). The next batch
     * is batch b of epoch e: */
    uint64_t e = ps->epoch, b = ps->batch;
    if (b == p->epoch_batches && b > 0) {
        e++;
        b = 0;
    }
    const uint64_t want_epoch = e, want_pos = b * p->batch_size;
    /* With drop_last, the previous epoch's short tail is consumed (dropped) only when the
     * next batch is assembled: the state may still stand before it. */
    const int before_tail = b == 0 && e > 0 && p->drop_last &&
                            p->epoch_samples % p->batch_size != 0 && c_epoch == e - 1 &&
                            c_pos == p->epoch_batches * p->batch_size;
    if ((c_epoch != want_epoch || c_pos != want_pos) && !before_tail) {
        py_raise_arg(st, "state",
                     "position (epoch %llu, batch %llu) does not match the loader state "
                     "inside it (epoch %llu, sample %llu)",
                     (unsigned long long)ps->epoch, (unsigned long long)ps->batch,
                     (unsigned long long)c_epoch, (unsigned long long)c_pos);
        return -1;
    }
    return 0;
}

int py_loader_resume(py_state *st, LoaderObject *self, PyObject *state)
{
    parsed_state ps;
    if (parse(st, self, state, &ps) < 0) {
        return -1;
    }
    int rc = hdmlp_config_set_resume(self->cfg, ps.bytes, ps.len);
    if (rc != HDMLP_OK) {
        py_raise(st, rc, "state", NULL);
        return -1;
    }
    hdmlp_loader *ld = NULL;
    rc = py_loader_make_c(st, self, &ld);
    /* Later restarts (set_epoch back) start from the beginning, not from this state. */
    hdmlp_config_set_resume(self->cfg, NULL, 0);
    if (rc < 0) {
        return -1;
    }
    if (check_position(st, self, &ps) < 0) {
        PyThreadState *ts = PyEval_SaveThread();
        hdmlp_loader_free(ld);
        PyEval_RestoreThread(ts);
        return -1;
    }
    if (self->ld != NULL) {
        py_loader_free_c(self);
    }
    self->ld = ld;
    const int complete = ps.batch == self->p.epoch_batches && ps.batch > 0;
    self->pos_epoch = complete ? ps.epoch + 1 : ps.epoch;
    self->pos_batch = complete ? 0 : ps.batch;
    self->tail = complete;
    self->ended = 0;
    self->taken = 0;
    self->resumed = 1;
    self->resumed_epoch = ps.epoch;
    self->want_set = 0;
    self->iter_gen++; /* epoch iterators of the replaced loader are superseded */
    return 0;
}

PyObject *py_loader_load_state_dict(LoaderObject *self, PyObject *state)
{
    py_state *st = py_state_from_type(Py_TYPE(self));
    if (py_loader_check_usable(st, self) < 0) {
        return NULL;
    }
    if (self->taken) {
        PyErr_SetString(st->StateError,
                        "load_state_dict: batches were already taken from this loader; call it "
                        "before iterating (or make a new Loader with state=)");
        return NULL;
    }
    if (self->p.world > 1) {
        /* Replacing a running rank would let its peers see two incarnations of it. */
        PyErr_SetString(st->StateError,
                        "load_state_dict: with world > 1 the loader already exchanges with its "
                        "peers; pass state= to the Loader constructor on every rank instead");
        return NULL;
    }
    if (py_loader_resume(st, self, state) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}
