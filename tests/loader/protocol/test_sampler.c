/*
 * The epoch order (loader_sampler.c): a bijection of [0, n) for every n, its inverse, the
 * split across ranks, and uniformity over many seeds: where a sample lands and what its
 * neighbour is, for the table (n ≤ 4096) and for the Feistel network above it, whose
 * structure would show first on the smallest domains it serves.
 */
#include "loader_sampler.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void check_bijection(uint64_t seed, uint64_t epoch, uint64_t n)
{
    sampler s;
    sampler_init(&s, seed, epoch, n);
    uint8_t *seen = calloc(n ? n : 1, 1);
    cr_assert_not_null(seen);
    for (uint64_t p = 0; p < n; p++) {
        const uint64_t x = sampler_at(&s, p);
        cr_assert_lt(x, n, "n %llu: position %llu gives %llu", (unsigned long long)n,
                     (unsigned long long)p, (unsigned long long)x);
        cr_assert_eq(seen[x], 0, "n %llu: sample %llu twice", (unsigned long long)n,
                     (unsigned long long)x);
        seen[x] = 1;
        cr_assert_eq(sampler_pos(&s, x), p, "n %llu: inverse of %llu", (unsigned long long)n,
                     (unsigned long long)x);
    }
    free(seen);
}

Test(sampler, a_bijection_with_its_inverse_for_every_size)
{
    for (uint64_t n = 0; n <= 600; n++) {
        check_bijection(7, n % 5, n);
    }
    const uint64_t sizes[] = {1023, 1024, 1025,  4095,  4096,   4097,    8191,
                              8192, 8193, 65536, 65537, 100003, 1u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        check_bijection(42, 3, sizes[i]);
    }
}

Test(sampler, huge_domains_stay_inside)
{
    const uint64_t sizes[] = {UINT64_C(1) << 40, (UINT64_C(1) << 40) + 1, UINT64_MAX / 3,
                              UINT64_MAX};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        sampler s;
        sampler_init(&s, 1, 2, sizes[i]);
        for (uint64_t p = 0; p < 1000; p++) {
            const uint64_t q = sizes[i] - 1 - p * 7919;
            const uint64_t x = sampler_at(&s, q);
            cr_assert_lt(x, sizes[i]);
            cr_assert_eq(sampler_pos(&s, x), q);
        }
    }
}

Test(sampler, epochs_and_seeds_differ_and_repeat)
{
    uint64_t a[1000], b[1000], c[1000], d[1000];
    sampler_epoch(5, 0, 1000, a);
    sampler_epoch(5, 0, 1000, b);
    sampler_epoch(5, 1, 1000, c);
    sampler_epoch(6, 0, 1000, d);
    cr_assert_eq(memcmp(a, b, sizeof(a)), 0);
    cr_assert_neq(memcmp(a, c, sizeof(a)), 0);
    cr_assert_neq(memcmp(a, d, sizeof(a)), 0);
}

Test(sampler, ranks_partition_the_epoch_in_position_order)
{
    const uint64_t n = 1001;
    uint64_t all[1001], share[400];
    sampler_epoch(9, 4, n, all);
    for (uint32_t r = 0; r < 3; r++) {
        const uint64_t cnt = sampler_rank_count(n, r, 3);
        sampler_rank_epoch(9, 4, n, r, 3, share);
        for (uint64_t i = 0; i < cnt; i++) {
            cr_assert_eq(share[i], all[r + 3 * i]);
        }
    }
}

/* Chi-square of the position of every sample over many seeds, n small: each cell should
 * hold seeds / n. With df = (n-1)^2 over the whole table, a uniform order gives a
 * statistic near df; the bound is the mean plus 6 standard deviations (a false alarm
 * about once in a billion runs; the seeds are fixed, so the test is deterministic). */
