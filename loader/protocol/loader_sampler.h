/*
 * Sampler: the per-epoch request order, evaluated per position in O(1) memory (order
 * version 2). Epoch e of a loader with seed S, N samples:
 *   - N > SAMPLER_TABLE_MAX: a seeded bijection of [0, N), a Feistel network on the
 *     smallest power of two ≥ N (halves of ⌊b/2⌋ and ⌈b/2⌉ bits; SAMPLER_ROUNDS
 *     half-rounds, each XORing one half with a keyed 64-bit mix of the other; keys drawn
 *     from fmt_rng_seed(S, e)), with cycle walking: position p holds the first of F(p),
 *     F(F(p)), … below N. Its inverse gives a sample's position.
 *   - N ≤ SAMPLER_TABLE_MAX: the Fisher–Yates shuffle (fmt_rng.h) of 0..N-1 driven by
 *     fmt_rng_seed(S, e), held in the sampler with its inverse. A Feistel network on a
 *     domain of a few bits is measurably not uniform (tests/loader/protocol/
 *     test_sampler.c), and a table of at most 4096 entries costs 16 KiB.
 * Rank r of R takes the positions p with p % R == r, in order, so every rank can compute
 * every rank's sequence and the ranks' sequences partition the epoch (ranks r < N % R get
 * one more request).
 *
 * Order version 1 (before) was the Fisher–Yates shuffle at every N and held N 8-byte ids;
 * a resume state records the version (loader_resume.c) and refuses the other.
 */
#ifndef HDMLP_LOADER_SAMPLER_H
#define HDMLP_LOADER_SAMPLER_H

#include <stdint.h>

#define SAMPLER_ORDER_VERSION 2u
#define SAMPLER_ROUNDS 8 /* four full rounds */
#define SAMPLER_TABLE_MAX 4096u
#define SAMPLER_RUN 16u /* positions sampler_run takes through the network together */

typedef struct sampler {
    uint64_t n;
    uint32_t rbits;        /* bits of the right half */
    uint64_t lmask, rmask; /* of the left and right halves */
    uint64_t key[SAMPLER_ROUNDS];
    uint16_t at[SAMPLER_TABLE_MAX];  /* n ≤ SAMPLER_TABLE_MAX: the order */
    uint16_t pos[SAMPLER_TABLE_MAX]; /* and its inverse */
} sampler;

/* The order of epoch `epoch` of n samples under `seed`. */
void sampler_init(sampler *s, uint64_t seed, uint64_t epoch, uint64_t n);
/* The sample at position p (p < n). */
uint64_t sampler_at(const sampler *s, uint64_t p);
/* The samples at positions p .. p + count - 1 (each < n) into out: as sampler_at, several
 * times faster per position. */
void sampler_run(const sampler *s, uint64_t p, uint32_t count, uint64_t *out);
/* The position of sample x (x < n): sampler_at(s, sampler_pos(s, x)) == x. */
uint64_t sampler_pos(const sampler *s, uint64_t x);

/* Number of requests of rank `rank` of `world` in an epoch of n samples. */
uint64_t sampler_rank_count(uint64_t n, uint32_t rank, uint32_t world);
/* Writes the epoch's order of 0..n-1 into perm (n entries): tests and tools. */
void sampler_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm);
/* Writes rank's share (sampler_rank_count entries) into out. */
void sampler_rank_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint32_t rank,
                        uint32_t world, uint64_t *out);

#endif
