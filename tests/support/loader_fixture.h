/*
 * Fixtures shared by the loader API tests (test_loader*.c, one Criterion binary): the
 * config, loader_api and loader_errors suites, whose temporary dataset directories are
 * removed after each test, a small default dataset, configs and loaders with checked
 * creation, and checks of error details and delivered samples.
 */
#ifndef HDMLP_TEST_LOADER_FIXTURE_H
#define HDMLP_TEST_LOADER_FIXTURE_H

#include "hdmlp.h"
#include "support/testds.h"

#include <stddef.h>
#include <stdint.h>

/* A budget comfortably above the minimum for these small datasets. */
#define ROOMY (16u << 20)

/* A small default dataset: 200 samples of 8..100 bytes, K = 10, one chunk per segment
 * file (so chunk c is the only chunk of segment-%06u c, at offset 0). */
testds_spec small_spec(void);
/* Writes spec into a fresh temporary directory (its path in dir, removed after the test)
 * and opens it; fails the test on error. */
hdmlp_dataset *make_dataset(const testds_spec *spec, char *dir, size_t cap);
/* A config with this budget, batch size and epoch count, seed 7 and the pread engine. */
hdmlp_config *new_config(uint64_t memory, uint32_t batch, uint64_t epochs);
/* Creates a loader (failing the test on error) and frees cfg. */
hdmlp_loader *new_loader(hdmlp_dataset *ds, hdmlp_config *cfg);

/* Whether msg (case-insensitively) contains word. */
int mentions(const char *msg, const char *word);
/* Whether msg contains "<word> <number>" with nothing but a non-digit after the number. */
int mentions_number(const char *msg, const char *word, uint64_t number);
/* Checks a view's size, label and bytes against the dataset and testds_fill. */
void expect_view(hdmlp_dataset *ds, const testds_spec *spec, const hdmlp_sample_view *v);

#endif
