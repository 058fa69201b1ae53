/*
 * Cases of the loader property tests (test_loader_props*.c, one Criterion binary): the
 * parameters of one case, drawn from a fixed, printed seed with SplitMix64 (independent of
 * the library's own PRNG) or hand-written edge cases, and their description for failure
 * messages.
 */
#ifndef HDMLP_TEST_PROPS_CASE_H
#define HDMLP_TEST_PROPS_CASE_H

#include "hdmlp.h"
#include "support/testds.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifndef SLOW_BUILD
#define SLOW_BUILD 0
#endif

/* Random cases per property test (fewer under sanitizers, which run ~5-20x slower). */
#define N_CASES (SLOW_BUILD ? 8 : 30)
/* Cap on samples delivered per case (N × epochs), to bound the suite's run time. */
#define MAX_DELIVERED (SLOW_BUILD ? 60000u : 250000u)

typedef struct lcase {
    uint64_t case_seed; /* seed the case was drawn from (0 for hand-written cases) */
    testds_spec ds;
    int budget_kind; /* 0: the minimum accepted; 1: log-uniform in between; 2: > dataset */
    double budget_pos;
    uint32_t batch;
    uint64_t epochs;
    int drop_last;
    hdmlp_policy policy;
    hdmlp_refill refill;
    hdmlp_engine engine;
    uint32_t threads;
    uint64_t lookahead;
    uint64_t seed;
    int hold_prev; /* hold each batch until the next one is delivered (a training loop) */
} lcase;

const char *engine_name(hdmlp_engine e);
/* One line naming every parameter of c (and the budget), for failure messages. */
void describe(const lcase *c, uint64_t budget, char *buf, size_t cap);
/* Default case: a small dataset, moderate budget, one epoch. */
lcase base_case(void);
/* Draws a case from `case_seed`. */
lcase random_case(uint64_t case_seed);
/* Hand-written edge cases, checked before the random ones by every property test: case i
 * into *c and 1, or 0 past the last. */
int edge_case(int i, lcase *c);
/* Case i of a property test: the edge cases, then random cases from `seed` + i; 0 past
 * the last. */
int nth_case(uint64_t seed, int i, lcase *c);

#endif
