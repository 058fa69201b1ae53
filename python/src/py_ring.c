/*
 * Batch records in a shared-memory arena: the mechanism of hdmlp.torch's node data plane
 * (hdmlp/_plane.py holds the policy: who writes where, who takes what, when space is
 * reused).
 *
 * The plane process copies each batch its loader delivers into a record of a memfd arena
 * mapped by every DataLoader worker of the rank; a worker wraps the record in an
 * hdmlp.Batch whose samples are zero-copy views of the mapping. Releasing that Batch (or
 * dropping it and every view) sets the record's `released` flag, which the plane reads to
 * reuse the space. A raw-byte batch is not taken by the worker: the worker passes the
 * record's place on, and the training process claims it (`released` 0 -> 2), copies it
 * out and releases it; the plane frees a record nobody will take only while it is
 * unclaimed (0 -> 1), so a claimed record is never reused under the copy. Records are
 * self-describing and checked (magic, length, sequence number) before anyone trusts them.
 *
 * Not the ranks' rings or arena (rpc/): README "Shared memory: three mechanisms, not one"
 * gives the reasons.
 *
 * Record layout (64-byte aligned):
 *   header (64 bytes) | sizes u64[n] | indices u64[n] | labels u32[n] (padded to 8) |
 *   (pad to 64) sample data back to back |
 *   with field records beside images (Batch.records; header records_off != 0), at
 *   records_off (a multiple of 64): sizes u64[n] (pad to 64) | records back to back
 */
#include "py_internal.h"

#include <stdlib.h>

#define RING_MAGIC 0x52504448u /* "HDPR" */
#define RING_ALIGN 64

typedef struct ring_header {
    uint32_t magic;
    uint32_t released; /* 0 live, 2 claimed by the training process, 1 released */
    uint64_t seq;      /* the plane's sequence number of this record */
    uint64_t n;        /* samples */
    uint64_t epoch;
    uint64_t length; /* bytes of the whole record, header included */
    uint64_t data_off;
    uint64_t records_off; /* 0: no field records */
    uint64_t reserved;
} ring_header;

_Static_assert(sizeof(ring_header) == RING_ALIGN, "one cache line");

static uint64_t align_up(uint64_t v)
{
    return (v + RING_ALIGN - 1) & ~(uint64_t)(RING_ALIGN - 1);
}

static uint64_t meta_bytes(uint64_t n) { return 16 * n + ((4 * n + 7) & ~(uint64_t)7); }

/* Bytes of the n views' sizes and data, the data from the first multiple of 64. */
static uint64_t views_bytes(const hdmlp_sample_view *v, Py_ssize_t n, uint64_t meta)
{
    uint64_t data = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        data += v[i].size;
    }
    return align_up(meta) + align_up(data);
}

/* Where the field records start (0 without them) and the whole record's length. */
static uint64_t record_bytes_at(const BatchObject *b, uint64_t *records_off)
{
    const uint64_t n = (uint64_t)b->n;
    const uint64_t samples = views_bytes(b->views, b->n, sizeof(ring_header) + meta_bytes(n));
    *records_off = b->records != NULL ? samples : 0;
    return samples + (b->records != NULL ? views_bytes(b->records, b->n, 8 * n) : 0);
}

static uint64_t record_bytes(const BatchObject *b)
{
    uint64_t unused;
    return record_bytes_at(b, &unused);
}

