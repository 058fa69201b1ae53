/*
 * Loader property tests, memory (see test_loader_props.c): every abstract-memory slot is
 * empty after the last epoch and between epochs, the stats add up, the peak accounted
 * memory never exceeds the budget, and holding one batch still progresses at the smallest
 * budget. A failing case prints its parameters; rerun it alone with the printed case seed.
 */
#include "hdmlp.h"
#include "support/props_case.h"
#include "support/props_run.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>

Test(loader_props, slots_empty_after_last_epoch, .timeout = 240)
{
    const uint64_t seed = 0x5eed0003;
    cr_log_info("slots after END: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        cr_assert_eq(r.slots_end, 0, "%s: %" PRIu64 " slots still valid after HDMLP_END", desc,
                     r.slots_end);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, slots_empty_between_epochs, .timeout = 240)
{
    /* The slot hook reports the scheduler's state at its planning frontier. With lookahead
     * 1, once an epoch's last batch is out the scheduler has decided at most one request of
     * the next epoch. If every slot was empty at the epoch's end, that request is a miss
     * that fills at most K - 1 other slots, so the hook reads at most K - 1 (0 for K = 1);
     * a slot left over from the finished epoch pushes it higher (or makes the scheduler
     * fail the next epoch with HDMLP_E_STATE). The exact "0 slots" check is after
     * HDMLP_END (slots_empty_after_last_epoch), where nothing more is planned.
     * drop_last is off so each epoch's last batch is delivered. */
    const uint64_t seed = 0x5eed0004;
    cr_log_info("slots between epochs: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        c.lookahead = 1;
        c.drop_last = 0;
        if (c.epochs < 2 && c.ds.n_samples * 2 <= MAX_DELIVERED) {
            c.epochs = 2;
        }
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 1, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        cr_assert_eq(r.slot_checks, c.epochs, "%s: %" PRIu64 " epoch ends seen", desc,
                     r.slot_checks);
        cr_assert_leq(r.ahead_boundary, 1,
                      "%s: %" PRIu64 " requests planned ahead with lookahead 1", desc,
                      r.ahead_boundary);
        cr_assert_leq(r.slots_boundary, c.ds.chunk_size - 1,
                      "%s: %" PRIu64 " slots valid after an epoch's last batch: more than one "
                      "refill of the next epoch holds",
                      desc, r.slots_boundary);
        cr_assert_eq(r.slots_end, 0, "%s: %" PRIu64 " slots valid after HDMLP_END", desc,
                     r.slots_end);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, stats_add_up, .timeout = 240)
{
    const uint64_t seed = 0x5eed0005;
    cr_log_info("stats: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        const hdmlp_stats *s = &r.st;
        const uint64_t n = c.ds.n_samples;
        const uint64_t chunks = hdmlp_dataset_chunk_count(ds);
        cr_expect_eq(s->samples, r.n_seq, "%s: samples %" PRIu64 " != delivered %" PRIu64, desc,
                     s->samples, r.n_seq);
        cr_expect_eq(s->batches, r.n_batches, "%s: batches %" PRIu64 " != %" PRIu64, desc,
                     s->batches, r.n_batches);
        cr_expect_eq(s->epochs, c.epochs, "%s: epochs %" PRIu64, desc, s->epochs);
        /* Dropped remainders are still requested: every sample is requested every epoch. */
        cr_expect_eq(s->requests, n * c.epochs, "%s: requests %" PRIu64 " != N x epochs", desc,
                     s->requests);
        cr_expect_eq(s->hits + s->misses, s->requests,
                     "%s: hits %" PRIu64 " + misses %" PRIu64 " != requests %" PRIu64, desc,
                     s->hits, s->misses, s->requests);
        cr_expect_eq(s->samples_filled, n * c.epochs,
                     "%s: samples_filled %" PRIu64 " != N x epochs (each filled once)", desc,
                     s->samples_filled);
        cr_expect_eq(s->bytes_delivered, r.bytes_delivered,
                     "%s: bytes_delivered %" PRIu64 " != sum of view sizes %" PRIu64, desc,
                     s->bytes_delivered, r.bytes_delivered);
        cr_expect_eq(s->stored_bytes_delivered, r.stored_delivered,
                     "%s: stored_bytes_delivered %" PRIu64 " != %" PRIu64, desc,
                     s->stored_bytes_delivered, r.stored_delivered);
        cr_expect_geq(s->chunk_loads, chunks * c.epochs,
                      "%s: chunk_loads %" PRIu64 " < chunks %" PRIu64 " x epochs", desc,
                      s->chunk_loads, chunks);
        cr_expect_eq(s->whole_refills + s->ranged_refills, s->chunk_loads,
                     "%s: whole %" PRIu64 " + ranged %" PRIu64 " != loads %" PRIu64, desc,
                     s->whole_refills, s->ranged_refills, s->chunk_loads);
        if (c.refill == HDMLP_REFILL_WHOLE) {
            cr_expect_eq(s->ranged_refills, 0, "%s: ranged refills in whole mode", desc);
        }
        if (c.refill == HDMLP_REFILL_RANGES) {
            cr_expect_eq(s->whole_refills, 0, "%s: whole refills in ranges mode", desc);
        }
        uint64_t hist = 0;
        for (int j = 0; j < 11; j++) {
            hist += s->fill_hist[j];
        }
        cr_expect_eq(hist, s->chunk_loads, "%s: fill_hist sums to %" PRIu64 ", loads %" PRIu64,
                     desc, hist, s->chunk_loads);
        cr_expect_geq(s->read_ops, s->chunk_loads, "%s: read_ops %" PRIu64 " < loads", desc,
                      s->read_ops);
        cr_expect_geq(s->bytes_read, s->stored_bytes_delivered,
                      "%s: bytes_read %" PRIu64 " < stored bytes delivered", desc,
                      s->bytes_read);
        cr_expect_eq(s->memory_budget, budget, "%s: memory_budget %" PRIu64, desc,
                     s->memory_budget);
        cr_expect(s->abstract_chunks >= 1 && s->abstract_chunks <= chunks,
                  "%s: A = %" PRIu64 " outside 1..%" PRIu64, desc, s->abstract_chunks, chunks);
        cr_expect_eq(s->chunk_groups, s->abstract_chunks, "%s: groups != A", desc);
        if (c.budget_kind == 2) {
            cr_expect_eq(s->abstract_chunks, chunks,
                         "%s: budget beyond the dataset but A = %" PRIu64, desc,
                         s->abstract_chunks);
        }
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, peak_memory_within_budget, .timeout = 240)
{
    const uint64_t seed = 0x5eed0006;
    cr_log_info("budget: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        /* Bias towards tight budgets, where the bound bites. */
        if (i % 2 == 0) {
            c.budget_kind = 0;
        }
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        if (r.st.bytes_read > 0) {
            cr_assert_gt(r.st.peak_memory_bytes, 0,
                         "%s: %" PRIu64 " bytes read, none accounted", desc, r.st.bytes_read);
        }
        cr_assert_leq(r.st.peak_memory_bytes, budget, "%s: peak %" PRIu64 " > budget %" PRIu64,
                      desc, r.st.peak_memory_bytes, budget);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, holding_one_batch_progresses_at_smallest_budget, .timeout = 240)
{
    /* A training loop keeps the batch it works on while asking for the next. At the
     * smallest budget the loader accepts, that must still run to the end (no HDMLP_E_NOMEM,
     * no hang) within the budget. */
    const uint64_t seed = 0x5eed0009;
    cr_log_info("hold one batch: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        c.budget_kind = 0;
        c.hold_prev = 1;
        char dir[512], desc[768], why[256];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: holding one batch: %s: %s", desc,
                     hdmlp_err_name(r.rc), r.rc_detail);
        cr_assert_eq(r.bad_views, 0, "%s: %s", desc, r.first_bad);
        const uint64_t expect = per_epoch(c.ds.n_samples, c.batch, c.drop_last);
        cr_assert(check_exactly_once(&r, expect, c.epochs, why, sizeof(why)), "%s: %s", desc,
                  why);
        cr_assert_leq(r.st.peak_memory_bytes, budget, "%s: peak %" PRIu64, desc,
                      r.st.peak_memory_bytes);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}
