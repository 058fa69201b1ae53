/* Scheduler (Brand protocol on metadata) and refill read plans: pure policy tests. */
#include "fmt_rng.h"
#include "format.h"
#include "loader_refill.h"
#include "loader_sampler.h"
#include "loader_sched.h"
#include "support/memds.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Chunk c's sample table, from the index's version-1 table source (a ring of them, so a
 * few may be in use in one expression). */
static const fmt_table *table_of(const fmt_index *ix, uint64_t c)
{
    static fmt_table ring[16];
    static unsigned next;
    fmt_table *t = &ring[next++ % 16];
    cr_assert_eq(fmt_index_table(ix, c, t), HDMLP_OK);
    return t;
}
#define READS(ix_, c_, slots_, n_)                                                             \
    (&(refill_reads){.table = table_of((ix_), (c_)), .slots = (slots_), .n = (n_)})

static uint64_t size_1k(uint64_t i)
{
    (void)i;
    return 1024;
}

static uint64_t size_varied(uint64_t i) { return 100 + (i * 7919) % 3000; }

typedef struct run_result {
    uint64_t loads, misses, hits;
    uint64_t *order; /* delivered samples of all epochs */
} run_result;

/* Runs `epochs` epochs through the scheduler and checks exactly-once and empty slots.
 * pool_unit 0: strict; else the pool order with units of that many samples (one rank). */
static run_result run_sched_mode(const fmt_index *ix, uint64_t a, hdmlp_policy pol,
                                 uint64_t seed, uint64_t cap, uint64_t epochs,
                                 uint32_t pool_unit)
{
    const uint64_t n = ix->h.n_samples;
    const int pool = pool_unit != 0;
    sched *s = NULL;
    const sched_params p = {.abstract_chunks = a,
                            .policy = pol,
                            .seed = seed,
                            .slot_cap_bytes = cap,
                            .order = pool ? HDMLP_ORDER_POOL : HDMLP_ORDER_STRICT,
                            .pool_unit = pool_unit,
                            .rank = 0,
                            .world = 1,
                            .tables = fmt_index_tables(ix)};
    cr_assert_eq(sched_create(ix, &p, &s), HDMLP_OK, "%s", hdmlp_last_error());
    run_result r = {0, 0, 0, malloc(n * epochs * sizeof(uint64_t))};
    uint64_t *perm = malloc(n * sizeof(uint64_t));
    uint8_t *seen = malloc(n);
    for (uint64_t e = 0; e < epochs; e++) {
        cr_assert_eq(sched_begin_epoch(s, e), HDMLP_OK, "%s", hdmlp_last_error());
        sampler_epoch(seed, e, n, perm);
        memset(seen, 0, n);
        for (uint64_t i = 0; i < n; i++) {
            sched_step st;
            cr_assert_eq(sched_request(s, perm[i], &st), HDMLP_OK, "%s", hdmlp_last_error());
            cr_assert_lt(st.sample, n);
            cr_assert_eq(seen[st.sample], 0, "sample %llu delivered twice in epoch %llu",
                         (unsigned long long)st.sample, (unsigned long long)e);
            /* Strict: the delivered sample lives at the requested location. */
            if (!pool) {
                cr_assert_eq(st.sample % ix->h.chunk_size, perm[i] % ix->h.chunk_size);
                cr_assert_eq(sched_group_of_chunk(s, st.sample / ix->h.chunk_size),
                             sched_group_of_chunk(s, perm[i] / ix->h.chunk_size));
            }
            seen[st.sample] = 1;
            r.order[e * n + i] = st.sample;
            if (st.hit) {
                r.hits++;
            } else {
                r.misses++;
                r.loads++;
                cr_assert(pool || st.n_fill + 1 <= st.fillable);
                cr_assert(!pool || st.n_load <= pool_unit);
            }
            if (cap != 0) {
                cr_assert_leq(sched_slot_bytes(s), cap);
            }
        }
        cr_assert_eq(sched_slots_occupied(s), 0, "slots still valid at the end of epoch %llu",
                     (unsigned long long)e);
    }
    free(perm);
    free(seen);
    sched_free(s);
    return r;
}

static run_result run_sched(const fmt_index *ix, uint64_t a, hdmlp_policy pol, uint64_t seed,
                            uint64_t cap, uint64_t epochs)
{
    return run_sched_mode(ix, a, pol, seed, cap, epochs, 0);
}

