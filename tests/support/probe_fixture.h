/*
 * Fixtures of the storage probe tests (test_probe*.c, one Criterion binary): temporary
 * files of a given size, probe targets, and the checks every probe result must pass.
 * Temporary files live in $HDMLP_TEST_TMP (fallback /tmp).
 */
#ifndef HDMLP_TEST_PROBE_FIXTURE_H
#define HDMLP_TEST_PROBE_FIXTURE_H

#include "loader_probe.h"

#include <stdint.h>

#define MIB (UINT64_C(1) << 20)
#define SLACK_S 0.25 /* one read past the limit, plus scheduling noise */

/* $HDMLP_TEST_TMP, or /tmp. */
const char *tmp_dir(void);
/* CLOCK_MONOTONIC in seconds. */
double now_s(void);

typedef struct tfile {
    int fd;
    int direct; /* fd is O_DIRECT */
    uint64_t size;
} tfile;

/* A temp file of `size` bytes (distinct non-zero pages), durable, already unlinked, opened
 * read-only (`flags`: O_DIRECT where wanted and allowed, or O_WRONLY for a bad fd). */
tfile tfile_make(const char *dir, uint64_t size, int flags);
/* A probe target over t's fd, named name[0]. */
probe_target target_of(const tfile *t, const char *const *name);
/* Figures positive and finite, within the byte and time limits (plus SLACK_S) of lim and
 * the wall time measured outside. */
void check_sane(const probe_result *r, const probe_limits *lim, double wall);
/* Probes a file with lim, checks the bounds and prints the figures. */
probe_result probe_file(const tfile *t, const probe_limits *lim);

#endif
