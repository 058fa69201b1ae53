/*
 * Loader property tests, order (see test_loader_props.c): the delivery order is identical
 * for identical inputs, whatever the thread count and I/O engine, and differs for another
 * seed or epoch. A failing case prints its parameters; rerun it alone with the printed
 * case seed.
 */
#include "hdmlp.h"
#include "support/props_case.h"
#include "support/props_run.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int same_run(const run_out *a, const run_out *b, char *why, size_t cap)
{
    if (a->n_seq != b->n_seq || a->n_batches != b->n_batches) {
        snprintf(why, cap, "%" PRIu64 "/%" PRIu64 " samples/batches vs %" PRIu64 "/%" PRIu64,
                 a->n_seq, a->n_batches, b->n_seq, b->n_batches);
        return 0;
    }
    for (uint64_t i = 0; i < a->n_seq; i++) {
        if (a->seq[i] != b->seq[i]) {
            snprintf(why, cap, "position %" PRIu64 ": sample %" PRIu64 " vs %" PRIu64, i,
                     a->seq[i], b->seq[i]);
            return 0;
        }
    }
    for (uint64_t i = 0; i < a->n_batches; i++) {
        if (a->bsize[i] != b->bsize[i] || a->bepoch[i] != b->bepoch[i]) {
            snprintf(why, cap, "batch %" PRIu64 " differs", i);
            return 0;
        }
    }
    return 1;
}

Test(loader_props, same_inputs_same_order_across_threads_and_engines, .timeout = 240)
{
    const uint64_t seed = 0x5eed0007;
    cr_log_info("determinism: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        if (c.ds.n_samples * c.epochs > MAX_DELIVERED / 2) {
            c.epochs = 1;
        }
        char dir[512], desc[768], why[256];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        /* Budgets are sized for the most threads used below: more I/O threads need more
         * read buffers, but never change the order. */
        c.threads = 3;
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out a, b, d;
        c.threads = 1;
        run_loader(ds, &c, budget, HDMLP_ENGINE_PREAD, 0, &a);
        c.threads = 3;
        run_loader(ds, &c, budget, HDMLP_ENGINE_IO_URING, 0, &b);
        c.threads = 2;
        run_loader(ds, &c, budget, HDMLP_ENGINE_PREAD, 0, &d);
        cr_assert_eq(a.rc, HDMLP_END, "%s: %s: %s", desc, hdmlp_err_name(a.rc), a.rc_detail);
        cr_assert_eq(b.rc, HDMLP_END, "%s: %s: %s", desc, hdmlp_err_name(b.rc), b.rc_detail);
        cr_assert_eq(d.rc, HDMLP_END, "%s: %s: %s", desc, hdmlp_err_name(d.rc), d.rc_detail);
        cr_assert(same_run(&a, &b, why, sizeof(why)), "%s: pread/1 thread vs %s/3 threads: %s",
                  desc, engine_name(b.engine), why);
        cr_assert(same_run(&a, &d, why, sizeof(why)), "%s: 1 vs 2 pread threads: %s", desc,
                  why);
        cr_assert_eq(a.st.chunk_loads, b.st.chunk_loads, "%s: loads differ", desc);
        cr_assert_eq(a.st.hits, b.st.hits, "%s: hits differ", desc);
        run_free(&a);
        run_free(&b);
        run_free(&d);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

/* Fraction of positions where two orders agree. */
static double agreement(const uint64_t *a, const uint64_t *b, uint64_t n)
{
    uint64_t same = 0;
    for (uint64_t i = 0; i < n; i++) {
        same += a[i] == b[i];
    }
    return n ? (double)same / (double)n : 1.0;
}

Test(loader_props, other_seed_or_epoch_other_order, .timeout = 240)
{
    /* For a true permutation of N ≥ 50 the chance that two independent orders agree at
     * more than half the positions is below 10^-20 (the count of fixed points of a random
     * permutation is ~Poisson(1)); the orders must differ that much. */
    const uint64_t seed = 0x5eed0008;
    cr_log_info("seed changes order: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        if (c.ds.n_samples < 50) {
            continue;
        }
        c.drop_last = 0;
        c.epochs = c.ds.n_samples * 2 <= MAX_DELIVERED ? 2 : 1;
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out a, b;
        run_loader(ds, &c, budget, c.engine, 0, &a);
        c.seed ^= 0x9e3779b97f4a7c15ull;
        run_loader(ds, &c, budget, c.engine, 0, &b);
        cr_assert_eq(a.rc, HDMLP_END, "%s: %s", desc, a.rc_detail);
        cr_assert_eq(b.rc, HDMLP_END, "%s: %s", desc, b.rc_detail);
        cr_assert_eq(a.n_seq, b.n_seq, "%s", desc);
        const uint64_t n = c.ds.n_samples;
        const double ab = agreement(a.seq, b.seq, n);
        cr_assert_lt(ab, 0.5,
                     "%s: seeds %" PRIu64 " and %" PRIu64 " agree at %.0f%% of epoch 0", desc,
                     c.seed ^ 0x9e3779b97f4a7c15ull, c.seed, 100 * ab);
        if (c.epochs >= 2) {
            const double e01 = agreement(a.seq, a.seq + n, n);
            cr_assert_lt(e01, 0.5, "%s: epochs 0 and 1 agree at %.0f%%", desc, 100 * e01);
        }
        run_free(&a);
        run_free(&b);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}