Test(sched, exactly_once_over_random_parameters, .timeout = 60)
{
    const uint64_t seed = 20261122;
    fmt_rng rng;
    fmt_rng_seed(&rng, seed, 0);
    printf("sched property seed %llu\n", (unsigned long long)seed);
    const uint32_t ks[] = {1, 3, 64, 100};
    for (int trial = 0; trial < 24; trial++) {
        const uint32_t k = ks[trial % 4];
        const uint64_t n = 1 + fmt_rng_below(&rng, trial < 20 ? 3000 : 100000);
        const uint64_t c = (n + k - 1) / k;
        const uint64_t a = 1 + fmt_rng_below(&rng, c);
        memds m;
        memds_make(&m, n, k, size_1k);
        run_result r = run_sched(
            &m.ix, a, trial % 2 ? HDMLP_POLICY_RANDOM : HDMLP_POLICY_FILL_RATE, trial, 0, 2);
        cr_assert_eq(r.hits + r.misses, 2 * n);
        cr_assert_geq(r.loads, 2 * c, "every chunk is read at least once per epoch");
        free(r.order);
        memds_free(&m);
    }
}

Test(sched, deterministic_for_same_seed_and_different_for_another, .timeout = 30)
{
    memds m;
    memds_make(&m, 5000, 16, size_1k);
    run_result a = run_sched(&m.ix, 40, HDMLP_POLICY_FILL_RATE, 1, 0, 2);
    run_result b = run_sched(&m.ix, 40, HDMLP_POLICY_FILL_RATE, 1, 0, 2);
    run_result c = run_sched(&m.ix, 40, HDMLP_POLICY_FILL_RATE, 2, 0, 2);
    cr_assert_eq(memcmp(a.order, b.order, 2 * 5000 * sizeof(uint64_t)), 0);
    cr_assert_neq(memcmp(a.order, c.order, 2 * 5000 * sizeof(uint64_t)), 0);
    free(a.order);
    free(b.order);
    free(c.order);
    memds_free(&m);
}

Test(sched, fill_rate_loads_no_more_than_random, .timeout = 60)
{
    /* The paper's Table 5: choosing by fill rate needs fewer chunk loads than choosing at
     * random. Summed over seeds so the comparison is not a coin flip. */
    memds m;
    memds_make(&m, 20000, 64, size_1k);
    uint64_t fr = 0, rnd = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        run_result a = run_sched(&m.ix, 78, HDMLP_POLICY_FILL_RATE, seed, 0, 1);
        run_result b = run_sched(&m.ix, 78, HDMLP_POLICY_RANDOM, seed, 0, 1);
        fr += a.loads;
        rnd += b.loads;
        free(a.order);
        free(b.order);
    }
    printf("loads: fill-rate %llu, random %llu\n", (unsigned long long)fr,
           (unsigned long long)rnd);
    cr_assert_lt(fr, rnd);
    memds_free(&m);
}

Test(sched, everything_in_memory_reads_each_chunk_once, .timeout = 30)
{
    memds m;
    memds_make(&m, 1000, 10, size_1k);
    run_result r = run_sched(&m.ix, 100, HDMLP_POLICY_FILL_RATE, 5, 0, 3);
    cr_assert_eq(r.loads, 3 * 100);
    free(r.order);
    memds_free(&m);
}

Test(sched, byte_cap_bounds_slot_bytes, .timeout = 30)
{
    memds m;
    memds_make(&m, 4000, 32, size_varied);
    const uint64_t cap = 20 * 3100;
    run_result r = run_sched(&m.ix, 10, HDMLP_POLICY_FILL_RATE, 9, cap, 2);
    free(r.order);
    memds_free(&m);
}

Test(sched, rejects_bad_abstract_chunk_count)
{
    memds m;
    memds_make(&m, 100, 10, size_1k);
    sched *s = NULL;
    sched_params p = {.abstract_chunks = 0,
                      .policy = HDMLP_POLICY_FILL_RATE,
                      .tables = fmt_index_tables(&m.ix)};
    cr_assert_eq(sched_create(&m.ix, &p, &s), HDMLP_E_INVAL);
    cr_assert_null(s);
    p.abstract_chunks = 11;
    cr_assert_eq(sched_create(&m.ix, &p, &s), HDMLP_E_INVAL);
    p.abstract_chunks = 10;
    cr_assert_eq(sched_create(&m.ix, &p, &s), HDMLP_OK);
    sched_free(s);
    memds_free(&m);
}

