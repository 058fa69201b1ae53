/*
 * A seeded bijection of [0, n) evaluated per position in O(1) memory: the packer's order
 * of samples (stream 0) and the loader's epoch orders (stream = the epoch) are both this.
 *   - n > FMT_PERM_TABLE_MAX: a Feistel network on the smallest power of two ≥ n (halves
 *     of ⌊b/2⌋ and ⌈b/2⌉ bits; FMT_PERM_ROUNDS half-rounds, each XORing one half with
 *     fmt_perm_mix of the other and a key; keys drawn from fmt_rng_seed(seed, stream)),
 *     with cycle walking: position p holds the first of F(p), F(F(p)), … below n, and the
 *     inverse network gives an element's position.
 *   - n ≤ FMT_PERM_TABLE_MAX: the Fisher–Yates shuffle (fmt_rng_shuffle_u64's) of 0..n-1
 *     driven by fmt_rng_seed(seed, stream), held with its inverse (16 KiB): a network on a
 *     domain of a few bits is measurably not uniform (tests/loader/protocol/
 *     test_sampler.c).
 * Changing any of it changes every packed and every delivered order.
 */
#ifndef HDMLP_FMT_PERM_H
#define HDMLP_FMT_PERM_H

#include <stdint.h>

#define FMT_PERM_ROUNDS 8 /* four full rounds */
#define FMT_PERM_TABLE_MAX 4096u

typedef struct fmt_perm {
    uint64_t n;
    uint32_t rbits;        /* bits of the right half */
    uint64_t lmask, rmask; /* of the left and right halves */
    uint64_t key[FMT_PERM_ROUNDS];
    uint16_t at[FMT_PERM_TABLE_MAX];  /* n ≤ FMT_PERM_TABLE_MAX: the order */
    uint16_t pos[FMT_PERM_TABLE_MAX]; /* and its inverse */
} fmt_perm;

/* The round function: the SplitMix64 finaliser of v + key (every output bit depends on
 * every input bit). */
static inline uint64_t fmt_perm_mix(uint64_t v, uint64_t key)
{
    uint64_t z = v + key;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The permutation of n elements under (seed, stream). */
void fmt_perm_init(fmt_perm *p, uint64_t seed, uint64_t stream, uint64_t n);
/* The element at position i (i < n). */
uint64_t fmt_perm_at(const fmt_perm *p, uint64_t i);
/* The position of element x (x < n): fmt_perm_at(p, fmt_perm_pos(p, x)) == x. */
uint64_t fmt_perm_pos(const fmt_perm *p, uint64_t x);

#endif /* HDMLP_FMT_PERM_H */
