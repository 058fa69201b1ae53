/* The online storage cost model (loader_costmodel.c) on synthetic read timings. */
#include "loader_costmodel.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

/* A seeded stream in [0, 1). */
static double urand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* A refill's read shape as the loader makes them: whole chunks (1 op, ~7 MB) and ranges
 * (1-20 ops, 0.1-3 MB); `whole_share` of the reads are whole. */
static void shape(uint64_t *s, double whole_share, double *ops, double *bytes)
{
    if (urand(s) < whole_share) {
        *ops = 1;
        *bytes = 6.5e6 + 1e6 * urand(s);
    } else {
        *ops = 1 + (double)(int)(20 * urand(s));
        *bytes = *ops * (60e3 + 100e3 * urand(s));
    }
}

/* Storage: op_us per operation, bw bytes/s, multiplicative noise +-noise. */
static double storage(uint64_t *s, double op_us, double bw, double noise, double ops,
                      double bytes)
{
    const double t = op_us * ops + bytes * 1e6 / bw;
    return t * (1.0 + noise * (2.0 * urand(s) - 1.0));
}

static void feed(cost_model *m, uint64_t *s, int n, double whole_share, double op_us, double bw,
                 double noise)
{
    for (int i = 0; i < n; i++) {
        double ops, bytes;
        shape(s, whole_share, &ops, &bytes);
        cost_model_observe(m, ops, bytes, storage(s, op_us, bw, noise, ops, bytes));
    }
}

/* The model predicts the refill shapes that decide `auto` (a whole chunk, ten ranges, one
 * sample) within tol of the truth: what matters, whether or not op cost and bandwidth are
 * each well separated. */
static void expect_near(const cost_model *m, double op_us, double bw, double tol,
                        const char *what)
{
    static const double shapes[3][2] = {{1, 7e6}, {10, 1e6}, {1, 100e3}};
    for (int i = 0; i < 3; i++) {
        const double truth = op_us * shapes[i][0] + shapes[i][1] * 1e6 / bw;
        const double got = cost_model_predict(m, shapes[i][0], shapes[i][1]);
        refill_cost c;
        cost_model_get(m, &c);
        cr_expect(fabs(got - truth) <= tol * truth,
                  "%s: %g ops + %g bytes: %.0f us, truth "
                  "%.0f (model %.1f us/op, %.3g B/s)",
                  what, shapes[i][0], shapes[i][1], got, truth, c.op_us, c.bytes_per_s);
    }
}

static const refill_cost defaults = {100.0, 1e9, 0, 0.0, 0.0};

Test(costmodel, the_start_rules_until_reads_arrive)
{
    cost_model m;
    cost_model_init(&m, &defaults);
    expect_near(&m, 100.0, 1e9, 1e-9, "no reads");
    refill_cost c0;
    cost_model_get(&m, &c0);
    cr_expect_eq(c0.op_us, 100.0);
    cr_expect(fabs(c0.bytes_per_s - 1e9) < 1.0);
    cost_model_observe(&m, 0, 4096, 10.0); /* no operation: ignored */
    cost_model_observe(&m, 1, 4096, 0.0);  /* no time: ignored */
    cost_model_observe(&m, 1, 4096, NAN);  /* ignored */
    cr_expect_eq(m.observations, 0);
    expect_near(&m, 100.0, 1e9, 1e-9, "ignored reads");
}

Test(costmodel, latency_bound_storage)
{
    /* 150 operations/s with 400 MB/s: the benchmark cell's regime A. */
    uint64_t s = 1;
    cost_model m;
    cost_model_init(&m, &defaults);
    feed(&m, &s, 60, 0.2, 6667.0, 400e6, 0.1);
    expect_near(&m, 6667.0, 400e6, 0.15, "regime A");
    /* Ranges alone: bytes grow with operations, so bandwidth is barely seen; operations
     * (what decides against ranges here) are. */
    cost_model_init(&m, &defaults);
    feed(&m, &s, 60, 0.0, 6667.0, 400e6, 0.1);
    refill_cost c;
    cost_model_get(&m, &c);
    cr_expect(fabs(c.op_us - 6667.0) < 0.15 * 6667.0, "ranges only: op %.0f us", c.op_us);
}