Test(sched, groups_are_consecutive_and_balanced)
{
    memds m;
    memds_make(&m, 1000, 10, size_1k); /* 100 chunks */
    sched *s = NULL;
    const sched_params p = {.abstract_chunks = 7,
                            .policy = HDMLP_POLICY_FILL_RATE,
                            .tables = fmt_index_tables(&m.ix)};
    cr_assert_eq(sched_create(&m.ix, &p, &s), HDMLP_OK);
    uint64_t count[7] = {0};
    uint64_t prev = 0;
    for (uint64_t c = 0; c < 100; c++) {
        const uint64_t g = sched_group_of_chunk(s, c);
        cr_assert(g == prev || g == prev + 1);
        prev = g;
        count[g]++;
    }
    for (int g = 0; g < 7; g++) {
        cr_assert(count[g] == 14 || count[g] == 15, "group %d has %llu chunks", g,
                  (unsigned long long)count[g]);
    }
    cr_assert_eq(count[0], 15); /* 100 = 7*14 + 2: the first two groups are larger */
    cr_assert_eq(count[2], 14);
    sched_free(s);
    memds_free(&m);
}

static const refill_cost fast_ops = {1.0, 1e9, 0, 0.0, 0.0};     /* operations nearly free */
static const refill_cost slow_ops = {10000.0, 1e9, 0, 0.0, 0.0}; /* 10 ms per operation */

