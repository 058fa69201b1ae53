/*
 * Fixtures of the packed-dataset tests (test_dataset*.c, one Criterion binary): the
 * dataset suite, whose fresh directory g_dir is made before and removed after each test,
 * a test dataset written into it, opened, and read back.
 */
#ifndef HDMLP_TEST_DATASET_FIXTURE_H
#define HDMLP_TEST_DATASET_FIXTURE_H

#include "hdmlp.h"
#include "support/testds.h"

#define PATH_CAP 4096

/* The current test's dataset directory. */
extern char g_dir[2048];

/* Writes spec into g_dir (its parameters logged); fails the test on error. */
void write_ds(const testds_spec *spec);
/* Opens g_dir; fails the test on error. */
hdmlp_dataset *open_ok(void);
/* "<g_dir>/<name>" into buf (PATH_CAP bytes). */
void path_of(char *buf, const char *name);
/* Reads every sample and compares it with testds_fill. */
void check_all_samples(hdmlp_dataset *ds, const testds_spec *spec);

#endif
