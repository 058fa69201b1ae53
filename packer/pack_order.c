/* The packed order: packed position p holds sorted item pack_order_at(p), a seeded
 * bijection of [0, n) evaluated per position, so no permutation array of n entries is
 * held (the contract is in pack_internal.h).
 *
 * Above PACK_ORDER_TABLE_MAX it is a Feistel network on the smallest power of two ≥ n
 * (halves of ⌊b/2⌋ and ⌈b/2⌉ bits, PACK_ORDER_ROUNDS half-rounds XORing one half with a
 * keyed 64-bit mix of the other, keys drawn from fmt_rng(seed, 0)) with cycle walking, as
 * the loader's sampler (loader/protocol/loader_sampler.c) orders epochs; the packer keeps
 * its own copy because it links only format/ and its own code, and the loader's order must
 * not change with it. At or below the table size the order is the Fisher-Yates shuffle of
 * fmt_rng(seed, 0) that every packer used before (a network on a domain of a few bits is
 * measurably not uniform; tests/loader/protocol/test_sampler.c). */
#include "fmt_rng.h"
#include "pack_internal.h"

/* The SplitMix64 finaliser of v + key: every output bit depends on every input bit. */
static inline uint64_t round_mix(uint64_t v, uint64_t key)
{
    uint64_t z = v + key;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void pack_order_init(pack_order *o, uint64_t seed, uint64_t n)
{
    fmt_rng rng;
    fmt_rng_seed(&rng, seed, 0);
    o->n = n;
    if (n <= PACK_ORDER_TABLE_MAX) {
        uint64_t v[PACK_ORDER_TABLE_MAX];
        for (uint64_t i = 0; i < n; i++) {
            v[i] = i;
        }
        fmt_rng_shuffle_u64(&rng, v, n);
        for (uint64_t p = 0; p < n; p++) {
            o->at[p] = (uint16_t)v[p];
            o->pos[v[p]] = (uint16_t)p;
        }
        return;
    }
    uint32_t bits = 13; /* 2^bits ≥ n > 4096 */
    while (bits < 64 && (UINT64_C(1) << bits) < n) {
        bits++;
    }
    const uint32_t lbits = bits / 2;
    o->rbits = bits - lbits;
    o->lmask = (UINT64_C(1) << lbits) - 1;
    o->rmask = (UINT64_C(1) << o->rbits) - 1;
    for (int i = 0; i < PACK_ORDER_ROUNDS; i++) {
        o->key[i] = fmt_rng_next(&rng);
    }
}

static uint64_t forward(const pack_order *o, uint64_t x)
{
    uint64_t l = x >> o->rbits, r = x & o->rmask;
    for (int i = 0; i < PACK_ORDER_ROUNDS; i += 2) {
        l ^= round_mix(r, o->key[i]) & o->lmask;
        r ^= round_mix(l, o->key[i + 1]) & o->rmask;
    }
    return l << o->rbits | r;
}

static uint64_t backward(const pack_order *o, uint64_t x)
{
    uint64_t l = x >> o->rbits, r = x & o->rmask;
    for (int i = PACK_ORDER_ROUNDS; i > 0; i -= 2) {
        r ^= round_mix(l, o->key[i - 1]) & o->rmask;
        l ^= round_mix(r, o->key[i - 2]) & o->lmask;
    }
    return l << o->rbits | r;
}

/* Cycle walking: the domain is below 2n, so a walk takes under two passes on average, and
 * it ends because the network permutes the domain. */
uint64_t pack_order_at(const pack_order *o, uint64_t p)
{
    if (o->n <= PACK_ORDER_TABLE_MAX) {
        return o->at[p];
    }
    uint64_t x = forward(o, p);
    while (x >= o->n) {
        x = forward(o, x);
    }
    return x;
}

uint64_t pack_order_pos(const pack_order *o, uint64_t i)
{
    if (o->n <= PACK_ORDER_TABLE_MAX) {
        return o->pos[i];
    }
    uint64_t p = backward(o, i);
    while (p >= o->n) {
        p = backward(o, p);
    }
    return p;
}
