/*
 * An index built in memory (no files) for the protocol's tests: test_sched, test_budget.
 */
#ifndef HDMLP_TEST_MEMDS_H
#define HDMLP_TEST_MEMDS_H

#include "format.h"

#include <stddef.h>
#include <stdint.h>

typedef struct memds {
    uint8_t *buf;
    size_t len;
    fmt_index ix;
} memds;

/* An in-memory index of n samples, chunk size k, sizes (raw = stored) from size_of(i), in one
 * segment; fails the running Criterion test if it cannot be built. */
void memds_make(memds *m, uint64_t n, uint32_t k, uint64_t (*size_of)(uint64_t));
void memds_free(memds *m);

#endif
