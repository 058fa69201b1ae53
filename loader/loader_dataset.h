/* Internal view of an open dataset, shared by the loader's modules. */
#ifndef HDMLP_LOADER_DATASET_H
#define HDMLP_LOADER_DATASET_H

#include "format.h"

#include <pthread.h>

struct hdmlp_dataset {
    char *path;      /* dataset directory */
    void *index_map; /* mmap of DIR/index (or heap copy); owned */
    size_t index_size;
    fmt_index ix;       /* validated view of index_map */
    int *seg_fd;        /* n_segments buffered fds, -1 until first use */
    int *seg_fd_direct; /* n_segments O_DIRECT fds, -1 until first use */
    pthread_mutex_t fd_lock;
};

/* Returns an open read-only fd for segment s (opened on first use, kept until close;
 * O_DIRECT when direct != 0). Thread-safe. HDMLP_E_NOTFOUND/E_IO/E_MFILE naming the file
 * on failure (the return value is then the negative code). */
int ds_segment_fd(hdmlp_dataset *ds, uint32_t s, int direct);

/* Full path of segment s into buf (for messages). */
void ds_segment_path(const hdmlp_dataset *ds, uint32_t s, char *buf, size_t cap);

#endif