Test(costmodel, bandwidth_bound_storage)
{
    uint64_t s = 2;
    cost_model m;
    cost_model_init(&m, &defaults);
    feed(&m, &s, 60, 0.3, 50.0, 400e6, 0.1);
    expect_near(&m, 50.0, 400e6, 0.15, "regime B");
    /* The page cache: memory speed. */
    cost_model_init(&m, &defaults);
    feed(&m, &s, 60, 0.3, 2.0, 8e9, 0.1);
    expect_near(&m, 2.0, 8e9, 0.2, "cached");
}

Test(costmodel, follows_a_change_within_a_few_dozen_reads)
{
    uint64_t s = 3;
    cost_model m;
    cost_model_init(&m, &defaults);
    feed(&m, &s, 100, 0.3, 50.0, 400e6, 0.1);
    expect_near(&m, 50.0, 400e6, 0.15, "before");
    feed(&m, &s, 40, 0.3, 6667.0, 400e6, 0.1);
    expect_near(&m, 6667.0, 400e6, 0.2, "after the op cap came");
    feed(&m, &s, 40, 0.3, 50.0, 400e6, 0.1);
    expect_near(&m, 50.0, 400e6, 0.2, "after it went");
    cr_expect_geq(m.changes, 2);
}

Test(costmodel, outliers_move_the_estimate_by_a_bounded_step)
{
    uint64_t s = 4;
    cost_model m;
    cost_model_init(&m, &defaults);
    feed(&m, &s, 80, 0.3, 200.0, 1e9, 0.05);
    /* One read in 10 stalls 20x behind another process. */
    for (int i = 0; i < 200; i++) {
        double ops, bytes;
        shape(&s, 0.3, &ops, &bytes);
        double t = storage(&s, 200.0, 1e9, 0.05, ops, bytes);
        if (i % 10 == 0) {
            t *= 20.0;
        }
        cost_model_observe(&m, ops, bytes, t);
    }
    cr_expect_gt(m.clipped, 10);
    cr_expect_eq(m.changes, 0, "stalls taken for a change of the storage");
    expect_near(&m, 200.0, 1e9, 0.5, "with 10 % stalls");
}

Test(costmodel, one_shape_keeps_the_other_direction)
{
    /* Learnt on ranges, then only whole chunks: the op cost stays known. */
    uint64_t s = 5;
    cost_model m;
    cost_model_init(&m, &defaults);
    feed(&m, &s, 60, 0.0, 6667.0, 400e6, 0.05);
    feed(&m, &s, 200, 1.0, 6667.0, 400e6, 0.05);
    expect_near(&m, 6667.0, 400e6, 0.3, "after 200 whole reads");
    /* Predictions of both shapes stay right. */
    const double whole = cost_model_predict(&m, 1, 7e6);
    const double ranges = cost_model_predict(&m, 10, 1e6);
    cr_expect(fabs(whole - (6667.0 + 17500.0)) < 0.15 * 24167.0, "whole %.0f us", whole);
    cr_expect(fabs(ranges - (66670.0 + 2500.0)) < 0.3 * 69170.0, "ranges %.0f us", ranges);
}

Test(costmodel, exploration_is_rare_and_budgeted)
{
    uint64_t s = 6;
    cost_model m;
    cost_model_init(&m, &defaults);
    feed(&m, &s, 60, 0.3, 6667.0, 400e6, 0.05);
    /* A loader reading whole chunks (chosen) where ranges of 10 samples are the other plan:
     * far costlier here, so once the model knows, exploring is rare. */
    cost_explorer e = {0, 0, 0};
    int explored = 0;
    double spent = 0, chosen = 0;
    for (int i = 0; i < 1000; i++) {
        const double c = cost_model_predict(&m, 1, 7e6);
        const double o = cost_model_predict(&m, 10, 1e6);
        chosen += c;
        if (cost_explore(&e, &m, 1, 7e6, 10, 1e6)) {
            explored++;
            spent += o - c;
            cost_model_observe(&m, 10, 1e6, storage(&s, 6667.0, 400e6, 0.05, 10, 1e6));
        } else {
            cost_model_observe(&m, 1, 7e6, storage(&s, 6667.0, 400e6, 0.05, 1, 7e6));
        }
    }
    cr_expect_leq(spent, 0.021 * chosen, "exploration spent %.0f of %.0f us", spent, chosen);
    cr_expect_lt(explored, 20, "explored %d times", explored);
    /* Near a tie the decision is uncertain and the budget allows trying the other plan. */
    cost_explorer e2 = {0, 0, 0};
    int near = 0;
    for (int i = 0; i < 400; i++) {
        near += cost_explore(&e2, &m, 1, 7e6, 1, 6.9e6);
    }
    cr_expect_gt(near, 0, "never explored a near tie");
}

