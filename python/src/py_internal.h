/*
 * hdmlp Python extension (_hdmlp): shared declarations.
 *
 * A thin layer over the public header <hdmlp.h> only. Everything hangs off the module
 * state (multi-phase init, PEP 489): the exception classes and the heap types. The C
 * library's worker threads never touch Python; the extension's own helper thread
 * (py_wait.c) never touches Python either.
 *
 * Layering (a file calls only those below it; no circles, checked from the object files):
 *   py_module.c (module init: adds the types and functions)
 *   py_loader.c → py_loader_iter.c, py_resume.c → py_loader_fetch.c; py_ring.c
 *   py_dataset.c → py_dataset_props.c → py_dataset_read.c; py_batch.c → py_image.c;
 *     py_config.c, py_stats.c
 *   py_args.c, py_errors.c, py_state.c (module def and state), py_wait.c
 */
#ifndef HDMLP_PY_INTERNAL_H
#define HDMLP_PY_INTERNAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <hdmlp.h>

#include <string.h>
#include <sys/types.h>

/* A function pointer as the void * of a PyType_Slot / PyModuleDef_Slot, without the
 * function-to-object pointer conversion ISO C leaves undefined (-Wpedantic). Slot arrays
 * are therefore filled at run time. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers fit in void *");
static inline void *py_fn(void (*f)(void))
{
    void *p;
    memcpy(&p, &f, sizeof(p));
    return p;
}
#define PY_SLOT(id, fn)                                                                        \
    {                                                                                          \
        (id), py_fn((void (*)(void))(fn))                                                      \
    }

typedef struct py_state {
    /* exceptions (see py_errors.c for the hierarchy) */
    PyObject *Error;
    PyObject *CorruptDataError;
    PyObject *FormatVersionError;
    PyObject *StorageError;
    PyObject *NotFoundError;
    PyObject *ExistsError;
    PyObject *PeerError;
    PyObject *InvalidArgumentError;
    PyObject *OutOfMemoryError;
    PyObject *UnsupportedError;
    PyObject *StateError;
    PyObject *InterruptedError;
    PyObject *TimedOutError;
    /* types */
    PyTypeObject *DatasetType;
    PyTypeObject *LoaderType;
    PyTypeObject *EpochIterType;
    PyTypeObject *BatchType;
    PyTypeObject *SampleBufferType;
    PyTypeObject *ImageBufferType;
    /* array.array, for labels and indices */
    PyObject *array_type;
} py_state;

extern PyModuleDef py_module_def;

/* Module state reached from an instance's (possibly subclassed) type. Never NULL for
 * instances of this module's types. */
py_state *py_state_from_type(PyTypeObject *tp);

/* ---- py_errors.c ---- */
int py_errors_init(PyObject *module, py_state *st);
/* Raises the exception mapped from `code`. The message is "<context>: <detail>" (just
 * <detail> when it already starts with the context), or "<context>: <strerror>" without
 * detail. `detail` NULL means hdmlp_last_error() of the calling thread. OSError
 * subclasses get errno and strerror (str: "[Errno N] message"). Always returns NULL. */
PyObject *py_raise(py_state *st, int code, const char *context, const char *detail);
/* Raises InvalidArgumentError (also a ValueError) "<param>: <message>". Returns NULL. */
PyObject *py_raise_arg(py_state *st, const char *param, const char *fmt, ...);

/* ---- py_args.c: argument conversion ---- */
/* A non-negative Python int into *out; TypeError for non-ints (bool included), the mapped
 * InvalidArgumentError for negative or too large values. 0 on success, -1 with an
 * exception set. */
int py_arg_u64(py_state *st, PyObject *obj, const char *param, uint64_t *out);
/* An int in lo..hi into *out; TypeError for non-ints, InvalidArgumentError stating the
 * range lo..hi for any other value. 0 or -1. */
int py_arg_range(py_state *st, PyObject *obj, const char *param, uint64_t lo, uint64_t hi,
                 uint64_t *out);
/* Every key of kwds (NULL: none) is one of kwlist (NULL-terminated); else a TypeError
 * naming the unknown keyword and the closest known one. 0 or -1. */