Test(sampler, positions_are_uniform_for_small_sizes)
{
    const uint32_t seeds = 20000;
    for (uint64_t n = 2; n <= 12; n++) {
        uint32_t count[12][12] = {{0}};
        for (uint32_t seed = 0; seed < seeds; seed++) {
            sampler s;
            sampler_init(&s, seed, 0, n);
            for (uint64_t p = 0; p < n; p++) {
                count[sampler_at(&s, p)][p]++;
            }
        }
        const double e = (double)seeds / (double)n;
        double chi = 0;
        for (uint64_t x = 0; x < n; x++) {
            for (uint64_t p = 0; p < n; p++) {
                chi += (count[x][p] - e) * (count[x][p] - e) / e;
            }
        }
        const double df = (double)((n - 1) * (n - 1));
        cr_assert_lt(chi, df + 6 * sqrt(2 * df), "n %llu: chi-square %.1f for %g df",
                     (unsigned long long)n, chi, df);
    }
}

/* Pairs: over many seeds, the sample at position 1 given the one at position 0 is uniform
 * over the others (a weak network would tie neighbours' samples together). */
Test(sampler, neighbours_are_independent_for_small_sizes)
{
    const uint32_t seeds = 40000;
    for (uint64_t n = 3; n <= 9; n++) {
        uint32_t pair[9][9] = {{0}};
        for (uint32_t seed = 0; seed < seeds; seed++) {
            sampler s;
            sampler_init(&s, seed, 1, n);
            pair[sampler_at(&s, 0)][sampler_at(&s, 1)]++;
        }
        const double e = (double)seeds / (double)(n * (n - 1));
        double chi = 0;
        for (uint64_t a = 0; a < n; a++) {
            for (uint64_t b = 0; b < n; b++) {
                if (a != b) {
                    chi += (pair[a][b] - e) * (pair[a][b] - e) / e;
                }
            }
        }
        const double df = (double)(n * (n - 1) - 1);
        cr_assert_lt(chi, df + 6 * sqrt(2 * df), "n %llu: chi-square %.1f for %g df",
                     (unsigned long long)n, chi, df);
    }
}

/* The Feistel path: over many seeds, the position of a few samples, bucketed, is uniform;
 * and so is the pair (bucket of the sample at p, bucket of the one at p + 1). With
 * SAMPLER_ROUNDS lowered to 2 half-rounds the positions fail; at 4 and above they pass
 * (the network has 8: four full rounds, Luby and Rackoff's bound for a strong pseudo-random
 * permutation). */
static double chi_bound(double df) { return df + 6 * sqrt(2 * df); }

/* v's bucket of b equal parts of [0, n). */
static int bucket(uint64_t v, uint64_t n, int b)
{
    const int k = (int)((double)v / (double)n * b);
    return k < b ? k : b - 1;
}

Test(sampler, feistel_positions_and_neighbours_are_uniform)
{
    enum { B = 16, X = 8, SEEDS = 20000 };
    const uint64_t sizes[] = {4097, 5000, 8193, 100003, UINT64_C(1) << 33};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        const uint64_t n = sizes[i];
        static uint32_t where[X][B], pair[B][B];
        memset(where, 0, sizeof(where));
        memset(pair, 0, sizeof(pair));
        for (uint32_t seed = 0; seed < SEEDS; seed++) {
            sampler s;
            sampler_init(&s, seed, 2, n);
            for (uint64_t x = 0; x < X; x++) {
                const uint64_t sample = x * (n / X) + x; /* spread over the domain */
                where[x][bucket(sampler_pos(&s, sample), n, B)]++;
            }
            const uint64_t p = (seed % 3) * (n / 3);
            pair[bucket(sampler_at(&s, p), n, B)][bucket(sampler_at(&s, p + 1), n, B)]++;
        }
        double chi = 0;
        const double e = (double)SEEDS / B;
        for (int x = 0; x < X; x++) {
            for (int b = 0; b < B; b++) {
                chi += (where[x][b] - e) * (where[x][b] - e) / e;
            }
        }
        cr_assert_lt(chi, chi_bound(X * (B - 1)), "n %llu: positions chi-square %.1f",
                     (unsigned long long)n, chi);
        const double e2 = (double)SEEDS / (B * B);
        double chi2 = 0;
        for (int a = 0; a < B; a++) {
            for (int b = 0; b < B; b++) {
                chi2 += (pair[a][b] - e2) * (pair[a][b] - e2) / e2;
            }
        }
        cr_assert_lt(chi2, chi_bound(B * B - 1), "n %llu: neighbours chi-square %.1f",
                     (unsigned long long)n, chi2);
    }
}
