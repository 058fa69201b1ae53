/*
 * The packer's packed order (format/fmt_perm.c, stream 0): a bijection of [0, n) with its
 * inverse, for n at and around the table's limit (4096, Fisher-Yates) and above it (the Feistel
 * network with cycle walking); the same order for the same (seed, n); at or below the
 * limit exactly the Fisher-Yates shuffle of fmt_rng(seed, 0) the packer always used.
 * Seeds are fixed: 7 and 8.
 */
#include "fmt_rng.h"
#include "pack_internal.h"

#include <criterion/criterion.h>
#include <stdlib.h>

static void check_bijection(uint64_t seed, uint64_t n)
{
    pack_order *const o = malloc(sizeof(*o));
    uint8_t *const seen = calloc(n, 1);
    cr_assert(o && seen);
    pack_order_init(o, seed, n);
    for (uint64_t p = 0; p < n; p++) {
        const uint64_t i = pack_order_at(o, p);
        cr_assert_lt(i, n, "n %llu: position %llu holds %llu", (unsigned long long)n,
                     (unsigned long long)p, (unsigned long long)i);
        cr_assert(!seen[i], "n %llu: item %llu at two positions", (unsigned long long)n,
                  (unsigned long long)i);
        seen[i] = 1;
        cr_assert_eq(pack_order_pos(o, i), p, "n %llu: pos(at(%llu)) differs",
                     (unsigned long long)n, (unsigned long long)p);
    }
    free(seen);
    free(o);
}

Test(pack_order, is_a_bijection_with_its_inverse)
{
    static const uint64_t ns[] = {1, 2, 3, 64, 4095, 4096, 4097, 8192, 8193, 100000, 262145};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        check_bijection(7, ns[i]);
    }
}

Test(pack_order, depends_on_seed_and_n_only)
{
    pack_order *const a = malloc(sizeof(*a)), *const b = malloc(sizeof(*b));
    cr_assert(a && b);
    for (uint64_t n = 4000; n <= 6000; n += 1000) {
        pack_order_init(a, 7, n);
        pack_order_init(b, 7, n);
        uint64_t differ = 0;
        for (uint64_t p = 0; p < n; p++) {
            cr_assert_eq(pack_order_at(a, p), pack_order_at(b, p));
        }
        pack_order_init(b, 8, n);
        for (uint64_t p = 0; p < n; p++) {
            differ += pack_order_at(a, p) != pack_order_at(b, p);
        }
        cr_assert_gt(differ, n / 2, "seeds 7 and 8 agree on %llu of %llu positions",
                     (unsigned long long)(n - differ), (unsigned long long)n);
    }
    free(a);
    free(b);
}

Test(pack_order, up_to_the_table_limit_is_fisher_yates)
{
    pack_order *const o = malloc(sizeof(*o));
    uint64_t *const v = malloc(FMT_PERM_TABLE_MAX * sizeof(uint64_t));
    cr_assert(o && v);
    static const uint64_t ns[] = {1, 10, 1000, FMT_PERM_TABLE_MAX};
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
        const uint64_t n = ns[k];
        for (uint64_t i = 0; i < n; i++) {
            v[i] = i;
        }
        fmt_rng rng;
        fmt_rng_seed(&rng, 7, 0);
        fmt_rng_shuffle_u64(&rng, v, n);
        pack_order_init(o, 7, n);
        for (uint64_t p = 0; p < n; p++) {
            cr_assert_eq(pack_order_at(o, p), v[p]);
        }
    }
    free(v);
    free(o);
}
