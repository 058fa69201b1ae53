/*
 * Storage probe (mechanism, no policy): measures the per-operation cost and the sequential
 * bandwidth of the storage behind a set of files with a short, bounded burst of reads, for
 * the `auto` refill cost model (DESIGN.md §4, "The price of strictness"). What to do with
 * the figures (use them, keep the defaults, report them) is the caller's decision.
 *
 * Method. Small reads: up to `small_reads` 4 KiB reads at 4 KiB-aligned random offsets
 * (uniform over the files' pages), one at a time (queue depth 1); their mean time is t_s
 * (the mean, not the median: the cost model prices a sum of operations, and throttled or
 * queued storage that lets bursts through shows its cost only on average; the median is
 * reported too). Large reads: sequential reads through the largest file, sizes doubling
 * from 256 KiB (PROBE_MIN_FILE) up to `large_len`, at most `large_reads` of them;
 * bandwidth = sum(L - 4 KiB) / sum(t_L - median t_s) over the reads of the two largest
 * sizes (a large read is one operation: its cost cancels), or plain sum(L) / sum(t_L) where
 * that difference is under a quarter of the time (noise); op_us = t_s - 4 KiB / bandwidth
 * (at least 0).
 *
 * Page cache. The sequential range is dropped from the page cache first (dirty pages
 * written back with sync_file_range, then posix_fadvise DONTNEED, widened to 2 MiB
 * boundaries for large folios; no data changes) and its residency checked with
 * mincore(): pages that stay mean RAM-backed storage (tmpfs serves even O_DIRECT reads from
 * memory) or pages pinned by a mapping. Through buffered fds each small-read page is also
 * dropped and checked, and a page that stays is replaced by another (the offsets least
 * likely to be cached). cached_guess reports when the figures may describe memory.
 * (Linux shows page-cache state only for files the caller owns or may write, and reports
 * every page resident otherwise; a page past the end of the file tells which, and for
 * other files residency counts as unknown.)
 *
 * Bounds. Bytes read never exceed max_bytes. The time limit covers the whole call (set-up
 * included) and is checked before each read, so it can be overrun by about one read; the
 * first small read and the first large read are always made. Small reads stop at 40 % of
 * the time left when measuring starts.
 *
 * All functions are reentrant (no shared state) and may run concurrently with a loader on
 * the same dataset. Nothing is printed.
 */
#ifndef HDMLP_LOADER_PROBE_H
#define HDMLP_LOADER_PROBE_H

#include "format.h"

#define PROBE_SMALL_LEN 4096u
/* A target needs one file holding at least this many bytes (else HDMLP_E_RANGE). */
#define PROBE_MIN_FILE (UINT64_C(256) << 10)

typedef struct probe_target {
    const int *fds;           /* n readable fds, buffered or O_DIRECT (detected); not closed */
    const uint64_t *sizes;    /* bytes readable through each fd */
    const char *const *names; /* per fd, for messages; NULL: "<name>[i]" */
    uint32_t n;
    const char *name; /* the target as a whole (e.g. the dataset directory), for messages */
} probe_target;

typedef struct probe_limits {
    double max_seconds;     /* wall time of the call, (0, 60] */
    uint64_t max_bytes;     /* bytes read, at least PROBE_MIN_FILE */
    uint32_t small_reads;   /* at most this many 4 KiB reads; 0 = 256 */
    uint32_t large_reads;   /* at most this many sequential reads; 0 = 8 */
    uint64_t large_len;     /* largest sequential read, rounded up to 4 KiB; 0 = 4 MiB */
    uint64_t scratch_bytes; /* probe_directory's scratch file, rounded up to 4 KiB, at least
                             * PROBE_MIN_FILE; 0 = 32 MiB */
    uint64_t seed;          /* picks the offsets */
} probe_limits;

typedef struct probe_result {
    double op_us;           /* per-operation cost: mean 4 KiB time minus its transfer time */
    double bytes_per_s;     /* sequential bandwidth, > 0 and finite */
    double small_mean_us;   /* mean 4 KiB read time (t_s) */
    double small_median_us; /* median 4 KiB read time */
    uint64_t bytes;         /* bytes read */
    uint32_t small_reads;
    uint32_t large_reads;
    uint64_t large_len; /* largest sequential read made */
    double seconds;     /* wall time of the call */
    int direct;         /* 1 if every read used O_DIRECT */
    /* 1 if probed pages stayed in the page cache after being dropped (a RAM-backed file
     * system, or pages pinned by a mapping), or if reads were buffered and residency could
     * not be checked: the figures may then describe memory, not storage. */
    int cached_guess;
    char text[320]; /* one line for logs, e.g. "DIR: 85.2 us/op (...), 1940 MB/s (...)" */
} probe_result;

/* Defaults: 0.5 s, 64 MiB, 256 small reads, 8 large reads of up to 4 MiB, 32 MiB scratch
 * file, a fixed seed. */
void probe_limits_default(probe_limits *lim);

/* Probes the storage behind t's fds within lim. lim NULL = defaults. *out is zeroed first
 * and filled on success. Returns HDMLP_OK; HDMLP_E_INVAL for bad arguments or limits;
 * HDMLP_E_RANGE when no file holds PROBE_MIN_FILE bytes (an empty or tiny target is not
 * measured: the caller keeps its configured figures); HDMLP_E_NOMEM; HDMLP_E_IO naming the
 * file and offset when a read fails or a file is shorter than its given size. Reads only;
 * never writes to the files. */
int probe_storage(const probe_target *t, const probe_limits *lim, probe_result *out);

/* Probes the storage of an open dataset's segment files (up to 64 of them, spread evenly
 * over the segments), opened afresh and closed before returning. With direct = 1 the
 * segments must accept O_DIRECT (HDMLP_E_UNSUPPORTED naming the file otherwise, as the
 * loader would fail); with direct = 0 O_DIRECT is still tried, so that the probe measures
 * the storage and not the page cache, and buffered reads are the fallback. Open failures
 * return the code of the errno (HDMLP_E_NOTFOUND, ...) naming the segment; otherwise as
 * probe_storage. ds is only read (its path and index) and may be in use elsewhere. */
int probe_dataset(hdmlp_dataset *ds, int direct, const probe_limits *lim, probe_result *out);

/* Probes the storage of an existing directory (e.g. the SSD cache directory) through a
 * scratch file of lim->scratch_bytes: created with a unique name, unlinked right after it
 * is opened (nothing is left behind, even if the process dies), written (O_DIRECT when
 * possible, else buffered + fsync + DONTNEED), probed and closed. HDMLP_E_NOTFOUND when dir
 * does not exist, HDMLP_E_NOSPC when the scratch file does not fit, HDMLP_E_IO naming dir
 * on other failures; otherwise as probe_storage. */
int probe_directory(const char *dir, const probe_limits *lim, probe_result *out);

#endif