static BatchObject *live_batch(py_state *st, PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, st->BatchType)) {
        PyErr_Format(PyExc_TypeError, "expected an hdmlp.Batch, got %s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    BatchObject *b = (BatchObject *)obj;
    if (b->batch == NULL) {
        PyErr_SetString(st->StateError, "the batch was released");
        return NULL;
    }
    return b;
}

static py_state *module_state(PyObject *module) { return PyModule_GetState(module); }

/* _ring_record_size(batch) -> bytes the batch's record takes */
static PyObject *ring_record_size(PyObject *module, PyObject *arg)
{
    BatchObject *b = live_batch(module_state(module), arg);
    return b == NULL ? NULL : PyLong_FromUnsignedLongLong(record_bytes(b));
}

/* Writable view of [offset, offset + len) of `arena`, or -1 with an exception set. */
static int arena_range(PyObject *arena, uint64_t offset, uint64_t len, Py_buffer *view, int rw)
{
    if (PyObject_GetBuffer(arena, view, rw ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if (offset % RING_ALIGN != 0 || offset > (uint64_t)view->len ||
        len > (uint64_t)view->len - offset) {
        PyErr_Format(PyExc_ValueError, "ring record [%llu, +%llu) outside the %zd-byte arena",
                     (unsigned long long)offset, (unsigned long long)len, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* _ring_put(arena, offset, batch, seq) -> record length: copies the batch into a record at
 * offset (the caller makes sure the space is free). */
static PyObject *ring_put(PyObject *module, PyObject *args)
{
    PyObject *arena, *obj;
    unsigned long long offset, seq;
    if (!PyArg_ParseTuple(args, "OKOK:_ring_put", &arena, &offset, &obj, &seq)) {
        return NULL;
    }
    BatchObject *b = live_batch(module_state(module), obj);
    if (b == NULL) {
        return NULL;
    }
    uint64_t records_off;
    const uint64_t len = record_bytes_at(b, &records_off);
    Py_buffer view;
    if (arena_range(arena, offset, len, &view, 1) < 0) {
        return NULL;
    }
    char *rec = (char *)view.buf + offset;
    const uint64_t n = (uint64_t)b->n;
    const hdmlp_sample_view *v = b->views;
    PyThreadState *ts = PyEval_SaveThread();
    ring_header *h = (ring_header *)(void *)rec;
    uint64_t *sizes = (uint64_t *)(void *)(rec + sizeof(*h));
    uint64_t *indices = sizes + n;
    uint32_t *labels = (uint32_t *)(indices + n);
    char *data = rec + align_up(sizeof(*h) + meta_bytes(n));
    const uint64_t data_off = (uint64_t)(data - rec);
    for (uint64_t i = 0; i < n; i++) {
        sizes[i] = v[i].size;
        indices[i] = v[i].index;
        labels[i] = v[i].label;
        if (v[i].size > 0) {
            memcpy(data, v[i].data, (size_t)v[i].size);
            data += v[i].size;
        }
    }
    if (records_off != 0) {
        uint64_t *rsizes = (uint64_t *)(void *)(rec + records_off);
        char *rdata = rec + records_off + align_up(8 * n);
        for (uint64_t i = 0; i < n; i++) {
            rsizes[i] = b->records[i].size;
            if (rsizes[i] > 0) {
                memcpy(rdata, b->records[i].data, (size_t)rsizes[i]);
                rdata += rsizes[i];
            }
        }
    }
    *h = (ring_header){.magic = RING_MAGIC,
                       .seq = seq,
                       .n = n,
                       .epoch = b->epoch,
                       .length = len,
                       .data_off = data_off,
                       .records_off = records_off};
    __atomic_store_n(&h->released, 0, __ATOMIC_RELEASE);
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(len);
}

/* The header of the record at (arena, offset[, seq]) from args parsed with `fmt` ("OK" or
 * "OKK"), the arena's buffer in *view (release it after use) and the offset and seq (when
 * `fmt` has it) in *offset and *seq; NULL with an exception set. */
static ring_header *header_at(PyObject *args, const char *fmt, Py_buffer *view,
                              unsigned long long *offset, unsigned long long *seq)
{
    PyObject *arena;
    if (!PyArg_ParseTuple(args, fmt, &arena, offset, seq) ||
        arena_range(arena, *offset, sizeof(ring_header), view, 1) < 0) {
        return NULL;
    }
    return (ring_header *)(void *)((char *)view->buf + *offset);
}

/* The `released` flag of the record at (arena, offset) from args parsed with `fmt`. */
static uint32_t *released_flag(PyObject *args, const char *fmt, Py_buffer *view)
{
    unsigned long long offset, unused;
    ring_header *h = header_at(args, fmt, view, &offset, &unused);
    return h != NULL ? &h->released : NULL;
}

/* _ring_released(arena, offset) -> True once the record's taker released it */
static PyObject *ring_released(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    uint32_t *flag = released_flag(args, "OK:_ring_released", &view);
    if (flag == NULL) {
        return NULL;
    }
    const uint32_t r = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
    PyBuffer_Release(&view);
    return PyBool_FromLong(r == 1);
}

/* Moves the record's flag from 0 to `to`; 1 if it was 0. */
static int flag_from_live(uint32_t *flag, uint32_t to)
{
    uint32_t live = 0;
    return __atomic_compare_exchange_n(flag, &live, to, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* _ring_free(arena, offset): marks a record free that no taker will release (its worker
 * went away, or its session was replaced before the worker joined), unless the training
 * process has claimed it (it releases it after its copy) */
static PyObject *ring_free(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    uint32_t *flag = released_flag(args, "OK:_ring_free", &view);
    if (flag == NULL) {
        return NULL;
    }
    flag_from_live(flag, 1);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* _ring_claim(arena, offset, seq) -> True if the live record `seq` at offset is now this
 * process's to copy out (then take and release it); False if it was freed or reused. */
static PyObject *ring_claim(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long offset, seq;
    Py_buffer view;
    ring_header *h = header_at(args, "OKK:_ring_claim", &view, &offset, &seq);
    if (h == NULL) {
        return NULL;
    }
    const int ours =
        h->magic == RING_MAGIC && __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE) == seq;
    int ok = ours && flag_from_live(&h->released, 2);
    if (ok && (h->magic != RING_MAGIC || h->seq != seq)) {
        __atomic_store_n(&h->released, 0, __ATOMIC_RELEASE); /* not the record meant */
        ok = 0;
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok);
}

/* What a taken record's Batch owns: the arena's buffer export, the views. */
typedef struct ring_taken {
    Py_buffer arena;
    ring_header *h;
    hdmlp_sample_view views[];
} ring_taken;

static void ring_give_back(void *owner)
{
    ring_taken *t = owner;
    __atomic_store_n(&t->h->released, 1, __ATOMIC_RELEASE);
    PyBuffer_Release(&t->arena); /* Batches are released with the GIL held */
    free(t);
}

/* _ring_take(arena, offset, seq) -> Batch over the record (zero-copy views of the arena) */
static PyObject *ring_take(PyObject *module, PyObject *args)
{
    py_state *st = module_state(module);
    unsigned long long offset, seq;
    Py_buffer view;
    ring_header *h = header_at(args, "OKK:_ring_take", &view, &offset, &seq);
    if (h == NULL) {
        return NULL;
    }
    const uint64_t room = (uint64_t)view.len - offset;
    const uint64_t n = h->n;
    if (h->magic != RING_MAGIC || h->seq != seq || h->length > room || n > h->length / 16 ||
        h->data_off < sizeof(*h) + meta_bytes(n) || h->data_off > h->length ||
        (h->records_off != 0 &&
         (h->records_off < h->data_off || h->records_off % RING_ALIGN != 0 ||
          h->records_off > h->length || align_up(8 * n) > h->length - h->records_off))) {
        PyBuffer_Release(&view);
        return PyErr_Format(st->CorruptDataError,
                            "data plane: ring record %llu at offset %llu is damaged "
                            "(magic %u, seq %llu, length %llu)",
                            seq, offset, (unsigned)h->magic, (unsigned long long)h->seq,
                            (unsigned long long)h->length);
    }
    const uint64_t n_views = h->records_off != 0 ? 2 * n : n;
    ring_taken *t = malloc(sizeof(*t) + n_views * sizeof(hdmlp_sample_view));
    if (t == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    t->arena = view;
    t->h = h;
    const char *rec = (const char *)h;
    const uint64_t *sizes = (const uint64_t *)(const void *)(rec + sizeof(*h));
    const uint64_t *indices = sizes + n;
    const uint32_t *labels = (const uint32_t *)(indices + n);
    const uint64_t end = h->records_off != 0 ? h->records_off : h->length;
    const uint64_t *rsizes = (const uint64_t *)(const void *)(rec + h->records_off);
    for (uint64_t part = 0; part < (h->records_off != 0 ? 2u : 1u); part++) {
        const uint64_t *sz = part == 0 ? sizes : rsizes;
        const char *data = rec + (part == 0 ? h->data_off : h->records_off + align_up(8 * n));
        uint64_t left = part == 0 ? end - h->data_off : h->length - (uint64_t)(data - rec);
        for (uint64_t i = 0; i < n; i++) {
            if (sz[i] > left) {
                free(t);
                PyBuffer_Release(&view);
                return PyErr_Format(st->CorruptDataError,
                                    "data plane: ring record %llu: %s %llu overruns the record",
                                    seq, part == 0 ? "sample" : "field record",
                                    (unsigned long long)i);
            }
            t->views[part * n + i] = (hdmlp_sample_view){
                .data = data, .size = sz[i], .index = indices[i], .label = labels[i]};
            data += sz[i];
            left -= sz[i];
        }
    }
    BatchObject *b =
        (BatchObject *)py_batch_wrap(st, t, ring_give_back, (Py_ssize_t)n, t->views, h->epoch);
    if (b != NULL && h->records_off != 0) {
        b->records = t->views + n;
    }
    return (PyObject *)b;
}

static PyMethodDef ring_functions[] = {
    {"_ring_record_size", ring_record_size, METH_O,
     "_ring_record_size(batch) -> bytes of its ring record (hdmlp.torch data plane)."},
    {"_ring_put", ring_put, METH_VARARGS,
     "_ring_put(arena, offset, batch, seq) -> record length: copies the batch into the "
     "arena (without the GIL)."},
    {"_ring_released", ring_released, METH_VARARGS,
     "_ring_released(arena, offset) -> True once the record was released by its taker."},
    {"_ring_free", ring_free, METH_VARARGS,
     "_ring_free(arena, offset): marks a record free that no taker will release."},
    {"_ring_claim", ring_claim, METH_VARARGS,
     "_ring_claim(arena, offset, seq) -> True if the live record is now this process's."},
    {"_ring_take", ring_take, METH_VARARGS,
     "_ring_take(arena, offset, seq) -> Batch viewing the record (checked)."},
    {NULL, NULL, 0, NULL},
};

int py_ring_add_functions(PyObject *module)
{
    return PyModule_AddFunctions(module, ring_functions);
}
