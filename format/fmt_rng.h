/*
 * The project's PRNG, identical on every platform: xoshiro256** (Blackman & Vigna, 2018)
 * seeded through SplitMix64. Uniform integers in [0, n) by rejection of the biased low
 * range (no modulo bias). Streams: a (seed, stream) pair selects an independent sequence,
 * e.g. (dataset seed, epoch). Any change here changes every packed order and every epoch
 * order, so it is part of the format's compatibility surface.
 */
#ifndef HDMLP_FMT_RNG_H
#define HDMLP_FMT_RNG_H

#include <stdint.h>

typedef struct fmt_rng {
    uint64_t s[4];
} fmt_rng;

static inline uint64_t fmt_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void fmt_rng_seed(fmt_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ fmt_splitmix64(&stream);
    for (int i = 0; i < 4; i++) {
        r->s[i] = fmt_splitmix64(&x);
    }
}

static inline uint64_t fmt_rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t fmt_rng_next(fmt_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = fmt_rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = fmt_rotl64(s[3], 45);
    return result;
}

/* Uniform in [0, n); n > 0. */
static inline uint64_t fmt_rng_below(fmt_rng *r, uint64_t n)
{
    const uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
    for (;;) {
        const uint64_t x = fmt_rng_next(r);
        if (x >= threshold) {
            return x % n;
        }
    }
}

/* Fisher–Yates shuffle of v[0..n): for i = n-1 down to 1, swap v[i] with v[below(i+1)]. */
static inline void fmt_rng_shuffle_u64(fmt_rng *r, uint64_t *v, uint64_t n)
{
    for (uint64_t i = n; i > 1; i--) {
        const uint64_t j = fmt_rng_below(r, i);
        const uint64_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

#endif /* HDMLP_FMT_RNG_H */
