/*
 * The dataset's private part (internal to loader_dataset*.c): what the public struct does not
 * show, shared by opening and closing (loader_dataset_open.c) and reading
 * (loader_dataset.c).
 */
#ifndef HDMLP_LOADER_DATASET_PRIVATE_H
#define HDMLP_LOADER_DATASET_PRIVATE_H

#include "loader_dataset.h"

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
} ds_private;

static inline ds_private *ds_priv(const hdmlp_dataset *ds)
{
    return (ds_private *)(uintptr_t)ds;
}

#endif
