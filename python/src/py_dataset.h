/*
 * hdmlp.Dataset's parts (private to py_dataset*.c): the type and its lifecycle
 * (py_dataset.c), sample access (py_dataset_read.c) and properties (py_dataset_props.c).
 */
#ifndef HDMLP_PY_DATASET_H
#define HDMLP_PY_DATASET_H

#include "py_internal.h"

static inline py_state *state_of(PyObject *self) { return py_state_from_type(Py_TYPE(self)); }

/* Label `label`'s name as str (surrogateescape), or None when it has none. */
PyObject *py_dataset_label_str(hdmlp_dataset *ds, uint32_t label);

/* ds[key] / the sequence item i: sample bytes (verified, decompressed). */
PyObject *py_dataset_subscript(DatasetObject *self, PyObject *key);
PyObject *py_dataset_item(DatasetObject *self, Py_ssize_t i);
/* The methods read, read_into, info, find, verify and largest_batch_bytes. */
PyObject *py_dataset_read(DatasetObject *self, PyObject *key);
PyObject *py_dataset_read_into(DatasetObject *self, PyObject *args);
PyObject *py_dataset_info(DatasetObject *self, PyObject *key);
PyObject *py_dataset_find(DatasetObject *self, PyObject *key);
PyObject *py_dataset_verify(DatasetObject *self, PyObject *unused);
PyObject *py_dataset_largest_batch_bytes(DatasetObject *self, PyObject *arg);

/* The properties (path, closed, chunk_size, ..., labels). */
extern PyGetSetDef py_dataset_getset[];

#endif
