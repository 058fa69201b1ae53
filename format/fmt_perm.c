/* The seeded permutation shared by the packer and the loader (the contract is in
 * fmt_perm.h). */
#include "fmt_perm.h"

#include "fmt_rng.h"

void fmt_perm_init(fmt_perm *p, uint64_t seed, uint64_t stream, uint64_t n)
{
    fmt_rng rng;
    fmt_rng_seed(&rng, seed, stream);
    p->n = n;
    if (n <= FMT_PERM_TABLE_MAX) {
        for (uint64_t i = n; i-- > 0;) {
            p->at[i] = (uint16_t)i;
        }
        /* Fisher–Yates as fmt_rng_shuffle_u64, on 16-bit entries. */
        for (uint64_t i = n; i > 1; i--) {
            const uint64_t j = fmt_rng_below(&rng, i);
            const uint16_t t = p->at[i - 1];
            p->at[i - 1] = p->at[j];
            p->at[j] = t;
        }
        for (uint64_t i = 0; i < n; i++) {
            p->pos[p->at[i]] = (uint16_t)i;
        }
        return;
    }
    uint32_t bits = 13; /* above the table: 2^bits ≥ n > 4096 */
    while (bits < 64 && (UINT64_C(1) << bits) < n) {
        bits++;
    }
    const uint32_t lbits = bits / 2;
    p->rbits = bits - lbits;
    p->lmask = (UINT64_C(1) << lbits) - 1;
    p->rmask = (UINT64_C(1) << p->rbits) - 1;
    for (int i = 0; i < FMT_PERM_ROUNDS; i++) {
        p->key[i] = fmt_rng_next(&rng);
    }
}

/* One pass of the network over the 2^bits domain, and its inverse. */
static uint64_t forward(const fmt_perm *p, uint64_t x)
{
    uint64_t l = x >> p->rbits, r = x & p->rmask;
    for (int i = 0; i < FMT_PERM_ROUNDS; i += 2) {
        l ^= fmt_perm_mix(r, p->key[i]) & p->lmask;
        r ^= fmt_perm_mix(l, p->key[i + 1]) & p->rmask;
    }
    return l << p->rbits | r;
}

static uint64_t backward(const fmt_perm *p, uint64_t x)
{
    uint64_t l = x >> p->rbits, r = x & p->rmask;
    for (int i = FMT_PERM_ROUNDS; i > 0; i -= 2) {
        r ^= fmt_perm_mix(l, p->key[i - 1]) & p->rmask;
        l ^= fmt_perm_mix(r, p->key[i - 2]) & p->lmask;
    }
    return l << p->rbits | r;
}

/* Cycle walking: the domain is below 2n, so a walk takes under two passes on average, and
 * it ends because the network permutes the domain. */
uint64_t fmt_perm_at(const fmt_perm *p, uint64_t i)
{
    if (p->n <= FMT_PERM_TABLE_MAX) {
        return p->at[i];
    }
    uint64_t x = forward(p, i);
    while (x >= p->n) {
        x = forward(p, x);
    }
    return x;
}

uint64_t fmt_perm_pos(const fmt_perm *p, uint64_t x)
{
    if (p->n <= FMT_PERM_TABLE_MAX) {
        return p->pos[x];
    }
    uint64_t i = backward(p, x);
    while (i >= p->n) {
        i = backward(p, i);
    }
    return i;
}
