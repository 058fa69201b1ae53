/*
 * Sampler: the per-epoch request order, evaluated per position in O(1) memory (order
 * version 2). Epoch e of a loader with seed S, N samples:
 * fmt_perm's seeded bijection of [0, N) under (S, stream e) (format/fmt_perm.h: a Feistel
 * network with cycle walking above SAMPLER_TABLE_MAX samples, a held Fisher–Yates shuffle
 * at or below), evaluated per position; its inverse gives a sample's position.
 * Rank r of R takes the positions p with p % R == r, in order, so every rank can compute
 * every rank's sequence and the ranks' sequences partition the epoch (ranks r < N % R get
 * one more request).
 *
 * Order version 1 (before) was the Fisher–Yates shuffle at every N and held N 8-byte ids;
 * a resume state records the version (loader_resume.c) and refuses the other.
 */
#ifndef HDMLP_LOADER_SAMPLER_H
#define HDMLP_LOADER_SAMPLER_H

#include "fmt_perm.h"

#include <stdint.h>

#define SAMPLER_ORDER_VERSION 2u
#define SAMPLER_TABLE_MAX FMT_PERM_TABLE_MAX
#define SAMPLER_RUN 16u /* positions sampler_run takes through the network together */

/* An epoch's order is fmt_perm's permutation with the epoch as its stream. */
typedef fmt_perm sampler;

/* The order of epoch `epoch` of n samples under `seed`. */
static inline void sampler_init(sampler *s, uint64_t seed, uint64_t epoch, uint64_t n)
{
    fmt_perm_init(s, seed, epoch, n);
}
/* The sample at position p (p < n). */
static inline uint64_t sampler_at(const sampler *s, uint64_t p) { return fmt_perm_at(s, p); }
/* The samples at positions p .. p + count - 1 (each < n) into out: as sampler_at, several
 * times faster per position. */
void sampler_run(const sampler *s, uint64_t p, uint32_t count, uint64_t *out);
/* The position of sample x (x < n): sampler_at(s, sampler_pos(s, x)) == x. */
static inline uint64_t sampler_pos(const sampler *s, uint64_t x) { return fmt_perm_pos(s, x); }

/* Number of requests of rank `rank` of `world` in an epoch of n samples. */
uint64_t sampler_rank_count(uint64_t n, uint32_t rank, uint32_t world);
/* Writes the epoch's order of 0..n-1 into perm (n entries): tests and tools. */
void sampler_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm);
/* Writes rank's share (sampler_rank_count entries) into out. */
void sampler_rank_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint32_t rank,
                        uint32_t world, uint64_t *out);

#endif
