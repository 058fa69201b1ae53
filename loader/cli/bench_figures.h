/*
 * hdmlp-bench output, the figures both reports print (bench_report.c): a job's total over
 * its ranks with its arrays on the heap, and the figures derived from a rank's stats.
 * Internal to bench_report*.c.
 */
#ifndef HDMLP_BENCH_FIGURES_H
#define HDMLP_BENCH_FIGURES_H

#include "bench_types.h"

/* a / b, or 0 when b is not positive. */
double bench_ratio(double a, double b);

/* bench_total with its arrays on the heap (NULL when out of memory: then not printed). */
void bench_total_of(const bench_opts *o, const bench_rank *ranks, uint32_t n, bench_rank *t);
/* Frees what bench_total_of allocated. */
void bench_total_free(bench_rank *t);

typedef struct bench_derived {
    double samples_per_s;
    double mb_per_s;
    double read_amplification;
    double loads_per_chunk;
    double ops_per_sample;
    double seconds_per_epoch;
} bench_derived;

/* share: the chunks this figure is over (all of them, or a rank's 1/world of them). */
bench_derived bench_derive(const bench_rank *r, double share);

#endif
