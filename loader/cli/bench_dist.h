/*
 * hdmlp-bench under mpirun: every rank's results on rank 0.
 *
 * The library's hdmlp_mpi_gather_stats moves one hdmlp_stats per rank; the bench's own
 * per-rank figures (timings, peak RSS, randomness sums, per-epoch lists) travel the same
 * way, packed as 64-bit words into further hdmlp_stats-sized carriers, so hdmlp-bench itself
 * needs no MPI header (DESIGN.md §2: MPI types stay in rpc/).
 */
#ifndef HDMLP_BENCH_DIST_H
#define HDMLP_BENCH_DIST_H

#include "bench_types.h"

/* Collective over every rank (each calls it once, with the same options, whether or not
 * its run succeeded). On rank 0, *all gets `world` records in rank order (free with
 * bench_dist_free); elsewhere *all = NULL. Returns 0, or -1 with a message on stderr. */
int bench_dist_gather(const bench_opts *o, const bench_rank *mine, uint32_t world,
                      bench_rank **all);
void bench_dist_free(bench_rank *all, uint32_t world);

#endif
