/*
 * Sampler: the per-epoch request order. Epoch e of a loader with seed S is the Fisher–Yates
 * shuffle (fmt_rng.h) of 0..N-1 driven by fmt_rng_seed(S, e). Rank r of R takes the
 * positions p with p % R == r, in order, so every rank can compute every rank's sequence
 * and the ranks' sequences partition the epoch (ranks r < N % R get one more request).
 */
#ifndef HDMLP_LOADER_SAMPLER_H
#define HDMLP_LOADER_SAMPLER_H

#include <stdint.h>

/* Number of requests of rank `rank` of `world` in an epoch of n samples. */
uint64_t sampler_rank_count(uint64_t n, uint32_t rank, uint32_t world);
/* Writes the epoch's full permutation of 0..n-1 into perm (n entries). */
void sampler_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm);
/* Writes rank's share (sampler_rank_count entries) into out, using perm as scratch
 * (n entries) — out may alias perm. */
void sampler_rank_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint32_t rank,
                        uint32_t world, uint64_t *perm, uint64_t *out);

#endif
