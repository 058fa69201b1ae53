/*
 * Cases of the loader property tests (see props_case.h).
 */
#include "support/props_case.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- parameter generator: SplitMix64, independent of the library's own PRNG -------- */

static uint64_t mix_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t mix_below(uint64_t *x, uint64_t n) { return n == 0 ? 0 : mix_next(x) % n; }

static double mix_unit(uint64_t *x) { return (double)(mix_next(x) >> 11) / 9007199254740992.0; }

static const char *policy_name(hdmlp_policy p)
{
    return p == HDMLP_POLICY_RANDOM ? "random" : "fill-rate";
}

static const char *refill_name(hdmlp_refill r)
{
    return r == HDMLP_REFILL_WHOLE ? "whole" : r == HDMLP_REFILL_RANGES ? "ranges" : "auto";
}

const char *engine_name(hdmlp_engine e)
{
    return e == HDMLP_ENGINE_PREAD ? "pread" : e == HDMLP_ENGINE_IO_URING ? "io_uring" : "auto";
}

void describe(const lcase *c, uint64_t budget, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "case_seed=%#" PRIx64 " N=%" PRIu64 " K=%u cps=%u ds_seed=%" PRIu64
             " sizes=%u..%u compress=%d dict=%d labels=%u budget=%" PRIu64
             " batch=%u epochs=%" PRIu64 " drop_last=%d policy=%s refill=%s engine=%s"
             " threads=%u lookahead=%" PRIu64 " seed=%" PRIu64,
             c->case_seed, c->ds.n_samples, c->ds.chunk_size, c->ds.chunks_per_segment,
             c->ds.seed, c->ds.min_size, c->ds.max_size, c->ds.compress, c->ds.dict,
             c->ds.n_labels, budget, c->batch, c->epochs, c->drop_last, policy_name(c->policy),
             refill_name(c->refill), engine_name(c->engine), c->threads, c->lookahead, c->seed);
}

/* Default case: a small dataset, moderate budget, one epoch. */
lcase base_case(void)
{
    lcase c;
    memset(&c, 0, sizeof(c));
    c.ds.n_samples = 500;
    c.ds.chunk_size = 10;
    c.ds.chunks_per_segment = 8;
    c.ds.seed = 11;
    c.ds.min_size = 1;
    c.ds.max_size = 64;
    c.ds.n_labels = 5;
    c.budget_kind = 1;
    c.budget_pos = 0.3;
    c.batch = 16;
    c.epochs = 1;
    c.policy = HDMLP_POLICY_FILL_RATE;
    c.refill = HDMLP_REFILL_AUTO;
    c.engine = HDMLP_ENGINE_PREAD;
    c.threads = 2;
    c.lookahead = 0;
    c.seed = 1;
    return c;
}

