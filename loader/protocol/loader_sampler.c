/* Sampler: seeded epoch orders as bijections evaluated per position, and their split
 * across ranks (the contract is in loader_sampler.h). */
#include "loader_sampler.h"

#include "fmt_rng.h"

/* A keyed round function: the SplitMix64 finaliser of v + key (every output bit depends
 * on every input bit). */
static inline uint64_t round_mix(uint64_t v, uint64_t key)
{
    uint64_t z = v + key;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sampler_init(sampler *s, uint64_t seed, uint64_t epoch, uint64_t n)
{
    fmt_rng rng;
    fmt_rng_seed(&rng, seed, epoch);
    s->n = n;
    if (n <= SAMPLER_TABLE_MAX) {
        for (uint64_t i = n; i-- > 0;) {
            s->at[i] = (uint16_t)i;
        }
        /* Fisher–Yates as fmt_rng_shuffle_u64, on 16-bit entries. */
        for (uint64_t i = n; i > 1; i--) {
            const uint64_t j = fmt_rng_below(&rng, i);
            const uint16_t t = s->at[i - 1];
            s->at[i - 1] = s->at[j];
            s->at[j] = t;
        }
        for (uint64_t p = 0; p < n; p++) {
            s->pos[s->at[p]] = (uint16_t)p;
        }
        return;
    }
    uint32_t bits = 13; /* above the table: 2^bits ≥ n > 4096 */
    while (bits < 64 && (UINT64_C(1) << bits) < n) {
        bits++;
    }
    const uint32_t lbits = bits / 2;
    s->rbits = bits - lbits;
    s->lmask = (UINT64_C(1) << lbits) - 1;
    s->rmask = (UINT64_C(1) << s->rbits) - 1;
    for (int i = 0; i < SAMPLER_ROUNDS; i++) {
        s->key[i] = fmt_rng_next(&rng);
    }
}

/* One pass of the network over the 2^bits domain, and its inverse. */
static uint64_t forward(const sampler *s, uint64_t x)
{
    uint64_t l = x >> s->rbits, r = x & s->rmask;
    for (int i = 0; i < SAMPLER_ROUNDS; i += 2) {
        l ^= round_mix(r, s->key[i]) & s->lmask;
        r ^= round_mix(l, s->key[i + 1]) & s->rmask;
    }
    return l << s->rbits | r;
}

static uint64_t backward(const sampler *s, uint64_t x)
{
    uint64_t l = x >> s->rbits, r = x & s->rmask;
    for (int i = SAMPLER_ROUNDS; i > 0; i -= 2) {
        r ^= round_mix(l, s->key[i - 1]) & s->rmask;
        l ^= round_mix(r, s->key[i - 2]) & s->lmask;
    }
    return l << s->rbits | r;
}

/* Cycle walking: the domain is below 2n, so a walk takes under two passes on average, and
 * ends because the network is a permutation of the domain. */
uint64_t sampler_at(const sampler *s, uint64_t p)
{
    if (s->n <= SAMPLER_TABLE_MAX) {
        return s->at[p];
    }
    uint64_t x = forward(s, p);
    while (x >= s->n) {
        x = forward(s, x);
    }
    return x;
}

uint64_t sampler_pos(const sampler *s, uint64_t x)
{
    if (s->n <= SAMPLER_TABLE_MAX) {
        return s->pos[x];
    }
    uint64_t p = backward(s, x);
    while (p >= s->n) {
        p = backward(s, p);
    }
    return p;
}

/* One pass of the network over the first m of x (in place), lane by lane within each
 * half-round: the lanes are independent, so one lane's multiplies overlap the others'. */
static void forward_lanes(const sampler *s, uint64_t *x, uint32_t m)
{
    uint64_t l[SAMPLER_RUN], r[SAMPLER_RUN];
    for (uint32_t i = 0; i < m; i++) {
        l[i] = x[i] >> s->rbits;
        r[i] = x[i] & s->rmask;
    }
    for (int k = 0; k < SAMPLER_ROUNDS; k += 2) {
        for (uint32_t i = 0; i < m; i++) {
            l[i] ^= round_mix(r[i], s->key[k]) & s->lmask;
        }
        for (uint32_t i = 0; i < m; i++) {
            r[i] ^= round_mix(l[i], s->key[k + 1]) & s->rmask;
        }
    }
    for (uint32_t i = 0; i < m; i++) {
        x[i] = l[i] << s->rbits | r[i];
    }
}

void sampler_run(const sampler *s, uint64_t p, uint32_t count, uint64_t *out)
{
    if (s->n <= SAMPLER_TABLE_MAX) {
        for (uint32_t i = 0; i < count; i++) {
            out[i] = s->at[p + i];
        }
        return;
    }
    /* Up to SAMPLER_RUN positions go through the network side by side; those that leave
     * [0, n) walk on together, gathered, until none is left. */
    uint64_t x[SAMPLER_RUN], walk[SAMPLER_RUN];
    uint32_t lane[SAMPLER_RUN];
    while (count > 0) {
        const uint32_t m = count < SAMPLER_RUN ? count : SAMPLER_RUN;
        for (uint32_t i = 0; i < m; i++) {
            x[i] = p + i;
        }
        forward_lanes(s, x, m);
        uint32_t w = 0;
        for (uint32_t i = 0; i < m; i++) {
            if (x[i] >= s->n) {
                lane[w] = i;
                walk[w++] = x[i];
            }
        }
        while (w > 0) {
            forward_lanes(s, walk, w);
            uint32_t left = 0;
            for (uint32_t j = 0; j < w; j++) {
                if (walk[j] < s->n) {
                    x[lane[j]] = walk[j];
                } else {
                    lane[left] = lane[j];
                    walk[left++] = walk[j];
                }
            }
            w = left;
        }
        for (uint32_t i = 0; i < m; i++) {
            out[i] = x[i];
        }
        p += m;
        out += m;
        count -= m;
    }
}

uint64_t sampler_rank_count(uint64_t n, uint32_t rank, uint32_t world)
{
    return n / world + (rank < n % world ? 1 : 0);
}

void sampler_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm)
{
    sampler s;
    sampler_init(&s, seed, epoch, n);
    for (uint64_t p = 0; p < n; p += SAMPLER_RUN) {
        sampler_run(&s, p, (uint32_t)(n - p < SAMPLER_RUN ? n - p : SAMPLER_RUN), perm + p);
    }
}

void sampler_rank_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint32_t rank,
                        uint32_t world, uint64_t *out)
{
    sampler s;
    sampler_init(&s, seed, epoch, n);
    uint64_t k = 0;
    for (uint64_t p = rank; p < n; p += world) {
        out[k++] = sampler_at(&s, p);
    }
}
