/*
 * The dataset's private part (internal to loader_dataset*.c): what the public struct does not
 * show, shared by opening and closing (loader_dataset_open.c), reading (loader_dataset.c),
 * version 2's table source (loader_dataset_tables2.c) and the samples' keys of either
 * version (loader_dataset_keys.c).
 */
#ifndef HDMLP_LOADER_DATASET_PRIVATE_H
#define HDMLP_LOADER_DATASET_PRIVATE_H

#include "loader_dataset.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef unsigned long long ull;

#define DS_POOL_MAX 16u
#define DS_PATH_MAX 4096u

/* The public struct plus what only loader_dataset*.c use. `pub` comes first so a dataset
 * pointer converts to its container. */
typedef struct ds_private {
    struct hdmlp_dataset pub;
    bool index_mapped;   /* index_map is an mmap (else a heap copy) */
    char *label_names;   /* L NUL-terminated copies of the label names, back to back */
    uint64_t *label_pos; /* L + 1 start offsets into label_names */
    pthread_mutex_t pool_lock;
    fmt_decoder *pool[DS_POOL_MAX]; /* idle decoders */
    unsigned pool_n;
    /* Version 2 (all unused in version 1). The sample tables: DIR/tables read per get from
     * tables_fd (local) or by range reads (remote), or held whole in tables_held. */
    int tables_fd; /* -1 when not open */
    uint8_t
        *tables_held; /* hd_free; what a loader's budget or a forecast holds (ds_tables_hold) */
    uint64_t *offsets_held;    /* N offsets of the held tables' samples (a forecast's hold) */
    pthread_mutex_t hold_lock; /* guards making tables_held, offsets_held and blocks
                                * (reads inside take fd_lock, a remote connection's lock) */
    /* The tables' block offsets (fmt_table2_blocks) for loaders that keep them
     * (ds_tables_sizes): chunk c's bpc blocks at blocks + c × bpc, taken from its first
     * checked view by one thread; blocks_state[c] 0 none, 1 being taken, 2 taken (release
     * store: then read only). NULL when not kept. */
    uint32_t *blocks;
    uint32_t bpc;
    atomic_uchar *blocks_state;
    /* Per chunk: 1 once its table passed fmt_table2_view's whole check (later gets check
     * only its sums): a bit of state a chunk, like keys_ok. */
    atomic_uchar *table_ok;
    /* DIR/keys, held once a key is first asked for (fd_lock guards the loading), until
     * close: keys_bytes bytes, an mmap (keys_mapped) or a heap copy. */
    const uint8_t *keys;
    bool keys_mapped;
    atomic_uchar *keys_ok; /* per chunk: 1 once its key block passed fmt_keys_check */
    /* The last table ds_sample_record read (rec_tab, a view into rec_buf: tables.scratch
     * bytes; rec_chunk UINT64_MAX when none): a scan of sample_info reads each table once. */
    pthread_mutex_t rec_lock;
    uint64_t rec_chunk;
    uint8_t *rec_buf;
    fmt_table rec_tab;
} ds_private;

/* Reads exactly len bytes of fd at off into buf (EINTR and short reads retried): errors name
 * path and what is read, HDMLP_E_CORRUPT at an early end of file. */
int ds_fd_read(int fd, void *buf, uint64_t len, uint64_t off, const char *path,
               const char *what);

static inline ds_private *ds_priv(const hdmlp_dataset *ds)
{
    return (ds_private *)(uintptr_t)ds;
}

/* "<dataset path or URL>/<name>" into buf (for messages and opening). */
static inline void ds_file_path(const hdmlp_dataset *ds, const char *name, char *buf,
                                size_t cap)
{
    snprintf(buf, cap, "%s/%s", ds->path, name);
}

/* ---- version 2's table source (loader_dataset_tables2.c) ------------------------------- */

/* At open of a version-2 dataset: refuses a dataset without a single data field
 * (HDMLP_E_UNSUPPORTED naming the field count); opens DIR/tables (local) or fetches it whole
 * (remote), checks its size and the keys file's (ds_keys2_open) and sets ds->tables.
 * HDMLP_E_NOTFOUND naming a missing file, HDMLP_E_CORRUPT naming a file of the wrong size. */
int ds_tables2_open(ds_private *p);
/* Releases what ds_tables2_open and the keys hold (safe after a failed or no open). */
void ds_tables2_close(ds_private *p);

/* ---- keys (loader_dataset_keys.c) ------------------------------------------------------ */

/* At open (version 2): DIR/keys exists with keys_bytes bytes (a HEAD request when remote);
 * the per-chunk check flags. */
int ds_keys2_open(ds_private *p);
/* Unmaps or frees the held keys and the flags. */
void ds_keys2_close(ds_private *p);

/* The keys of one chunk, either version: key t of n (sample first + t) through ds_keys_at. */
typedef struct ds_keys {
    uint64_t chunk, first;
    uint32_t n;
    const uint8_t *blk; /* version 2: the chunk's key block, checked; NULL in version 1 */
    fmt_table t;        /* version 1: the chunk's records (views into the index) */
    const uint8_t *strings;
    uint32_t next; /* cursor: the slot after the last one asked for... */
    uint64_t pos;  /* ...and, version 2, where its key starts in blk */
} ds_keys;

/* Chunk c's keys into *out, valid while the dataset is open. Version 2 holds DIR/keys on the
 * first call and checks the chunk's key block (fmt_keys_check) the first time it is used
 * (always when `recheck`). HDMLP_E_RANGE for c ≥ C; HDMLP_E_CORRUPT naming DIR/keys and the
 * chunk; the file's read errors. Thread-safe. */
int ds_chunk_keys(const hdmlp_dataset *ds, uint64_t c, int recheck, ds_keys *out);
/* Key t (< k->n) in place: *key, *len. Constant time when slots are asked in order. */
void ds_keys_at(ds_keys *k, uint32_t t, const uint8_t **key, uint32_t *len);

#endif
