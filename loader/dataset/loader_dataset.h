/* Internal view of an open dataset, shared by the loader's modules. */
#ifndef HDMLP_LOADER_DATASET_H
#define HDMLP_LOADER_DATASET_H

#include "format.h"

#include <pthread.h>
#include <stdio.h>

struct src_store;
struct src_conn;

struct hdmlp_dataset {
    char *path;      /* dataset directory, or URL (no trailing '/') of a remote one */
    void *index_map; /* mmap of DIR/index (or heap copy); owned */
    size_t index_size;
    fmt_index ix; /* validated view of index_map */
    /* Where every per-sample record is read from, a chunk's table at a time (format.h:
     * fmt_tables), chosen at open by the index's version: version 1, views into ix;
     * version 2, DIR/tables read and checked a chunk at a time (loader_dataset_tables2.c). */
    fmt_tables tables;
    int *seg_fd;             /* n_segments buffered fds, -1 until first use */
    int *seg_fd_direct;      /* n_segments O_DIRECT fds, -1 until first use */
    pthread_mutex_t fd_lock; /* also guards conn and the loading of DIR/keys */
    struct src_store *store; /* object store of a remote dataset, else NULL */
    struct src_conn *conn;   /* its connections for the dataset's own reads */
};

/* Returns an open read-only fd for segment s (opened on first use, kept until close;
 * O_DIRECT when direct != 0). Thread-safe. HDMLP_E_NOTFOUND/E_IO/E_MFILE naming the file
 * on failure (the return value is then the negative code). */
int ds_segment_fd(hdmlp_dataset *ds, uint32_t s, int direct);

/* Full path (or URL) of segment s into buf (for messages). */
static inline void ds_segment_path(const hdmlp_dataset *ds, uint32_t s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/" FMT_SEGMENT_NAME_FMT, ds->path, s);
}

/* Reads exactly len bytes at off from segment s (a local file or a remote object), with
 * errors naming the segment. Thread-safe. */
int ds_read(hdmlp_dataset *ds, uint32_t s, void *buf, uint64_t len, uint64_t off);

/* Chunk c's sample table through ds->tables: buf holds cap ≥ ds->tables.scratch bytes (NULL
 * when that is 0); the view is valid while the dataset is open and buf lives. HDMLP_E_RANGE
 * for c ≥ C, a table source's read and checksum errors. Thread-safe. */
int ds_table(const hdmlp_dataset *ds, uint64_t c, void *buf, size_t cap, fmt_table *out);

/* A source over the dataset's sample tables held in memory, for a loader that charges them
 * to its budget (loader_sizing.h: sample_tables) so that planning reads no file: version
 * 2's DIR/tables (a file or a remote object) read whole and each table checked on the first
 * call (kept until close; gets are views, their offsets in a buffer of K × 8 bytes);
 * version 1's are the index's. The tables' errors (HDMLP_E_IO/E_CORRUPT naming file
 * and chunk), HDMLP_E_NOMEM. Thread-safe. */
int ds_tables_hold(hdmlp_dataset *ds, fmt_tables *out);
/* As ds_tables_hold, and every sample's offset summed once and held too (8 bytes a sample,
 * until close): gets are views with nothing to sum or check (scratch 0), for a forecast,
 * which replays every epoch's misses outside any budget. Version 1: ds->tables. */
int ds_tables_hold_offsets(hdmlp_dataset *ds, fmt_tables *out);

/* A source for a loader's planning over a local version-2 dataset's tables that do not fit
 * its budget's share (else, and for tables under FMT_TABLE_MAP_MIN bytes, ds->tables, as
 * for any other reader): each get maps the chunk's
 * table alone and views it in place (no copy; a mapping error names the file and chunk),
 * its buffer (24 bytes and K offsets) keeping the mapping until it views another table or
 * is dropped (fmt_tables.drop, before the buffer is freed): what is resident is what a
 * cache of as many tables read into buffers would hold, and two end pages each. */
fmt_tables ds_tables_mapped(const hdmlp_dataset *ds);

/* Two sources over the same tables for a loader: *plan for planning and *views, checked
 * views with offsets, for the I/O thread that serves a job planning did not prepare.
 * Planning's gets are sizes views (format.h: off NULL; nothing summed or checked, so a miss
 * costs its table's read, not a sum over it), with the tables' block offsets (blk) where
 * the dataset keeps them (`blocks`: 4 bytes a FMT_TABLE_BLOCK samples, once, shared by its
 * loaders; taken from each chunk's first get, which is then a checked view), so planning
 * sums a job's records from its samples' blocks only. Version 2 held (`held`: the loader
 * called ds_tables_hold): both in the held tables; a local version-2 dataset: both read a
 * table a get (a pread into the caller's buffer; nothing is mapped, so no TLB flush reaches
 * the other threads); version 1 and a remote dataset: ds->tables for both (views with
 * offsets). Buffers: each source's scratch. Thread-safe. */
int ds_tables_plan(hdmlp_dataset *ds, int held, int blocks, fmt_tables *plan,
                   fmt_tables *views);
/* Makes the next read of chunk c's version-2 table check it whole again (checksum, every
 * value record), as its first read after open did (verify). No-op for version 1. */
void ds_table_recheck(const hdmlp_dataset *ds, uint64_t c);

/* Sample index's record through its chunk's table (a buffer of the source's scratch size is
 * allocated when it needs one). HDMLP_E_RANGE for index ≥ N, HDMLP_E_NOMEM, ds_table's
 * errors. Thread-safe. */
int ds_sample_record(const hdmlp_dataset *ds, uint64_t index, fmt_sample *out);
/* As ds_sample_record, and for version 2 its value records (F × FMT_VALUE_REC_LEN bytes)
 * into vals when not NULL (a sample with fields decodes from them). */
int ds_sample_values(const hdmlp_dataset *ds, uint64_t index, fmt_sample *out, uint8_t *vals);

/* Remote datasets (loader_dataset_remote.c): the store, its connections and the index
 * (a heap copy in index_map); the segments' sizes; one read; closing. */
int ds_remote_load(hdmlp_dataset *ds, const char *url, const hdmlp_source_config *cfg);
int ds_remote_check_segments(hdmlp_dataset *ds);
int ds_remote_read(hdmlp_dataset *ds, uint32_t s, void *buf, uint64_t len, uint64_t off);
/* Reads len bytes at off of the dataset's object `name` (DIR/name), errors naming its URL. */
int ds_remote_read_object(hdmlp_dataset *ds, const char *name, void *buf, uint64_t len,
                          uint64_t off);
void ds_remote_close(hdmlp_dataset *ds);
/* Version 2's objects (tables, keys): n objects' sizes against want[] (HEAD requests in
 * flight together; HDMLP_E_NOTFOUND naming a missing object, HDMLP_E_CORRUPT naming one of
 * another size, with both sizes), and one object fetched whole, exactly want bytes, into
 * *out (hd_free; NULL when want is 0). Neither locks: the caller holds fd_lock, or is
 * opening the dataset. */
int ds_remote_check_sizes(hdmlp_dataset *ds, const char *const *names, const uint64_t *want,
                          unsigned n);
int ds_remote_fetch(hdmlp_dataset *ds, const char *name, uint64_t want, uint8_t **out);

#endif
