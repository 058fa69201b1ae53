/* Sampler: seeded epoch permutations and their split across ranks. */
#include "loader_sampler.h"

#include "fmt_rng.h"

uint64_t sampler_rank_count(uint64_t n, uint32_t rank, uint32_t world)
{
    return n / world + (rank < n % world ? 1 : 0);
}

void sampler_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm)
{
    fmt_rng rng;
    fmt_rng_seed(&rng, seed, epoch);
    for (uint64_t i = 0; i < n; i++) {
        perm[i] = i;
    }
    fmt_rng_shuffle_u64(&rng, perm, n);
}

void sampler_rank_epoch(uint64_t seed, uint64_t epoch, uint64_t n, uint32_t rank,
                        uint32_t world, uint64_t *perm, uint64_t *out)
{
    sampler_epoch(seed, epoch, n, perm);
    uint64_t k = 0;
    for (uint64_t p = rank; p < n; p += world) {
        out[k++] = perm[p];
    }
}
