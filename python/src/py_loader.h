/*
 * hdmlp.Loader's parts (private to py_loader*.c): the type, its construction and methods
 * (py_loader.c), the C loader and taking batches from it (py_loader_fetch.c), and epoch
 * iteration (py_loader_iter.c).
 */
#ifndef HDMLP_PY_LOADER_H
#define HDMLP_PY_LOADER_H

#include "py_internal.h"

#define PY_ERR_SET (-1000) /* a Python exception is set */

static inline py_state *state_of(PyObject *self) { return py_state_from_type(Py_TYPE(self)); }

/* Creates the C loader from self->cfg, positioned at the start of the stream. 0 or -1. */
int py_loader_create_c(py_state *st, LoaderObject *self);
/* Takes the next batch of the C stream into *out. Returns HDMLP_OK, HDMLP_END or
 * PY_ERR_SET (exception set; errors of the C loader are raised here). */
int py_loader_fetch(py_state *st, LoaderObject *self, hdmlp_batch **out);

/* Epoch the next iter() delivers. */
uint64_t py_loader_next_epoch(const LoaderObject *self);
/* iter(loader): an iterator over the next epoch (recreating the C loader to go back). */
PyObject *py_loader_iter(LoaderObject *self);
/* Creates st->EpochIterType. 0 or -1. */
int py_loader_init_epochiter(PyObject *module, py_state *st);

#endif
