/*
 * Randomness figures of a delivered order, for hdmlp-bench (computed from the indices the
 * training loop received; sample i lives in chunk i / K).
 *
 *  same_chunk_distance: the mean |pos(a) - pos(b)| over pairs of samples of the same chunk
 *      delivered in the same epoch (positions 0..L-1 within this rank's sequence of that
 *      epoch), divided by the same mean for a true permutation of L positions, (L + 1) / 3.
 *      1.0 = samples of a chunk are as far apart as in a random permutation; small values
 *      = they arrive clustered in time. Pooled over epochs (pair-weighted).
 *  epoch_position_correlation: Pearson correlation between a sample's position in epoch e
 *      and in epoch e + 1, over the samples this rank received in both; the mean over the
 *      consecutive epoch pairs. 0 = unrelated orders, 1 = the same order.
 *
 * Streaming, O(N + C) memory: positions arrive in increasing order, so each chunk keeps
 * the count and sum of its positions seen so far and a new position p adds
 * count * p - sum to the pair sum; the previous and current epoch's position of every
 * sample (32-bit) give the correlation when an epoch ends.
 */
#ifndef HDMLP_BENCH_RANDOM_H
#define HDMLP_BENCH_RANDOM_H

#include <stdint.h>

/* What the figures are made of; sums over ranks pool them (bench_random_fig_add). */
typedef struct bench_random_fig {
    double dist_sum;  /* sum over epochs and same-chunk pairs of |pos(a) - pos(b)| */
    double dist_norm; /* sum over epochs of pairs x (L + 1) / 3 */
    double corr_sum;  /* sum of the Pearson r of consecutive epoch pairs */
    uint64_t corr_n;  /* epoch pairs with a defined r */
} bench_random_fig;

/* NAN when undefined (no same-chunk pair; fewer than two consecutive epochs). */
double bench_random_distance(const bench_random_fig *f);
double bench_random_correlation(const bench_random_fig *f);
void bench_random_fig_add(bench_random_fig *to, const bench_random_fig *from);

typedef struct bench_random bench_random;

/* Tracker for a dataset of n samples, k per chunk. Returns NULL when out of memory. */
bench_random *bench_random_create(uint64_t n, uint32_t k);
void bench_random_free(bench_random *r);
/* The next delivered sample of `epoch` (epochs arrive in increasing order). */
void bench_random_add(bench_random *r, uint64_t epoch, uint64_t index);
/* Ends the current epoch and returns the figures so far. */
bench_random_fig bench_random_finish(bench_random *r);

#endif
