/*
 * The rel_soak program's parts (see soak.c): process measurements (soak_measure.c),
 * datasets, configs and exactly-once runs (soak_run.c), and its commands: soak (soak.c),
 * budget (soak_budget.c), ssd-enospc and emfile (soak_limits.c).
 */
#ifndef HDMLP_TEST_SOAK_H
#define HDMLP_TEST_SOAK_H

#include "hdmlp.h"
#include "support/testds.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOAK_SANITIZED 1
#endif
#endif
#ifndef SOAK_SANITIZED
#define SOAK_SANITIZED 0
#endif

/* RSS above the budget a loader may add with one malloc arena: thread stacks, io_uring
 * rings, decoder contexts, the scheduler's per-sample metadata, allocator slack (measured
 * 0.5-2.3 MiB for 1-16 threads with an 8 MiB budget; see the README's reliability table).
 * With glibc's default per-thread arenas, decoded samples allocated on the I/O threads
 * are retained per arena and RSS is not bounded by a fixed overhead: reported, and only
 * checked with `budget --strict`. */
#define SOAK_RSS_OVERHEAD (4ull << 20)
#define MIB (1024.0 * 1024.0)

/* Failed checks so far; a command returns 1 if any. */
extern int failures;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "soak: FAIL %s:%d: ", __FILE__, __LINE__);                         \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)
#define REQUIRE(cond, ...)                                                                     \
    do {                                                                                       \
        const int required_ok = (cond) ? 1 : 0;                                                \
        CHECK(required_ok, __VA_ARGS__);                                                       \
        if (!required_ok) {                                                                    \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* This process's RSS (/proc/self/statm) in bytes. */
uint64_t rss_bytes(void);
/* Open file descriptors (/proc/self/fd), or -1. */
int open_fds(void);
/* Prints the open descriptors and what they refer to (for a failed fd check). */
void show_fds(void);
/* VmHWM (peak RSS) in bytes; reset_hwm() restarts it from the current RSS. */
uint64_t hwm_bytes(void);
int reset_hwm(void);

/* The run's scratch directory (made by main, removed at exit). */
extern char base_dir[4096];
/* Writes spec into "<base_dir>/<name>" (its path into dir); exits on failure. */
void make_dataset(const char *name, const testds_spec *spec, char *dir, size_t cap);
/* A config: this budget, threads and epochs, batch 16, seed 12345, lookahead 0, no RAM
 * cache. */
hdmlp_config *config(uint64_t memory, uint32_t threads, uint64_t epochs);

/* Per-epoch delivery check: every sample exactly once. */
typedef struct epoch_check {
    uint64_t n;
    uint8_t *seen;
    uint64_t epoch, count;
} epoch_check;
void ec_init(epoch_check *ec, uint64_t n);
/* Closes the current epoch: all n seen once. */
void ec_close(epoch_check *ec);
/* Returns 1 when this batch starts a new epoch (the previous one was closed). */
int ec_batch(epoch_check *ec, const hdmlp_batch *b);
/* Runs a whole loader; returns the final code (HDMLP_END on success). */
int run_all(hdmlp_dataset *ds, const hdmlp_config *cfg, hdmlp_stats *st);

/* The commands: 0 when every check passed, 1 otherwise (77: skipped). */
int cmd_soak(uint64_t epochs);
int cmd_budget(int strict);
int cmd_ssd_enospc(void);
int cmd_emfile(void);

#endif