/* A loader that reads one shape (8 ranges, 0.8 MB) cannot tell operation cost from
 * bandwidth, so every few refills the other plan (a whole 7 MB chunk) looks like a near
 * tie. Explorations are charged what they may cost (the guess plus two standard errors),
 * so what they really cost stays near the 2 % budget even when the model is far off. */
Test(costmodel, exploration_under_doubt_stays_within_its_budget)
{
    uint64_t s = 9;
    cost_model m;
    cost_model_init(&m, &defaults);
    cost_explorer e = {0, 0, 0};
    const double op_us = 20.0, bw = 400e6; /* bytes dear, operations cheap (regime B) */
    double spent = 0, chosen = 0;
    int explored = 0;
    for (int i = 0; i < 500; i++) {
        /* The first reads come through a throttle's burst, 5x faster than it allows. */
        const double burst = i < 20 ? 0.2 : 1.0;
        const double c = storage(&s, op_us, bw, 0.0, 8, 0.8e6);
        chosen += c;
        if (cost_explore(&e, &m, 8, 0.8e6, 2, 7e6)) {
            const double o = storage(&s, op_us, bw, 0.3, 2, 7e6);
            spent += o - c;
            explored++;
            cost_model_observe(&m, 2, 7e6, burst * o);
        } else {
            cost_model_observe(&m, 8, 0.8e6, burst * storage(&s, op_us, bw, 0.3, 8, 0.8e6));
        }
    }
    cr_expect_leq(spent, 0.03 * chosen, "%d explorations spent %.0f of %.0f us", explored,
                  spent, chosen);
}

static double wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Bounds that hold however the machine schedules the test: shares add up to the busy time
 * (at most the wall time around the calls), and during a sleep both reads are in flight. */
Test(costmodel, clock_shares_time_between_overlapping_reads, .timeout = 10)
{
    cost_clock c;
    cost_clock_init(&c);
    const struct timespec ms20 = {0, 20000000};
    const double t0 = wall_us();
    const double a = cost_clock_start(&c);
    const double b = cost_clock_start(&c);
    nanosleep(&ms20, NULL);
    const double ta = cost_clock_end(&c, a);
    const double tb = cost_clock_end(&c, b);
    const double t1 = wall_us();
    cr_expect_geq(ta, 10000, "first read's share %.0f us: half the 20 ms overlap at least", ta);
    cr_expect_geq(tb, 10000, "second read's share %.0f us", tb);
    cr_expect_leq(ta + tb, t1 - t0 + 1, "shares %.0f + %.0f us above the %.0f us elapsed", ta,
                  tb, t1 - t0);
    /* Alone: its whole time. */
    const double t2 = wall_us();
    const double x = cost_clock_start(&c);
    nanosleep(&ms20, NULL);
    const double tx = cost_clock_end(&c, x);
    const double t3 = wall_us();
    cr_expect(tx >= 20000 && tx <= t3 - t2 + 1, "lone read %.0f us (elapsed %.0f)", tx,
              t3 - t2);
    cost_clock_destroy(&c);
}

Test(costmodel, history_is_bounded_and_spans_the_run)
{
    cost_model m;
    cost_model_init(&m, &defaults);
    cost_history h;
    cost_history_init(&h, &defaults);
    uint64_t s = 7;
    for (int i = 0; i < 1000; i++) {
        feed(&m, &s, 1, 0.3, 6667.0, 400e6, 0.05);
        cost_history_note(&h, &m);
    }
    cr_expect_leq(h.n, COST_HISTORY);
    cr_expect_gt(h.n, COST_HISTORY / 2 - 1);
    cr_expect_eq(h.p[0].observations, 0);
    cr_expect_eq(h.p[0].op_us, 100.0);
    cr_expect_gt(h.p[h.n - 1].observations, 900);
    for (uint32_t i = 1; i < h.n; i++) {
        cr_expect_gt(h.p[i].observations, h.p[i - 1].observations);
    }
}