/* Draws a case from `case_seed`. */
lcase random_case(uint64_t case_seed)
{
    static const uint32_t ks[] = {1, 3, 64, 100};
    uint64_t x = case_seed;
    lcase c = base_case();
    c.case_seed = case_seed;
    const uint32_t k = ks[mix_below(&x, 4)];
    /* At most ~3000 chunks: every chunk takes at least 4 KiB on disk. */
    uint64_t n_max = (uint64_t)k * 3000;
    if (n_max > 100000) {
        n_max = 100000;
    }
    uint64_t n;
    switch (mix_below(&x, 6)) {
    case 0:
        n = 1 + mix_below(&x, k < 3 ? 3 : k + 1); /* 1..K, a single (maybe short) chunk */
        break;
    case 1:
        n = (uint64_t)k * (1 + mix_below(&x, 5)) + (mix_below(&x, 2) ? 1 : 0);
        break;
    default: /* log-uniform over 1..n_max */
        n = (uint64_t)exp(mix_unit(&x) * log((double)n_max)) + 1;
        break;
    }
    if (n > n_max) {
        n = n_max;
    }
    c.ds.n_samples = n;
    c.ds.chunk_size = k;
    const uint64_t chunks = (n + k - 1) / k;
    const uint32_t cps[] = {0, 1, 7};
    c.ds.chunks_per_segment = cps[mix_below(&x, 3)];
    if (c.ds.chunks_per_segment == 1 && chunks > 300) {
        c.ds.chunks_per_segment = 16;
    }
    c.ds.seed = mix_next(&x);
    static const uint32_t mins[] = {0, 1, 16};
    static const uint32_t maxs[] = {1, 64, 300, 3000};
    c.ds.min_size = mins[mix_below(&x, 3)];
    c.ds.max_size = maxs[mix_below(&x, 4)];
    /* Keep the dataset under ~8 MB of raw bytes. */
    while (c.ds.max_size > 1 && (uint64_t)c.ds.max_size * n > 8000000) {
        c.ds.max_size /= 2;
    }
    if (c.ds.max_size < c.ds.min_size) {
        c.ds.max_size = c.ds.min_size;
    }
    c.ds.compress = (int)mix_below(&x, 2);
    c.ds.dict = c.ds.compress && n >= 200 && mix_below(&x, 3) == 0;
    c.ds.n_labels = 1 + (uint32_t)mix_below(&x, 10);
    const uint64_t bk = mix_below(&x, 8);
    c.budget_kind = bk < 2 ? 0 : bk < 6 ? 1 : 2;
    c.budget_pos = mix_unit(&x);
    static const uint32_t batches[] = {1, 7, 32, 100, 1000};
    c.batch = batches[mix_below(&x, 5)];
    if (mix_below(&x, 6) == 0) {
        c.batch = (uint32_t)(n < (1u << 20) ? n : 1u << 20) + (uint32_t)mix_below(&x, 2);
    }
    c.epochs = 1 + mix_below(&x, 3);
    while (c.epochs > 1 && n * c.epochs > MAX_DELIVERED) {
        c.epochs--;
    }
    c.drop_last = (int)mix_below(&x, 2);
    c.policy = mix_below(&x, 2) ? HDMLP_POLICY_RANDOM : HDMLP_POLICY_FILL_RATE;
    const hdmlp_refill refills[] = {HDMLP_REFILL_AUTO, HDMLP_REFILL_WHOLE, HDMLP_REFILL_RANGES};
    c.refill = refills[mix_below(&x, 3)];
    const hdmlp_engine engines[] = {HDMLP_ENGINE_AUTO, HDMLP_ENGINE_PREAD,
                                    HDMLP_ENGINE_IO_URING};
    c.engine = engines[mix_below(&x, 3)];
    c.threads = 1 + (uint32_t)mix_below(&x, 3);
    const uint64_t lookaheads[] = {0, 1, 16};
    c.lookahead = lookaheads[mix_below(&x, 3)];
    c.seed = mix_next(&x);
    return c;
}

/* Hand-written edge cases, checked before the random ones by every property test. */
int edge_case(int i, lcase *c)
{
    *c = base_case();
    switch (i) {
    case 0: /* a single sample */
        c->ds.n_samples = 1;
        c->ds.chunk_size = 1;
        c->epochs = 3;
        c->budget_kind = 0;
        return 1;
    case 1: /* one short chunk, K = 100 */
        c->ds.n_samples = 1;
        c->ds.chunk_size = 100;
        c->epochs = 2;
        c->batch = 32;
        return 1;
    case 2: /* N = K + 1: a full chunk and a one-sample chunk, smallest budget */
        c->ds.n_samples = 65;
        c->ds.chunk_size = 64;
        c->budget_kind = 0;
        c->epochs = 3;
        c->batch = 7;
        return 1;
    case 3: /* K = 3, smallest budget: one abstract chunk over every chunk */
        c->ds.n_samples = 301;
        c->ds.chunk_size = 3;
        c->ds.chunks_per_segment = 1;
        c->budget_kind = 0;
        c->epochs = 2;
        c->batch = 10;
        c->drop_last = 1;
        return 1;
    case 4: /* N = 10^5, K = 64, a quarter-ish budget, compressed */
        c->ds.n_samples = SLOW_BUILD ? 20000 : 100000;
        c->ds.chunk_size = 64;
        c->ds.chunks_per_segment = 0;
        c->ds.min_size = 1;
        c->ds.max_size = 40;
        c->ds.compress = 1;
        c->budget_kind = 1;
        c->budget_pos = 0.25;
        c->batch = 256;
        c->epochs = SLOW_BUILD ? 1 : 2;
        c->refill = HDMLP_REFILL_RANGES;
        return 1;
    case 5: /* budget beyond the dataset, K = 1 */
        c->ds.n_samples = 777;
        c->ds.chunk_size = 1;
        c->ds.chunks_per_segment = 0;
        c->budget_kind = 2;
        c->epochs = 2;
        c->policy = HDMLP_POLICY_RANDOM;
        c->refill = HDMLP_REFILL_WHOLE;
        return 1;
    default:
        return 0;
    }
}

/* Case i of a property test: the edge cases, then random cases from `seed` + i. */
int nth_case(uint64_t seed, int i, lcase *c)
{
    if (edge_case(i, c)) {
        return 1;
    }
    int n_edge = 0;
    lcase tmp;
    while (edge_case(n_edge, &tmp)) {
        n_edge++;
    }
    if (i - n_edge >= N_CASES) {
        return 0;
    }
    *c = random_case(seed + (uint64_t)(i - n_edge));
    return 1;
}