int py_arg_keywords(PyObject *kwds, char *const *kwlist, const char *func);
/* Memory size: int bytes, or a str "<number>[unit]" (units as hdmlp-bench: K/M/G/T ×1024,
 * KiB.., KB/MB/GB/TB ×1000, B) or "<number>%" of raw_bytes. */
int py_arg_memory(py_state *st, PyObject *obj, uint64_t raw_bytes, uint64_t *out);
/* One of names[0..n) (case-insensitive; '_' matches '-'), its position into *out. */
int py_arg_choice(py_state *st, PyObject *obj, const char *param, const char *const *names,
                  int n, int *out);

/* ---- py_dataset.c ---- */
typedef struct DatasetObject {
    PyObject ob_base;
    hdmlp_dataset *ds; /* NULL once closed */
    PyObject *path;    /* str or bytes, as given */
    Py_ssize_t busy;   /* calls in progress with the GIL released */
    Py_ssize_t users;  /* live loaders over this dataset */
    PyObject *labels;  /* cached array('q') of every sample's label, or NULL */
    PyObject *weakrefs;
} DatasetObject;

int py_dataset_init_type(PyObject *module, py_state *st);
/* The open handle of a Dataset, or NULL with StateError set if closed. */
hdmlp_dataset *py_dataset_handle(py_state *st, DatasetObject *self);

/* ---- py_batch.c ---- */
typedef struct BatchObject {
    PyObject ob_base;
    void *batch; /* the owner of the samples' memory (an hdmlp_batch, or a ring record);
                  * NULL once released */
    void (*release)(void *batch); /* returns it: hdmlp_batch_release, or the ring's */
    const hdmlp_sample_view *views;
    Py_ssize_t n;
    uint64_t epoch;
    Py_ssize_t exports; /* live buffer exports of this batch's samples */
    pid_t pid;          /* process that owns the C batch (not a forked child) */
    PyObject *labels;   /* cached array('q') */
    PyObject *indices;  /* cached array('Q') */
    PyObject *weakrefs;
    int has_image;                    /* decoded by the loader's image pipeline: */
    hdmlp_image_batch image;          /* hdmlp_batch_image()'s description */
    const hdmlp_sample_view *records; /* n field records beside the images, or NULL */
} BatchObject;

int py_batch_init_types(PyObject *module, py_state *st);
/* New Batch owning `batch` (released when the object and all views are gone). On failure
 * the batch is released and NULL returned with an exception set. */
PyObject *py_batch_new(py_state *st, hdmlp_batch *batch);
/* New Batch over `n` views owned by `owner`, given back by release(owner) (also when this
 * fails, with an exception set and NULL returned). */
PyObject *py_batch_wrap(py_state *st, void *owner, void (*release)(void *), Py_ssize_t n,
                        const hdmlp_sample_view *views, uint64_t epoch);

/* ---- py_image.c: the image pipeline ---- */
int py_image_init(PyObject *module, py_state *st);
/* hdmlp.ImagePipeline (any object with its attributes) → a new *out (the caller frees it).
 * 0, or -1 with the exception set (InvalidArgumentError naming the parameter). */
int py_image_config(py_state *st, PyObject *pipeline, hdmlp_image_config **out);
/* Batch.images: a numpy array (a 4-D memoryview without numpy) viewing the batch's decoded
 * images, zero-copy; StateError for a batch without images. */
PyObject *py_image_array(py_state *st, BatchObject *b);

/* ---- py_ring.c: batches in a shared-memory ring (hdmlp.torch's node data plane) ---- */
int py_ring_add_functions(PyObject *module);

/* ---- py_config.c: Loader arguments → hdmlp_config ---- */
typedef struct py_loader_params {
    uint64_t batch_size, epochs, memory, seed, threads; /* epochs 0 = unbounded */
    uint32_t rank, world;
    int drop_last;
    int skip_corrupt;                      /* on_corrupt='skip' */
    uint64_t epoch_samples, epoch_batches; /* this rank's, per epoch */
} py_loader_params;
/* Loader arguments after the dataset, in keyword order: batch_size, memory, seed, epochs,
 * rank, world, drop_last, threads, refill, policy, engine, lookahead, direct_io,
 * storage_cost, peers, listen, job_token, remote_memory, prefetch, peer_timeout,
 * on_corrupt, tls (py_loader_configure handles these), then state (py_loader.c). */
