/*
 * hdmlp.Loader's C loader: making and freeing it, and taking the next batch of its stream.
 *
 * Waiting: every next() first asks the C loader with hdmlp_loader_interrupt() armed, so a
 * ready batch comes back at once (GIL released) and an unready one returns
 * HDMLP_E_INTERRUPTED without losing anything; only then does the wait move to the helper
 * thread of py_wait.c, where signals (Ctrl-C) can interrupt it.
 */
#include "py_loader.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

/* Creates a C loader from self->cfg with every signal blocked, so the library's I/O
 * threads inherit a mask that leaves signals to the Python threads. */
int py_loader_make_c(py_state *st, LoaderObject *self, hdmlp_loader **out)
{
    hdmlp_dataset *ds = self->dataset->ds;
    hdmlp_config *cfg = self->cfg;
    hdmlp_loader *ld = NULL;
    char detail[1024] = "";
    int rc;
    PyThreadState *ts = PyEval_SaveThread();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = hdmlp_loader_create(ds, cfg, &ld);
    if (rc != HDMLP_OK) {
        snprintf(detail, sizeof(detail), "%s", hdmlp_last_error());
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    PyEval_RestoreThread(ts);
    if (rc != HDMLP_OK) {
        *out = NULL;
        py_raise(st, rc, "Loader", detail);
        return -1;
    }
    /* memory='P%' below what the dataset needs was raised (hdmlp_config_set_memory_raise). */
    hdmlp_stats s;
    if (hdmlp_loader_stats(ld, &s, sizeof s) == HDMLP_OK &&
        s.memory_budget > s.memory_configured &&
        PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                         "memory: %llu bytes (the share of the dataset asked for) is less than "
                         "this dataset needs with batch_size %llu and this configuration; "
                         "raised to %llu bytes, the least that works (a budget in bytes is "
                         "never raised)",
                         (unsigned long long)s.memory_configured,
                         (unsigned long long)self->p.batch_size,
                         (unsigned long long)s.memory_budget) < 0) {
        ts = PyEval_SaveThread();
        hdmlp_loader_free(ld);
        PyEval_RestoreThread(ts);
        *out = NULL;
        return -1;
    }
    *out = ld;
    return 0;
}

/* Creates the C loader from self->cfg, positioned at the start of the stream. */
int py_loader_create_c(py_state *st, LoaderObject *self)
{
    hdmlp_loader *ld = NULL;
    if (py_loader_make_c(st, self, &ld) < 0) {
        return -1;
    }
    self->ld = ld;
    self->pos_epoch = 0;
    self->pos_batch = 0;
    self->ended = 0;
    self->taken = 0;
    self->resumed = 0;
    self->tail = 0;
    return 0;
}

/* Frees the C loader (not its config). Outstanding batches stay valid (C guarantee). */
void py_loader_free_c(LoaderObject *self)
{
    const int owner = self->pid == getpid();
    if (self->have_stash) {
        if (owner) {
            hdmlp_batch_release(self->stash);
        }
        self->stash = NULL;
        self->have_stash = 0;
    }
    if (owner) {
        py_waiter *w = self->waiter;
        hdmlp_loader *ld = self->ld;
        PyThreadState *ts = PyEval_SaveThread();
        py_waiter_free(w);
        hdmlp_loader_free(ld);
        PyEval_RestoreThread(ts);
    }
    /* In a forked child the threads do not exist: leave the copies alone. */
    self->waiter = NULL;
    self->ld = NULL;
}

int py_loader_check_usable(py_state *st, LoaderObject *self)
{
    if (self->ld == NULL) {
        PyErr_SetString(st->StateError, "the loader is closed");
        return -1;
    }
    if (self->pid != getpid()) {
        PyErr_SetString(st->StateError,
                        "the loader was created in another process (it does not survive "
                        "fork); create a new Loader in this process");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(st->StateError,
                        "another thread is taking a batch from this loader; a loader has one "
                        "consumer at a time");
        return -1;
    }
    return 0;
}

/* Waits on the helper thread for a batch that was not ready. Returns the call's status
 * (detail copied) or PY_ERR_SET if a signal handler raised (the outcome of the call is
 * then kept for the next fetch). */
