/*
 * Loader property tests (DESIGN.md §4): over random parameters drawn from fixed, printed
 * seeds — N from 1 to 10^5, K in {1, 3, 64, 100}, budgets from the smallest the loader
 * accepts (one abstract chunk) to more than the dataset, several epochs, batch sizes,
 * drop_last, both policies, every refill mode, compressed or not — check:
 *   - every epoch delivers every sample exactly once, with the right bytes and label;
 *   - batches carry epochs 0, 1, 2, ..., have the configured size except the last of an
 *     epoch (dropped with drop_last), and HDMLP_END follows the last epoch, repeatedly;
 *   - every abstract-memory slot is empty at the end of an epoch;
 *   - the stats add up, and the peak accounted memory never exceeds the budget;
 *   - the delivery order is identical for identical inputs (whatever the thread count and
 *     I/O engine) and differs for another seed.
 * This file: the checkers can fail, exactly once, batches and END; slots, stats and memory
 * are in test_loader_props_memory.c, the order in test_loader_props_order.c, the cases and
 * runs in support/props_case.h and support/props_run.h.
 * A failing case prints its parameters; rerun it alone with the printed case seed.
 */
#include "hdmlp.h"
#include "support/props_case.h"
#include "support/props_run.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the checkers can fail ----------------------------------------------------------- */

static void fake_run(run_out *r, uint64_t n, const uint64_t *seq, uint64_t len, uint32_t batch)
{
    memset(r, 0, sizeof(*r));
    r->n = n;
    for (uint64_t i = 0; i < len; i++) {
        push_seq(r, seq[i]);
    }
    for (uint64_t e = 0, i = 0; i < len; e++) {
        uint64_t in = 0;
        while (in < n && i < len) {
            uint32_t m = (uint32_t)(n - in < batch ? n - in : batch);
            if (m > len - i) {
                m = (uint32_t)(len - i);
            }
            push_batch(r, m, e);
            in += m;
            i += m;
        }
    }
}

Test(loader_props, checker_flags_duplicates_and_gaps)
{
    char why[256];
    run_out r;
    const uint64_t good[] = {3, 1, 0, 2, 4, 2, 0, 4, 1, 3};
    fake_run(&r, 5, good, 10, 2);
    cr_expect(check_exactly_once(&r, 5, 2, why, sizeof(why)), "good sequence flagged: %s", why);
    cr_expect(check_batches(&r, 2, 0, 2, why, sizeof(why)), "good batches flagged: %s", why);
    cr_expect_not(check_batches(&r, 2, 1, 2, why, sizeof(why)), "short batch not flagged");
    run_free(&r);

    const uint64_t dup[] = {3, 1, 0, 3, 4, 2, 0, 4, 1, 3};
    fake_run(&r, 5, dup, 10, 2);
    cr_expect_not(check_exactly_once(&r, 5, 2, why, sizeof(why)), "duplicate not flagged");
    cr_expect(strstr(why, "twice") != NULL, "%s", why);
    run_free(&r);

    const uint64_t missing[] = {3, 1, 0, 2, 4, 2, 0, 4, 1};
    fake_run(&r, 5, missing, 9, 2);
    cr_expect_not(check_exactly_once(&r, 5, 2, why, sizeof(why)), "gap not flagged");
    run_free(&r);

    const uint64_t out_of_range[] = {3, 1, 0, 5, 4};
    fake_run(&r, 5, out_of_range, 5, 2);
    cr_expect_not(check_exactly_once(&r, 5, 1, why, sizeof(why)), "index >= N not flagged");
    run_free(&r);

    const uint64_t one_epoch[] = {3, 1, 0, 2, 4};
    fake_run(&r, 5, one_epoch, 5, 2);
    cr_expect_not(check_exactly_once(&r, 5, 2, why, sizeof(why)), "lost epoch not flagged");
    run_free(&r);
}

Test(loader_props, view_checker_flags_wrong_bytes_and_labels, .timeout = 30)
{
    lcase c = base_case();
    c.ds.n_samples = 20;
    c.ds.min_size = 8;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
    uint8_t buf[64], scratch[64];
    char why[256];
    const uint64_t i = 7;
    const size_t len = testds_size(&c.ds, i);
    testds_fill(i, c.ds.seed, buf, len);
    hdmlp_sample_view v = {buf, len, i, (uint32_t)(i % c.ds.n_labels), 0};
    cr_expect(view_ok(ds, &c.ds, &v, scratch, why, sizeof(why)), "good view flagged: %s", why);
    buf[len / 2] ^= 1;
    cr_expect_not(view_ok(ds, &c.ds, &v, scratch, why, sizeof(why)), "flipped byte missed");
    buf[len / 2] ^= 1;
    v.label++;
    cr_expect_not(view_ok(ds, &c.ds, &v, scratch, why, sizeof(why)), "wrong label missed");
    v.label--;
    v.index = 8;
    cr_expect_not(view_ok(ds, &c.ds, &v, scratch, why, sizeof(why)), "wrong index missed");
    hdmlp_dataset_close(ds);
}

Test(loader_props, every_epoch_delivers_every_sample_once, .timeout = 240)
{
    const uint64_t seed = 0x5eed0001;
    cr_log_info("exactly-once: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        char dir[512], desc[768], why[256];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: run ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        cr_assert_eq(r.bad_views, 0, "%s: %" PRIu64 " bad views; first: %s", desc, r.bad_views,
                     r.first_bad);
        const uint64_t expect = per_epoch(c.ds.n_samples, c.batch, c.drop_last);
        cr_assert(check_exactly_once(&r, expect, c.epochs, why, sizeof(why)), "%s: %s", desc,
                  why);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, batches_number_epochs_and_end_repeats, .timeout = 240)
{
    const uint64_t seed = 0x5eed0002;
    cr_log_info("batches: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        char dir[512], desc[768], why[256];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        cr_assert(r.end_out_null, "%s: HDMLP_END without *out = NULL", desc);
        cr_assert_eq(r.rc_again, HDMLP_END, "%s: next after END gave %s", desc,
                     hdmlp_err_name(r.rc_again));
        cr_assert(r.again_out_null, "%s: second HDMLP_END without *out = NULL", desc);
        cr_assert(check_batches(&r, c.batch, c.drop_last, c.epochs, why, sizeof(why)), "%s: %s",
                  desc, why);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}
