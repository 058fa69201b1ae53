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
    fmt_index ix;            /* validated view of index_map */
    int *seg_fd;             /* n_segments buffered fds, -1 until first use */
    int *seg_fd_direct;      /* n_segments O_DIRECT fds, -1 until first use */
    pthread_mutex_t fd_lock; /* also guards conn */
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

/* Remote datasets (loader_dataset_remote.c): the store, its connections and the index
 * (a heap copy in index_map); the segments' sizes; one read; closing. */
int ds_remote_load(hdmlp_dataset *ds, const char *url, const hdmlp_source_config *cfg);
int ds_remote_check_segments(hdmlp_dataset *ds);
int ds_remote_read(hdmlp_dataset *ds, uint32_t s, void *buf, uint64_t len, uint64_t off);
void ds_remote_close(hdmlp_dataset *ds);

#endif