Test(refill, whole_reads_the_chunk_in_one_operation)
{
    memds m;
    memds_make(&m, 640, 64, size_1k);
    const uint32_t slots[] = {3, 40};
    refill_plan p;
    cr_assert_eq(refill_plan_build(&m.ix, 2, READS(&m.ix, 2, slots, 2), HDMLP_REFILL_WHOLE,
                                   &fast_ops, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.whole, 1);
    cr_assert_eq(p.n_ranges, 1);
    cr_assert_eq(p.buf_len, 64 + 64 * 1024);
    cr_assert_eq(p.sample_pos[0], 64 + 3 * 1024);
    cr_assert_eq(p.sample_pos[1], 64 + 40 * 1024);
    refill_plan_free(&p);
    memds_free(&m);
}

Test(refill, ranges_merge_neighbours_and_split_far_samples)
{
    memds m;
    memds_make(&m, 640, 64, size_1k);
    const uint32_t slots[] = {3, 4, 40};
    refill_plan p;
    cr_assert_eq(refill_plan_build(&m.ix, 1, READS(&m.ix, 1, slots, 3), HDMLP_REFILL_RANGES,
                                   &fast_ops, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.whole, 0);
    cr_assert_eq(p.n_ranges, 2, "adjacent samples 3,4 merge; 40 stands alone");
    cr_assert_eq(p.buf_len, 3 * 1024);
    cr_assert_eq(p.sample_pos[0], 0);
    cr_assert_eq(p.sample_pos[1], 1024);
    cr_assert_eq(p.sample_pos[2], 2048);
    refill_plan_free(&p);
    /* With expensive operations the gap is cheaper than a second read: one range. */
    cr_assert_eq(refill_plan_build(&m.ix, 1, READS(&m.ix, 1, slots, 3), HDMLP_REFILL_RANGES,
                                   &slow_ops, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.n_ranges, 1);
    cr_assert_eq(p.sample_pos[2], 37 * 1024);
    refill_plan_free(&p);
    /* The same cost, but a learnt one whose reads have not shown it (doubt as large as the
     * estimate): the 35 KiB gap is not worth reading through. Half as much doubt still is. */
    refill_cost unsure = slow_ops;
    unsure.op_us_doubt = slow_ops.op_us;
    cr_assert_eq(refill_plan_build(&m.ix, 1, READS(&m.ix, 1, slots, 3), HDMLP_REFILL_RANGES,
                                   &unsure, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.n_ranges, 2);
    cr_assert_eq(p.buf_len, 3 * 1024);
    refill_plan_free(&p);
    unsure.op_us_doubt = slow_ops.op_us / 2;
    cr_assert_eq(refill_plan_build(&m.ix, 1, READS(&m.ix, 1, slots, 3), HDMLP_REFILL_RANGES,
                                   &unsure, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.n_ranges, 1);
    refill_plan_free(&p);
    /* Bytes whose cost is unsure (two standard errors of 1 s per MB, the estimate 1 ms):
     * reading 35 KiB through may cost 35 ms, more than the 10 ms operation it saves. */
    refill_cost dear = slow_ops;
    dear.mb_us_doubt = 1e6;
    cr_assert_eq(refill_plan_build(&m.ix, 1, READS(&m.ix, 1, slots, 3), HDMLP_REFILL_RANGES,
                                   &dear, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.n_ranges, 2);
    refill_plan_free(&p);
    memds_free(&m);
}

Test(refill, ranges_longer_than_the_device_request_cost_more_operations)
{
    memds m;
    memds_make(&m, 640, 64, size_1k);
    const uint32_t slots[] = {3, 40};
    /* The device takes at most 16 KiB per request: the whole 64 KiB chunk is 5 requests
     * (header included), two 1 KiB samples 2. */
    const refill_cost small_req = {10000.0, 1e9, 16384, 0.0, 0.0};
    refill_shape w, r;
    refill_plan_shape(&m.ix, 2, READS(&m.ix, 2, slots, 2), HDMLP_REFILL_WHOLE, &small_req, 0,
                      &w);
    refill_plan_shape(&m.ix, 2, READS(&m.ix, 2, slots, 2), HDMLP_REFILL_RANGES, &fast_ops, 0,
                      &r);
    cr_assert_eq(w.n_ranges, 1);
    cr_assert_eq(w.requests, 5, "whole: %u requests", w.requests);
    cr_assert_eq(r.n_ranges, 2);
    cr_assert_eq(r.requests, 2);
    /* With 10 ms per operation and no request limit, one read (whole or merged) beats two;
     * with 16 KiB requests that read is 3 operations, so auto keeps two ranges apart. */
    refill_shape a;
    refill_plan_shape(&m.ix, 2, READS(&m.ix, 2, slots, 2), HDMLP_REFILL_AUTO, &slow_ops, 0, &a);
    cr_assert_eq(a.requests, 1);
    refill_plan_shape(&m.ix, 2, READS(&m.ix, 2, slots, 2), HDMLP_REFILL_AUTO, &small_req, 0,
                      &a);
    cr_assert_eq(a.whole, 0, "a 5-request whole chunk is dearer than the ranges");
    cr_assert_eq(a.n_ranges, 2, "merged they would be one 38 KiB read: 3 requests, not 2");
    cr_assert_eq(a.requests, 2);
    cr_assert_eq(a.buf_len, 2 * 1024);
    memds_free(&m);
}

Test(refill, merges_stop_where_a_merge_no_longer_saves_a_request)
{
    memds m;
    memds_make(&m, 640, 64, size_1k);
    /* 16 KiB requests, 10 ms per operation, bytes nearly free: samples 3, 10 and 17 fit one
     * request (15 KiB) and merge; adding 24 would make it 22 KiB, 2 requests, as many as
     * reading 24 apart, so the 6 KiB gap is not read. */
    const refill_cost small_req = {10000.0, 1e9, 16384, 0.0, 0.0};
    const uint32_t slots[] = {3, 10, 17, 24, 26};
    refill_plan p;
    cr_assert_eq(refill_plan_build(&m.ix, 1, READS(&m.ix, 1, slots, 5), HDMLP_REFILL_RANGES,
                                   &small_req, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.n_ranges, 2);
    cr_assert_eq(p.requests, 2);
    cr_assert_eq(p.ranges[0].len, 15 * 1024);
    cr_assert_eq(p.ranges[1].len, 3 * 1024, "24..26 merge within one request");
    cr_assert_eq(p.buf_len, 18 * 1024);
    cr_assert_eq(p.sample_pos[3], 15 * 1024);
    cr_assert_eq(p.sample_pos[4], 17 * 1024);
    refill_plan_free(&p);
    /* Without a request limit the same plan is one read. */
    const refill_cost no_limit = {10000.0, 1e9, 0, 0.0, 0.0};
    cr_assert_eq(refill_plan_build(&m.ix, 1, READS(&m.ix, 1, slots, 5), HDMLP_REFILL_RANGES,
                                   &no_limit, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.n_ranges, 1);
    cr_assert_eq(p.buf_len, 24 * 1024);
    refill_plan_free(&p);
    memds_free(&m);
}

Test(refill, auto_picks_the_cheaper_plan)
{
    memds m;
    memds_make(&m, 640, 64, size_1k);
    const uint32_t few[] = {0, 63};
    refill_plan p;
    /* Cheap operations: two small reads beat one 64 KiB read. */
    cr_assert_eq(refill_plan_build(&m.ix, 0, READS(&m.ix, 0, few, 2), HDMLP_REFILL_AUTO,
                                   &fast_ops, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.whole, 0);
    refill_plan_free(&p);
    /* Expensive operations: one read wins. */
    cr_assert_eq(refill_plan_build(&m.ix, 0, READS(&m.ix, 0, few, 2), HDMLP_REFILL_AUTO,
                                   &slow_ops, 0, &p),
                 HDMLP_OK);
    cr_assert_eq(p.whole, 1);
    refill_plan_free(&p);
    memds_free(&m);
}

Test(refill, direct_io_aligns_every_range)
{
    memds m;
    memds_make(&m, 640, 64, size_1k);
    const uint32_t slots[] = {5, 50};
    refill_plan p;
    cr_assert_eq(refill_plan_build(&m.ix, 3, READS(&m.ix, 3, slots, 2), HDMLP_REFILL_RANGES,
                                   &fast_ops, 1, &p),
                 HDMLP_OK);
    for (uint32_t i = 0; i < p.n_ranges; i++) {
        cr_assert_eq(p.ranges[i].seg_off % FMT_ALIGN, 0);
        cr_assert_eq(p.ranges[i].len % FMT_ALIGN, 0);
        cr_assert_eq(p.ranges[i].buf_off % FMT_ALIGN, 0);
    }
    fmt_chunk ch;
    fmt_index_chunk(&m.ix, 3, &ch);
    /* sample 50's bytes land where the plan says */
    fmt_sample s;
    fmt_index_sample(&m.ix, 3 * 64 + 50, &s);
    const refill_range *r = &p.ranges[p.n_ranges - 1];
    cr_assert_eq(p.sample_pos[1], r->buf_off + (ch.offset + s.offset - r->seg_off));
    refill_plan_free(&p);
    memds_free(&m);
}

Test(sched, pool_order_is_exactly_once_and_reads_each_unit_once, .timeout = 60)
{
    memds m;
    memds_make(&m, 20000, 64, size_1k);
    const uint64_t c = (20000 + 63) / 64;
    run_result strict = run_sched_mode(&m.ix, 78, HDMLP_POLICY_FILL_RATE, 4, 0, 2, 0);
    run_result whole = run_sched_mode(&m.ix, 78, HDMLP_POLICY_FILL_RATE, 4, 0, 2, 64);
    run_result quarter = run_sched_mode(&m.ix, 78, HDMLP_POLICY_FILL_RATE, 4, 0, 2, 16);
    printf("loads per chunk per epoch: strict %.2f, pool whole %.2f, pool K/4 %.2f\n",
           (double)strict.loads / (double)c / 2, (double)whole.loads / (double)c / 2,
           (double)quarter.loads / (double)c / 2);
    /* One pass: each unit is read exactly once per epoch (the last chunk, 20000 - 312 * 64
     * = 32 samples, has 2 quarter units). */
    cr_assert_eq(whole.loads, 2 * c);
    cr_assert_eq(quarter.loads, 2 * ((c - 1) * 4 + 2));
    cr_assert_lt(whole.loads * 3, strict.loads);
    free(strict.order);
    free(whole.order);
    free(quarter.order);
    memds_free(&m);
}

/* Same-chunk distance of one epoch's delivered order (bench_random.h's definition): the mean
 * |pos(a) - pos(b)| over pairs of samples of one chunk, over (n + 1) / 3. */
static double same_chunk_distance(const uint64_t *order, uint64_t n, uint32_t k)
{
    const uint64_t c = (n + k - 1) / k;
    uint64_t *count = calloc(c, sizeof(uint64_t));
    double *sum = calloc(c, sizeof(double));
    double dist = 0, pairs = 0;
    for (uint64_t p = 0; p < n; p++) {
        const uint64_t ch = order[p] / k;
        dist += (double)count[ch] * (double)p - sum[ch];
        pairs += (double)count[ch];
        count[ch]++;
        sum[ch] += (double)p;
    }
    free(count);
    free(sum);
    return pairs > 0 ? dist / pairs / ((double)(n + 1) / 3.0) : 1.0;
}

/* Pearson correlation of the samples' positions in two epochs. */
static double position_correlation(const uint64_t *e0, const uint64_t *e1, uint64_t n)
{
    uint64_t *pos = malloc(n * sizeof(uint64_t));
    for (uint64_t p = 0; p < n; p++) {
        pos[e0[p]] = p;
    }
    const double mean = (double)(n - 1) / 2.0;
    double sxy = 0, sxx = 0;
    for (uint64_t p = 0; p < n; p++) {
        const double x = (double)pos[e1[p]] - mean, y = (double)p - mean;
        sxy += x * y;
        sxx += x * x;
    }
    free(pos);
    return sxy / sxx;
}

/* Over random (N, K, memory): the pool order is exactly once (run_sched_mode checks it), its
 * one knob is monotone (more reads per chunk never mix less), its randomness stays within
 * bounds a pool of that size allows, and consecutive epochs are unrelated. */
Test(sched, pool_randomness_is_bounded_and_the_knob_is_monotone, .timeout = 120)
{
    const uint64_t seed = 20261127;
    fmt_rng rng;
    fmt_rng_seed(&rng, seed, 0);
    printf("pool property seed %llu\n", (unsigned long long)seed);
    const uint32_t ks[] = {8, 16, 32, 64};
    for (int trial = 0; trial < 8; trial++) {
        const uint32_t k = ks[trial % 4];
        const uint64_t n = 4000 + fmt_rng_below(&rng, 16000);
        const uint64_t c = (n + k - 1) / k;
        const double f = 0.05 + 0.45 * (double)fmt_rng_below(&rng, 1000) / 1000.0;
        const uint64_t a = (uint64_t)(f * (double)c) > 0 ? (uint64_t)(f * (double)c) : 1;
        memds m;
        memds_make(&m, n, k, size_1k);
        double prev = 0;
        for (uint32_t reads = 1; reads <= k; reads *= 2) {
            const uint32_t unit = (k + reads - 1) / reads;
            run_result r = run_sched_mode(&m.ix, a, HDMLP_POLICY_FILL_RATE, trial, 0, 4, unit);
            double d = 0, corr = 0;
            for (int e = 0; e < 4; e++) {
                d += same_chunk_distance(r.order + e * n, n, k) / 4;
            }
            for (int e = 0; e < 3; e++) {
                corr += position_correlation(r.order + e * n, r.order + (e + 1) * n, n) / 3;
            }
            printf("N %llu K %u pool %.3f reads %u: same-chunk distance %.3f, epoch "
                   "correlation %+.3f\n",
                   (unsigned long long)n, k, (double)a / (double)c, reads, d, corr);
            /* Samples of one unit enter the pool together and leave it after about a pool's
             * worth of draws (less at the epoch's end, where the pool drains): their mean
             * distance is between 0.6 and 1 times min(1, 3 × pool fraction) of a
             * permutation's. Samples of other units arrive at unrelated times. */
            const double same_unit = (double)(unit - 1) / (double)(k - 1);
            const double span = fmin(1.0, 3.0 * (double)a / (double)c);
            const double lo = (1.0 - same_unit) + same_unit * 0.6 * span - 0.05;
            const double hi = (1.0 - same_unit) + same_unit * span + 0.05;
            cr_expect(d > lo && d < hi,
                      "N %llu K %u reads %u: distance %.3f, not in %.3f..%.3f",
                      (unsigned long long)n, k, reads, d, lo, hi);
            cr_expect_geq(d, prev - 0.02,
                          "K %u: %u reads mix less (%.3f) than half as many (%.3f)", k, reads,
                          d, prev);
            /* independent epochs: within ~4 standard errors of 0 (units are the draws) */
            const double units = (double)c * (double)reads;
            cr_expect_lt(fabs(corr), 4.0 / sqrt(units * 3.0) + 0.01, "K %u reads %u: %.3f", k,
                         reads, corr);
            prev = d;
            free(r.order);
        }
        cr_expect_geq(prev, 0.9, "K %u: reading sample by sample is nearly a permutation", k);
        memds_free(&m);
    }
}

/* Policy clairvoyant: the delivered order is the request order itself, each sample is read
 * exactly once per epoch, reads stay within the window, the byte cap holds, and it needs
 * fewer reads than the fill rate's refills at the same memory. */
Test(sched, clairvoyant_delivers_the_permutation_reading_each_sample_once, .timeout = 60)
{
    memds m;
    memds_make(&m, 20000, 64, size_varied);
    const uint64_t n = 20000, a = 78; /* 25 % of the chunks */
    const uint64_t cap = 78 * 64 * 1600, window = 20 * 1600;
    for (int capped = 0; capped < 2; capped++) {
        sched *s = NULL;
        const sched_params p = {.abstract_chunks = a,
                                .policy = HDMLP_POLICY_CLAIRVOYANT,
                                .seed = 3,
                                .slot_cap_bytes = capped ? cap : 0,
                                .window_bytes = capped ? window : 0,
                                .rank = 0,
                                .world = 1,
                                .tables = fmt_index_tables(&m.ix)};
        cr_assert_eq(sched_create(&m.ix, &p, &s), HDMLP_OK, "%s", hdmlp_last_error());
        uint64_t *perm = malloc(n * sizeof(uint64_t));
        uint64_t loads = 0, read = 0;
        for (uint64_t e = 0; e < 2; e++) {
            cr_assert_eq(sched_begin_epoch(s, e), HDMLP_OK);
            sampler_epoch(3, e, n, perm);
            for (uint64_t i = 0; i < n; i++) {
                sched_step st;
                cr_assert_eq(sched_request(s, perm[i], &st), HDMLP_OK, "%s",
                             hdmlp_last_error());
                cr_assert_eq(st.sample, perm[i]);
                if (!st.hit) {
                    loads++;
                    read += st.n_load;
                    const uint64_t c = st.chunk;
                    for (uint32_t j = 1; j < st.n_load; j++) {
                        cr_assert_lt(st.load_slot[j - 1], st.load_slot[j]);
                    }
                    if (capped) {
                        const uint8_t *lo =
                            m.ix.samples + (c * 64 + st.load_slot[0]) * FMT_SAMPLE_REC_LEN;
                        const uint8_t *hi =
                            m.ix.samples +
                            (c * 64 + st.load_slot[st.n_load - 1]) * FMT_SAMPLE_REC_LEN;
                        cr_assert_leq(fmt_ld64(hi) + fmt_ld64(hi + 8) - fmt_ld64(lo), window);
                        cr_assert_leq(sched_slot_bytes(s), cap);
                    }
                }
            }
            cr_assert_eq(sched_slots_occupied(s), 0);
        }
        cr_assert_eq(read, 2 * n, "each sample is read once per epoch");
        run_result fr = run_sched(&m.ix, a, HDMLP_POLICY_FILL_RATE, 3, p.slot_cap_bytes, 2);
        printf("reads in 2 epochs (%s): clairvoyant %llu, fill-rate %llu\n",
               capped ? "window and byte cap" : "no cap", (unsigned long long)loads,
               (unsigned long long)fr.loads);
        if (!capped) {
            cr_assert_lt(loads, fr.loads);
        }
        free(fr.order);
        free(perm);
        sched_free(s);
    }
    memds_free(&m);
}

/* ---- sample tables: the scheduler reads records only through p.tables ------------------- */

/* A table source that copies a chunk's records into the caller's buffer, poisoned first (a
 * later format's shape: tables read into a buffer), failing for chunk `fail`. */
typedef struct copy_tables {
    const fmt_index *ix;
    uint64_t fail;
    uint64_t gets;
} copy_tables;

static int copy_get(void *ctx, uint64_t chunk, void *buf, size_t cap, fmt_table *out)
{
    copy_tables *ct = ctx;
    ct->gets++;
    memset(buf, 0xa5, cap);
    if (chunk == ct->fail) {
        return hd_err(HDMLP_E_IO, "sample table of chunk %llu: read failed",
                      (unsigned long long)chunk);
    }
    fmt_table t;
    const int rc = fmt_index_table(ct->ix, chunk, &t);
    if (rc != HDMLP_OK) {
        return rc;
    }
    cr_assert_geq(cap, (size_t)t.n * FMT_SAMPLE_REC_LEN);
    memcpy(buf, t.rec, (size_t)t.n * FMT_SAMPLE_REC_LEN);
    *out = t;
    out->rec = buf;
    return HDMLP_OK;
}

static uint64_t copy_top(void *ctx, uint64_t m)
{
    return fmt_index_raw_top_sum(((copy_tables *)ctx)->ix, m);
}

static fmt_tables copying(copy_tables *ct)
{
    return (fmt_tables){copy_get, copy_top, ct,
                        (size_t)ct->ix->h.chunk_size * FMT_SAMPLE_REC_LEN, NULL};
}

static sched_params table_params(const fmt_index *ix, hdmlp_policy pol, int pool)
{
    return (sched_params){.abstract_chunks = 12,
                          .policy = pol,
                          .seed = 5,
                          .slot_cap_bytes = 12 * 16 * 1400,
                          .order = pool ? HDMLP_ORDER_POOL : HDMLP_ORDER_STRICT,
                          .pool_unit = 5,
                          .window_bytes = pol == HDMLP_POLICY_CLAIRVOYANT ? 6 * 1600 : 0,
                          .rank = 0,
                          .world = 1,
                          .tables = fmt_index_tables(ix)};
}

Test(sched, decisions_are_the_same_from_tables_copied_into_a_buffer, .timeout = 60)
{
    memds m;
    memds_make(&m, 1000, 16, size_varied); /* 63 chunks, the last of 8 */
    const hdmlp_policy pols[] = {HDMLP_POLICY_FILL_RATE, HDMLP_POLICY_RANDOM,
                                 HDMLP_POLICY_CLAIRVOYANT, HDMLP_POLICY_FILL_RATE};
    uint64_t *perm = malloc(1000 * sizeof(uint64_t));
    for (int v = 0; v < 4; v++) {
        const int pool = v == 3;
        copy_tables ct = {&m.ix, UINT64_MAX, 0};
        sched_params p = table_params(&m.ix, pols[v], pool);
        sched *a = NULL, *b = NULL;
        cr_assert_eq(sched_create(&m.ix, &p, &a), HDMLP_OK, "%s", hdmlp_last_error());
        p.tables = copying(&ct);
        cr_assert_eq(sched_create(&m.ix, &p, &b), HDMLP_OK, "%s", hdmlp_last_error());
        uint64_t misses = 0;
        for (uint64_t e = 0; e < 2; e++) {
            cr_assert_eq(sched_begin_epoch(a, e), HDMLP_OK);
            cr_assert_eq(sched_begin_epoch(b, e), HDMLP_OK);
            sampler_epoch(5, e, 1000, perm);
            for (uint64_t i = 0; i < 1000; i++) {
                sched_step x, y;
                cr_assert_eq(sched_request(a, perm[i], &x), HDMLP_OK, "%s", hdmlp_last_error());
                cr_assert_eq(sched_request(b, perm[i], &y), HDMLP_OK, "%s", hdmlp_last_error());
                cr_assert_eq(x.hit, y.hit, "variant %d, epoch %llu, request %llu", v,
                             (unsigned long long)e, (unsigned long long)i);
                cr_assert_eq(x.sample, y.sample);
                cr_assert_eq(x.size, y.size);
                cr_assert_eq(x.slot, y.slot);
                if (x.hit) {
                    continue;
                }
                misses++;
                cr_assert_eq(x.chunk, y.chunk);
                cr_assert_eq(x.n_load, y.n_load);
                cr_assert_eq(x.n_fill, y.n_fill);
                cr_assert_eq(x.fillable, y.fillable);
                cr_assert_eq(memcmp(x.load_slot, y.load_slot, x.n_load * sizeof(uint32_t)), 0);
                cr_assert_eq(memcmp(x.load_place, y.load_place, x.n_load * sizeof(uint64_t)),
                             0);
                cr_assert_eq(x.table->chunk, x.chunk);
                cr_assert_eq(y.table->n, x.table->n);
                cr_assert_eq(
                    memcmp(x.table->rec, y.table->rec, x.table->n * (size_t)FMT_SAMPLE_REC_LEN),
                    0);
            }
        }
        cr_assert_gt(misses, 0);
        cr_assert_leq(ct.gets, misses, "at most one table asked for per read");
        sched_free(a);
        sched_free(b);
    }
    free(perm);
    memds_free(&m);
}

Test(sched, a_table_source_error_fails_the_request, .timeout = 30)
{
    memds m;
    memds_make(&m, 1000, 16, size_varied);
    uint64_t *perm = malloc(1000 * sizeof(uint64_t));
    for (int v = 0; v < 3; v++) {
        const hdmlp_policy pol = v == 1 ? HDMLP_POLICY_CLAIRVOYANT : HDMLP_POLICY_FILL_RATE;
        copy_tables ct = {&m.ix, 40, 0};
        sched_params p = table_params(&m.ix, pol, v == 2);
        p.tables = copying(&ct);
        sched *s = NULL;
        cr_assert_eq(sched_create(&m.ix, &p, &s), HDMLP_OK, "%s", hdmlp_last_error());
        cr_assert_eq(sched_begin_epoch(s, 0), HDMLP_OK);
        sampler_epoch(5, 0, 1000, perm);
        int rc = HDMLP_OK;
        for (uint64_t i = 0; i < 1000 && rc == HDMLP_OK; i++) {
            sched_step st;
            rc = sched_request(s, perm[i], &st);
            cr_assert(rc != HDMLP_OK || st.hit || st.chunk != 40);
        }
        cr_assert_eq(rc, HDMLP_E_IO, "variant %d: %s", v, hdmlp_last_error());
        cr_assert(strstr(hdmlp_last_error(), "chunk 40"), "%s", hdmlp_last_error());
        sched_free(s);
    }
    free(perm);
    memds_free(&m);
}

Test(sched, rejects_a_missing_table_source)
{
    memds m;
    memds_make(&m, 100, 10, size_1k);
    sched_params p = table_params(&m.ix, HDMLP_POLICY_FILL_RATE, 0);
    p.abstract_chunks = 5;
    p.tables.get = NULL;
    sched *s = NULL;
    cr_assert_eq(sched_create(&m.ix, &p, &s), HDMLP_E_INVAL);
    cr_assert_null(s);
    memds_free(&m);
}