#define PY_LOADER_NARGS 23
/* Checks a[0..PY_LOADER_NARGS) (NULL = not given) and applies them to cfg; fills *p. 0, or
 * -1 with the exception set. */
int py_loader_configure(py_state *st, hdmlp_dataset *ds, hdmlp_config *cfg, PyObject *const *a,
                        py_loader_params *p);

/* ---- py_stats.c ---- */
PyObject *py_stats_dict(const hdmlp_stats *s);

/* ---- py_loader.c ---- */
typedef struct py_waiter py_waiter;
typedef struct LoaderObject {
    PyObject ob_base;
    hdmlp_loader *ld;  /* NULL once closed */
    hdmlp_config *cfg; /* kept to restart the loader (set_epoch to an earlier epoch) */
    DatasetObject *dataset;
    pid_t pid;          /* process that created the C loader */
    py_waiter *waiter;  /* helper thread for interruptible waits, made on first need */
    py_loader_params p; /* the arguments, as configured */
    /* stream position: the next batch the C loader delivers is pos_batch of pos_epoch */
    uint64_t pos_epoch, pos_batch;
    int ended;
    int taken;   /* a batch (or the end) was taken from this C loader */
    int resumed; /* made from a saved state: the next iter() continues resumed_epoch */
    uint64_t resumed_epoch;
    int tail; /* the last batch handed out ended epoch pos_epoch - 1, whose iteration has
                 not seen its end yet (state_dict saves "inside" that epoch) */
    /* result held back by an interrupted wait, handed out by the next fetch */
    int have_stash;
    int stash_rc;
    hdmlp_batch *stash;
    char stash_detail[1024];
    /* epoch iteration */
    uint64_t iter_gen;
    int want_set;
    uint64_t want_epoch;
    uint64_t drained; /* batches read and dropped to reach a requested epoch */
    uint64_t restarts;
    int busy; /* a fetch is in progress (one consumer at a time) */
    PyObject *weakrefs;
} LoaderObject;

int py_loader_init_types(PyObject *module, py_state *st);
/* StateError unless the loader is open, owned by this process and not busy. 0 or -1. */
int py_loader_check_usable(py_state *st, LoaderObject *self);
/* Makes a C loader from self->cfg (GIL released, signals blocked) into *out, or raises
 * (context "Loader"). 0 or -1. */
int py_loader_make_c(py_state *st, LoaderObject *self, hdmlp_loader **out);
/* Frees self's C loader, waiter and held-back batch (not the config); self->ld = NULL. */
void py_loader_free_c(LoaderObject *self);

/* ---- py_resume.c: exact resume (state_dict / load_state_dict) ---- */
/* Format version of the dict state_dict() returns. */
#define PY_STATE_VERSION 1
/* Loader.state_dict(): {"format", "version", "state" (the C bytes), "epoch", "batch"}. */
PyObject *py_loader_state_dict(LoaderObject *self, PyObject *unused);
/* Loader.load_state_dict(state). */
PyObject *py_loader_load_state_dict(LoaderObject *self, PyObject *state);
/* Creates self's C loader resuming from `state` (a state_dict() dict), replacing the current
 * one only on success; sets the stream position. Used by the constructor (self->ld NULL)
 * and load_state_dict. 0 or -1 with the exception set. */
int py_loader_resume(py_state *st, LoaderObject *self, PyObject *state);

/* ---- py_wait.c: interruptible waits for hdmlp_loader_next ---- */
/* Starts the helper thread (all signals blocked in it). 0 or an errno value. */
int py_waiter_create(py_waiter **out);
/* Stops and joins the helper; it must be idle. Accepts NULL. */
void py_waiter_free(py_waiter *w);
/* Hands one hdmlp_loader_next(ld) call to the helper thread. */
void py_waiter_submit(py_waiter *w, hdmlp_loader *ld);
/* Waits for the submitted call. Returns 0 when it finished, EINTR when a signal handler
 * ran first (the call is still in progress: wait again). Call without the GIL. */
int py_waiter_wait(py_waiter *w);
/* Waits for the submitted call, ignoring signals. Call without the GIL. */
void py_waiter_wait_all(py_waiter *w);
/* Result of the finished call: status, batch (owned by the caller) and the helper
 * thread's hdmlp_last_error() copy. */
int py_waiter_result(py_waiter *w, hdmlp_batch **batch, const char **detail);

#endif