static int wait_slow(py_state *st, LoaderObject *self, hdmlp_batch **out, char *detail,
                     size_t cap)
{
    (void)st;
    if (PyErr_CheckSignals() < 0) {
        return PY_ERR_SET; /* nothing in flight: the C loader resumes the same batch */
    }
    if (self->waiter == NULL) {
        const int e = py_waiter_create(&self->waiter);
        if (e != 0) {
            errno = e;
            PyErr_SetFromErrno(PyExc_OSError);
            return PY_ERR_SET;
        }
    }
    py_waiter *w = self->waiter;
    hdmlp_loader *ld = self->ld;
    py_waiter_submit(w, ld);
    for (;;) {
        PyThreadState *ts = PyEval_SaveThread();
        const int r = py_waiter_wait(w);
        PyEval_RestoreThread(ts);
        if (r == 0) {
            break;
        }
        if (PyErr_CheckSignals() < 0) {
            /* Wake the helper and collect its outcome: nothing is lost. */
            ts = PyEval_SaveThread();
            hdmlp_loader_interrupt(ld);
            py_waiter_wait_all(w);
            PyEval_RestoreThread(ts);
            const char *d = NULL;
            hdmlp_batch *b = NULL;
            const int rc = py_waiter_result(w, &b, &d);
            if (rc != HDMLP_E_INTERRUPTED) {
                self->have_stash = 1;
                self->stash = b;
                self->stash_rc = rc;
                snprintf(self->stash_detail, sizeof(self->stash_detail), "%s", d);
            }
            return PY_ERR_SET;
        }
    }
    const char *d = NULL;
    const int rc = py_waiter_result(w, out, &d);
    snprintf(detail, cap, "%s", d);
    return rc;
}

/* Takes the next batch of the C stream into *out. Returns HDMLP_OK, HDMLP_END or
 * PY_ERR_SET (exception set; errors of the C loader are raised here). */
int py_loader_fetch(py_state *st, LoaderObject *self, hdmlp_batch **out)
{
    *out = NULL;
    if (py_loader_check_usable(st, self) < 0) {
        return PY_ERR_SET;
    }
    int rc;
    hdmlp_batch *b = NULL;
    char detail[1024] = "";
    if (self->have_stash) {
        self->have_stash = 0;
        rc = self->stash_rc;
        b = self->stash;
        self->stash = NULL;
        snprintf(detail, sizeof(detail), "%s", self->stash_detail);
    } else if (self->ended) {
        return HDMLP_END;
    } else {
        hdmlp_loader *ld = self->ld;
        self->busy = 1;
        PyThreadState *ts = PyEval_SaveThread();
        hdmlp_loader_interrupt(ld); /* a batch not ready returns E_INTERRUPTED: no wait */
        rc = hdmlp_loader_next(ld, &b);
        if (rc != HDMLP_OK && rc != HDMLP_END && rc != HDMLP_E_INTERRUPTED) {
            snprintf(detail, sizeof(detail), "%s", hdmlp_last_error());
        }
        PyEval_RestoreThread(ts);
        if (rc == HDMLP_E_INTERRUPTED) {
            rc = wait_slow(st, self, &b, detail, sizeof(detail));
        }
        self->busy = 0;
        if (rc == PY_ERR_SET) {
            return PY_ERR_SET;
        }
    }
    if (rc == HDMLP_END) {
        self->ended = 1;
        self->taken = 1;
        return HDMLP_END;
    }
    if (rc != HDMLP_OK) {
        py_raise(st, rc, "next", detail);
        return PY_ERR_SET;
    }
    if (hdmlp_batch_epoch(b) != self->pos_epoch) {
        PyErr_Format(st->StateError,
                     "loader delivered a batch of epoch %llu where epoch %llu batch %llu was "
                     "expected (%llu batches per epoch)",
                     (unsigned long long)hdmlp_batch_epoch(b),
                     (unsigned long long)self->pos_epoch, (unsigned long long)self->pos_batch,
                     (unsigned long long)self->p.epoch_batches);
        hdmlp_batch_release(b);
        return PY_ERR_SET;
    }
    self->taken = 1;
    self->tail = 0;
    if (++self->pos_batch == self->p.epoch_batches) {
        self->pos_batch = 0;
        self->pos_epoch++;
        self->tail = 1; /* until the epoch's iteration sees its end */
    }
    *out = b;
    return HDMLP_OK;
}
