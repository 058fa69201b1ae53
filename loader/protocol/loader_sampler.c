/* Sampler: runs of an epoch's order evaluated together, and its split across ranks (the
 * contract is in loader_sampler.h; the permutation is format/fmt_perm.c). */
#include "loader_sampler.h"

/* One pass of the network over the first m of x (in place), lane by lane within each
 * half-round: the lanes are independent, so one lane's multiplies overlap the others'. */
static void forward_lanes(const sampler *s, uint64_t *x, uint32_t m)
{
    uint64_t l[SAMPLER_RUN], r[SAMPLER_RUN];
    for (uint32_t i = 0; i < m; i++) {
        l[i] = x[i] >> s->rbits;
        r[i] = x[i] & s->rmask;
    }
    for (int k = 0; k < FMT_PERM_ROUNDS; k += 2) {
        for (uint32_t i = 0; i < m; i++) {
            l[i] ^= fmt_perm_mix(r[i], s->key[k]) & s->lmask;
        }
        for (uint32_t i = 0; i < m; i++) {
            r[i] ^= fmt_perm_mix(l[i], s->key[k + 1]) & s->rmask;
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
