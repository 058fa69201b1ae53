/* Memory sizing (see loader_sizing.c). */
#ifndef HDMLP_LOADER_SIZING_H
#define HDMLP_LOADER_SIZING_H

#include "loader.h"

/* I/O threads whose read buffers are reserved in the budget; further threads charge theirs
 * while they run a job (loader_worker.c). */
#define LOADER_IO_RESERVED 2u

typedef struct loader_sizing {
    uint64_t abstract_chunks; /* A, over all ranks */
    uint64_t slot_cap;        /* cap on raw bytes in this rank's valid slots */
    uint64_t remote_cap;      /* cap on samples received ahead of need */
    uint64_t ram_cache;       /* RAM chunk cache bytes (resolved from AUTO) */
    uint64_t extra_io;        /* read buffers of I/O threads beyond two (charged per job) */
    uint64_t plan_limit;      /* accounted bytes planning may reach */
    /* the rest of the budget's split (with remote_cap, ram_cache and slot_cap: the budget) */
    uint64_t read_buffers; /* two chunk read buffers (+ the SSD stager's) */
    uint64_t batches;      /* two batches of the largest samples (+ one of answers to peers) */
    uint64_t lookahead;    /* samples planned ahead, refills in flight */
    uint64_t images;       /* the image pipeline's buffers (0 without one) */
} loader_sizing;

/* The dataset's stored chunk bytes, each chunk rounded up to the 4 KiB alignment. */
uint64_t loader_aligned_chunk_bytes(const fmt_index *ix);

/* HDMLP_E_RANGE naming the minimum budget when cfg->memory is too small. */
int loader_size(const fmt_index *ix, const struct hdmlp_config *cfg, loader_sizing *out);

#endif
