/* Memory sizing (see loader_sizing.c). */
#ifndef HDMLP_LOADER_SIZING_H
#define HDMLP_LOADER_SIZING_H

#include "loader.h"

/* I/O threads whose read buffers are reserved in the budget; further threads charge theirs
 * while they run a job (loader_worker.c). */
#define LOADER_IO_RESERVED 2u

typedef struct loader_sizing {
    uint64_t memory;          /* the budget sized: cfg->memory, or the least that works when
                               * cfg->memory_raise raised it */
    uint64_t abstract_chunks; /* A, over all ranks */
    uint64_t slot_cap;        /* cap on charged bytes (loader_sample_charge) in this rank's
                               * valid slots */
    uint64_t slot_tables;     /* the schedulers' and runtime's per-slot state (A × K ×
                               * LOADER_SLOT_META): a fixed share, held from create */
    uint64_t sample_tables;   /* a version-2 dataset's sample tables: held for planning
                               * (DIR/tables' bytes when they fit LOADER_TABLES_SHARE of the
                               * budget: tables_held), the scheduler's table cache and the
                               * tables' block offsets (table_blocks); 0 for version 1 */
    int tables_held;
    uint64_t table_blocks;  /* of sample_tables: the block offsets kept (0: none) */
    uint32_t table_entries; /* the tables the scheduler's cache keeps (0: one for each
                             * owned group) */
    uint64_t remote_cap;    /* cap on samples received ahead of need */
    uint64_t ram_cache;     /* RAM chunk cache bytes (resolved from AUTO) */
    uint64_t extra_io;      /* read buffers of I/O threads beyond two (charged per job) */
    /* the rest of the budget's split (with remote_cap, ram_cache and slot_cap: the budget;
     * loader_budget.h holds it as shares) */
    uint64_t read_buffers; /* two chunk read buffers (+ the SSD stager's) */
    uint64_t read_buffer;  /* of which one: the largest aligned chunk */
    uint64_t stager;       /* of which the SSD stager's (0 without an SSD tier) */
    uint64_t batches;      /* two batches of the largest samples (+ one of answers to peers) */
    uint64_t answers;      /* of which the batch of answers to peers (0 with one rank) */
    uint64_t lookahead;    /* samples planned ahead, refills in flight */
    uint64_t images;       /* the image pipeline's buffers (0 without one) */
    uint32_t pool_unit;    /* pool order: samples per read unit (0 for strict) */
} loader_sizing;

/* A version-2 dataset's sample tables are held (and charged) when they take at most this
 * share of the budget (1/16). */
#define LOADER_TABLES_SHARE 16u
/* A table a miss reads (not held): its mapped buffer's header (ds_tables_mapped) and its two
 * end pages, partly covered, mapped whole (4 KiB pages). */
#define LOADER_TABLE_HEAD 24u
#define LOADER_TABLE_PAGES (2u * 4096u)

/* The scheduler's cache of sample tables for a loader with a budget of `memory` bytes:
 * LOADER_TABLE_ENTRIES entries of loader_table_entry bytes (a table as read or mapped with
 * its end pages and header, none when the tables are held, and K offsets), but no more than
 * a sixteenth of the budget (LOADER_TABLES_SHARE), and at least one. (A miss's table is got
 * for it: a cache of a few serves few misses, which come back to a chunk rarely when there
 * are many.) From the index and the budget only, so a local and a remote copy get the same
 * A. Held tables with the clairvoyant policy keep an entry for each owned group instead,
 * charged with the slot tables. */
#define LOADER_TABLE_ENTRIES 2u
uint64_t loader_table_cache(const fmt_index *ix, int held, uint64_t memory);
uint64_t loader_table_entry(const fmt_index *ix, int held);
/* The bytes of a version-2 dataset's table block offsets (ds_tables_plan: 4 bytes a
 * FMT_TABLE_BLOCK samples, and a byte a chunk), kept when they fit a sixteenth of a budget
 * of `memory` bytes, else 0 (planning then leaves a job's records to its I/O thread). */
uint64_t loader_table_blocks(const fmt_index *ix, uint64_t memory);
/* The I/O threads' read buffer: the largest aligned chunk, or a version-2 table source's
 * scratch if larger (an I/O thread reads a job's table into it before reading its chunk). */
uint64_t loader_read_buffer(const fmt_index *ix);

/* The dataset's stored chunk bytes, each chunk rounded up to the 4 KiB alignment. */
uint64_t loader_aligned_chunk_bytes(const fmt_index *ix);

/* Requests without a device queue to ask (object storage, devices that do not say) are
 * taken to be efficient up to this size. */
#define LOADER_POOL_REQUEST_DEFAULT (4ull << 20)

/* The pool order's read unit in samples: ceil(K / r) for r reads per chunk, r from
 * cfg->pool_reads or, when 0, the fewest reads of a mean chunk (stored, aligned, with an
 * eighth of headroom for chunks above the mean) that each fit one device request
 * (cfg->max_request, or LOADER_POOL_REQUEST_DEFAULT when 0). */
uint32_t loader_pool_unit(const fmt_index *ix, const struct hdmlp_config *cfg);
/* The strict order's refill policy: the configured one, or for HDMLP_POLICY_AUTO clairvoyant
 * when the mean stored chunk exceeds the default read window (a miss then reads part of a
 * chunk), fill-rate otherwise. */
hdmlp_policy loader_policy(const fmt_index *ix, const struct hdmlp_config *cfg);

/* The clairvoyant policy's largest read: one device request (cfg->max_request, or
 * LOADER_POOL_REQUEST_DEFAULT when 0) less two alignment blocks, so a direct read of it
 * widened to 4 KiB boundaries stays one request. */
uint64_t loader_read_window(const struct hdmlp_config *cfg);

/* Splits cfg->memory (see loader_sizing.c); the largest samples' sizes come from `tables`
 * (fmt_tables.raw_top_sum), the rest from the index's header and chunk records. A budget below
 * the least that works is raised to it with cfg->memory_raise (out->memory), else refused:
 * HDMLP_E_RANGE naming that least budget, in bytes and as a share of the dataset's raw bytes.
 * HDMLP_E_NOMEM. */
int loader_size(const fmt_index *ix, const fmt_tables *tables, const struct hdmlp_config *cfg,
                loader_sizing *out);

#endif
