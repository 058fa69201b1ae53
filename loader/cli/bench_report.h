/*
 * hdmlp-bench output: the human-readable summary and the JSON object, for one rank, for
 * every rank of a job with their total, and for a plan (a forecast: the same keys as a
 * run's stats, no timing, no randomness).
 */
#ifndef HDMLP_BENCH_REPORT_H
#define HDMLP_BENCH_REPORT_H

#include "bench_types.h"

/* Sums ranks[0..n) into *out: counters add up (peak memory and budget too: the job's
 * bound), epochs is the least, seconds and each epoch's seconds the greatest (the job
 * waits for its slowest rank), abstract_chunks and the cost model are rank 0's, and the
 * randomness figures pool the ranks' pairs. out->epoch_seconds and
 * out->epoch_source_bytes must hold bench_span(o) entries (or be NULL). */
void bench_total(const bench_opts *o, const bench_rank *ranks, uint32_t n, bench_rank *out);

/* Prints ranks[0..n) on stdout. n == 1: this process's rank (world > 1 with --peers: its
 * object carries "rank" and "world"); n == world > 1: every rank (gathered on rank 0) and
 * the total, which is also the top-level object in JSON ("ranks" lists the ranks). */
void bench_report_json(const bench_opts *o, hdmlp_dataset *ds, const bench_rank *ranks,
                       uint32_t n, uint32_t world);
void bench_report_text(const bench_opts *o, hdmlp_dataset *ds, const bench_rank *ranks,
                       uint32_t n, uint32_t world);

#endif
