/*
 * hdmlp.Loader's epoch iteration: iter(loader) starts the next epoch (or the one set_epoch
 * chose), and its EpochIterator yields that epoch's batches, draining earlier ones.
 */
#include "py_loader.h"

typedef struct EpochIterObject {
    PyObject ob_base;
    LoaderObject *loader;
    uint64_t gen;
    uint64_t epoch;
} EpochIterObject;

/* Epoch the next iter() delivers. */
uint64_t py_loader_next_epoch(const LoaderObject *self)
{
    if (self->want_set) {
        return self->want_epoch;
    }
    if (self->resumed) {
        return self->resumed_epoch; /* the rest of the epoch the saved loader was in */
    }
    return self->pos_batch == 0 ? self->pos_epoch : self->pos_epoch + 1;
}

static int restart(py_state *st, LoaderObject *self)
{
    py_loader_free_c(self);
    self->restarts++;
    if (py_loader_create_c(st, self) < 0) {
        self->dataset->users--;
        return -1;
    }
    return 0;
}

PyObject *py_loader_iter(LoaderObject *self)
{
    py_state *st = state_of((PyObject *)self);
    if (py_loader_check_usable(st, self) < 0) {
        return NULL;
    }
    const uint64_t target = py_loader_next_epoch(self);
    /* Right after a resume, the saved epoch continues (possibly with nothing left). */
    const int rest = self->resumed && target == self->resumed_epoch;
    if (!rest && self->p.epochs != 0 && target >= self->p.epochs) {
        /* An empty epoch would let a training loop run on nothing without noticing. */
        PyErr_Format(st->StateError,
                     "iter(loader): epoch %llu is past the last one: this loader was made with "
                     "epochs=%llu (epochs 0..%llu); make it with a larger epochs=, or "
                     "epochs=None for no limit",
                     (unsigned long long)target, (unsigned long long)self->p.epochs,
                     (unsigned long long)self->p.epochs - 1);
        return NULL;
    }
    self->want_set = 0;
    self->resumed = 0;
    self->tail = 0;
    if (!rest &&
        (target < self->pos_epoch || (target == self->pos_epoch && self->pos_batch > 0))) {
        if (restart(st, self) < 0) {
            return NULL;
        }
    }
    EpochIterObject *it = PyObject_New(EpochIterObject, st->EpochIterType);
    if (it == NULL) {
        return NULL;
    }
    it->loader = (LoaderObject *)Py_NewRef(self);
    it->gen = ++self->iter_gen;
    it->epoch = target;
    return (PyObject *)it;
}

static void epochiter_dealloc(EpochIterObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_DECREF(self->loader);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *epochiter_next(EpochIterObject *self)
{
    LoaderObject *ldo = self->loader;
    py_state *st = state_of((PyObject *)ldo);
    if (self->gen != ldo->iter_gen) {
        PyErr_SetString(st->StateError,
                        "this epoch iterator was superseded by a newer iter(loader)");
        return NULL;
    }
    if ((ldo->p.epochs != 0 && self->epoch >= ldo->p.epochs) || ldo->p.epoch_batches == 0) {
        return NULL;
    }
    for (;;) {
        if (ldo->pos_epoch > self->epoch) {
            /* Epoch complete. After the last configured epoch, take the END now: it is
             * immediate, and it is what tells peer ranks this rank is done. */
            ldo->tail = 0;
            if (ldo->p.epochs != 0 && ldo->pos_epoch >= ldo->p.epochs && !ldo->ended &&
                !ldo->have_stash && ldo->ld != NULL) {
                hdmlp_batch *none = NULL;
                const int rc = py_loader_fetch(st, ldo, &none);
                if (rc == HDMLP_OK) {
                    hdmlp_batch_release(none); /* cannot happen: END is due */
                }
                if (rc == PY_ERR_SET) {
                    return NULL;
                }
            }
            return NULL;
        }
        hdmlp_batch *b = NULL;
        const int rc = py_loader_fetch(st, ldo, &b);
        if (rc == PY_ERR_SET) {
            return NULL;
        }
        if (rc == HDMLP_END) {
            return NULL;
        }
        if (hdmlp_batch_epoch(b) < self->epoch) {
            hdmlp_batch_release(b); /* draining towards the requested epoch */
            ldo->drained++;
            continue;
        }
        return py_batch_new(st, b);
    }
}

static PyObject *epochiter_self(PyObject *self) { return Py_NewRef(self); }

static PyObject *epochiter_length_hint(EpochIterObject *self, PyObject *unused)
{
    (void)unused;
    const LoaderObject *ldo = self->loader;
    uint64_t left = 0;
    if (self->gen == ldo->iter_gen && !(ldo->p.epochs != 0 && self->epoch >= ldo->p.epochs)) {
        if (ldo->pos_epoch < self->epoch) {
            left = ldo->p.epoch_batches;
        } else if (ldo->pos_epoch == self->epoch) {
            left = ldo->p.epoch_batches - ldo->pos_batch;
        }
    }
    return PyLong_FromUnsignedLongLong(left);
}

static PyObject *epochiter_get_epoch(EpochIterObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->epoch);
}

static PyMethodDef epochiter_methods[] = {
    {"__length_hint__", (PyCFunction)epochiter_length_hint, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef epochiter_getset[] = {
    {"epoch", (getter)epochiter_get_epoch, NULL, "The epoch this iterator delivers.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

int py_loader_init_epochiter(PyObject *module, py_state *st)
{
    PyType_Slot epochiter_slots[] = {
        {Py_tp_doc, (void *)"Iterator over one epoch of a Loader's batches."},
        PY_SLOT(Py_tp_dealloc, epochiter_dealloc),
        PY_SLOT(Py_tp_iter, epochiter_self),
        PY_SLOT(Py_tp_iternext, epochiter_next),
        {Py_tp_methods, (void *)epochiter_methods},
        {Py_tp_getset, (void *)epochiter_getset},
        {0, NULL},
    };
    PyType_Spec epochiter_spec = {
        .name = "hdmlp.EpochIterator",
        .basicsize = sizeof(EpochIterObject),
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
        .slots = epochiter_slots,
    };
    st->EpochIterType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &epochiter_spec, NULL);
    if (st->EpochIterType == NULL) {
        return -1;
    }
    return 0;
}
