/*
 * Loader API tests: loader creation and budget sizing, the engines, next/END/epochs and
 * drop_last. The rest of the test_loader binary: configuration setters
 * (test_loader_config.c), batch ownership and stats across threads (test_loader_batches.c),
 * errors (test_loader_errors.c), timeouts and interrupts (test_loader_wait.c); fixtures in
 * support/loader_fixture.h.
 */
#include "hdmlp.h"
#include "support/loader_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- loader creation ------------------------------------------------------------------- */

Test(loader_api, create_rejects_null_arguments, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_config *cfg = new_config(ROOMY, 8, 1);
    hdmlp_loader *ld = (hdmlp_loader *)cfg; /* any non-NULL value: must be reset */
    cr_expect_eq(hdmlp_loader_create(NULL, cfg, &ld), HDMLP_E_INVAL);
    cr_expect_null(ld, "*out not NULL after a failed create");
    ld = (hdmlp_loader *)cfg;
    cr_expect_eq(hdmlp_loader_create(ds, NULL, &ld), HDMLP_E_INVAL);
    cr_expect_null(ld, "*out not NULL after a failed create");
    cr_expect_eq(hdmlp_loader_create(ds, cfg, NULL), HDMLP_E_INVAL);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

static int create_with_budget(hdmlp_dataset *ds, uint64_t budget, hdmlp_loader **ld)
{
    hdmlp_config *cfg = new_config(budget, 8, 1);
    const int rc = hdmlp_loader_create(ds, cfg, ld);
    hdmlp_config_free(cfg);
    return rc;
}

/* Bisects the smallest budget create accepts (OK at the result, E_RANGE one byte below). */
static uint64_t find_min_budget(hdmlp_dataset *ds)
{
    uint64_t lo = 4095, hi = 4096;
    hdmlp_loader *ld = NULL;
    int rc;
    while ((rc = create_with_budget(ds, hi, &ld)) != HDMLP_OK) {
        cr_assert_eq(rc, HDMLP_E_RANGE, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
        cr_assert(hi < (1ull << 40));
        lo = hi;
        hi *= 2;
    }
    hdmlp_loader_free(ld);
    while (hi - lo > 1) {
        const uint64_t mid = lo + (hi - lo) / 2;
        rc = create_with_budget(ds, mid, &ld);
        if (rc == HDMLP_OK) {
            hdmlp_loader_free(ld);
            hi = mid;
        } else {
            cr_assert_eq(rc, HDMLP_E_RANGE, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
            lo = mid;
        }
    }
    return hi;
}

Test(loader_api, budget_below_minimum_is_range_error_naming_it, .timeout = 60)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    const uint64_t min = find_min_budget(ds);
    cr_log_info("smallest accepted budget: %" PRIu64 " bytes", min);
    cr_assert_gt(min, 4096, "a 4 KiB budget cannot hold a chunk of this dataset");
    hdmlp_loader *ld = (hdmlp_loader *)ds;
    cr_assert_eq(create_with_budget(ds, min - 1, &ld), HDMLP_E_RANGE);
    cr_expect_null(ld);
    char num[32];
    snprintf(num, sizeof(num), "%" PRIu64, min);
    cr_expect(strstr(hdmlp_last_error(), num) != NULL,
              "detail '%s' does not name the minimum %s", hdmlp_last_error(), num);
    /* and proposes it, also as a share of the data */
    char share[64];
    snprintf(share, sizeof(share), "a budget of %" PRIu64 " bytes (", min);
    cr_expect(strstr(hdmlp_last_error(), share) != NULL &&
                  strstr(hdmlp_last_error(), "%") != NULL,
              "detail '%s' does not propose the budget that works", hdmlp_last_error());
    cr_assert_eq(create_with_budget(ds, min, &ld), HDMLP_OK);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.abstract_chunks, 1,
                 "the smallest budget holds one abstract chunk, got %" PRIu64,
                 st.abstract_chunks);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, budget_beyond_dataset_gives_one_abstract_chunk_per_chunk, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = NULL;
    cr_assert_eq(create_with_budget(ds, ROOMY, &ld), HDMLP_OK);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.abstract_chunks, hdmlp_dataset_chunk_count(ds));
    cr_expect_eq(st.chunk_groups, st.abstract_chunks);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, stats_before_first_batch_are_zero, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = NULL;
    cr_assert_eq(create_with_budget(ds, ROOMY, &ld), HDMLP_OK);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.samples, 0);
    cr_expect_eq(st.batches, 0);
    cr_expect_eq(st.epochs, 0);
    cr_expect_eq(st.bytes_delivered, 0);
    cr_expect_eq(st.memory_budget, ROOMY);
    cr_expect_eq(hdmlp_loader_stats(NULL, &st, sizeof st), HDMLP_E_INVAL);
    cr_expect_eq(hdmlp_loader_stats(ld, NULL, sizeof st), HDMLP_E_INVAL);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, io_uring_engine_works_or_is_unsupported, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_config *cfg = new_config(ROOMY, 16, 1);
    cr_assert_eq(hdmlp_config_set_engine(cfg, HDMLP_ENGINE_IO_URING), HDMLP_OK);
    hdmlp_loader *ld = NULL;
    const int rc = hdmlp_loader_create(ds, cfg, &ld);
    hdmlp_config_free(cfg);
    if (rc == HDMLP_E_UNSUPPORTED) {
        cr_assert_null(ld);
        hdmlp_dataset_close(ds);
        cr_skip_test("io_uring unsupported: %s", hdmlp_last_error());
    }
    cr_assert_eq(rc, HDMLP_OK, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    hdmlp_batch *b = NULL;
    uint64_t n = 0;
    while (hdmlp_loader_next(ld, &b) == HDMLP_OK) {
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            expect_view(ds, &spec, &hdmlp_batch_samples(b)[i]);
        }
        n += hdmlp_batch_size(b);
        hdmlp_batch_release(b);
    }
    cr_expect_eq(n, spec.n_samples);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, direct_io_delivers_the_right_bytes, .timeout = 30)
{
    const hdmlp_refill modes[] = {HDMLP_REFILL_WHOLE, HDMLP_REFILL_RANGES};
    testds_spec spec = small_spec();
    spec.chunks_per_segment = 4;
    spec.compress = 1;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    for (int m = 0; m < 2; m++) {
        hdmlp_config *cfg = new_config(ROOMY, 16, 1);
        cr_assert_eq(hdmlp_config_set_direct_io(cfg, 1), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_refill(cfg, modes[m]), HDMLP_OK);
        hdmlp_loader *ld = new_loader(ds, cfg);
        hdmlp_batch *b = NULL;
        uint64_t n = 0;
        int rc;
        while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
            for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
                expect_view(ds, &spec, &hdmlp_batch_samples(b)[i]);
            }
            n += hdmlp_batch_size(b);
            hdmlp_batch_release(b);
        }
        cr_expect_eq(rc, HDMLP_END, "refill %d: %s: %s", m, hdmlp_err_name(rc),
                     hdmlp_last_error());
        cr_expect_eq(n, spec.n_samples, "refill %d", m);
        hdmlp_loader_free(ld);
    }
    hdmlp_dataset_close(ds);
}

/* ---- next, END, epochs, drop_last -------------------------------------------------------- */

Test(loader_api, next_rejects_null_arguments, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 8, 1));
    hdmlp_batch *b = (hdmlp_batch *)ds;
    cr_expect_eq(hdmlp_loader_next(NULL, &b), HDMLP_E_INVAL);
    cr_expect_eq(hdmlp_loader_next(ld, NULL), HDMLP_E_INVAL);
    /* The loader still works after the rejected calls. */
    cr_expect_eq(hdmlp_loader_next(ld, &b), HDMLP_OK);
    hdmlp_batch_release(b);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

/* Batch sizes and epochs of a whole run, and the status that ended it. */
static int run_sizes(hdmlp_loader *ld, size_t *sizes, uint64_t *epochs, size_t cap, size_t *n)
{
    *n = 0;
    for (;;) {
        hdmlp_batch *b = (hdmlp_batch *)ld;
        const int rc = hdmlp_loader_next(ld, &b);
        if (rc != HDMLP_OK) {
            cr_expect_null(b, "*out not NULL with %s", hdmlp_err_name(rc));
            return rc;
        }
        cr_assert_lt(*n, cap, "more batches than expected");
        sizes[*n] = hdmlp_batch_size(b);
        epochs[*n] = hdmlp_batch_epoch(b);
        (*n)++;
        hdmlp_batch_release(b);
    }
}

Test(loader_api, end_after_last_epoch_and_on_every_further_call, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 50, 3));
    size_t sizes[32], n;
    uint64_t epochs[32];
    cr_assert_eq(run_sizes(ld, sizes, epochs, 32, &n), HDMLP_END);
    cr_expect_eq(n, 12);
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(epochs[i], i / 4, "batch %zu in epoch %" PRIu64, i, epochs[i]);
    }
    for (int i = 0; i < 3; i++) {
        hdmlp_batch *b = (hdmlp_batch *)ds;
        cr_expect_eq(hdmlp_loader_next(ld, &b), HDMLP_END);
        cr_expect_null(b);
    }
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.epochs, 3);
    cr_expect_eq(st.samples, 600);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, short_last_batch_kept_without_drop_last, .timeout = 30)
{
    testds_spec spec = small_spec();
    spec.n_samples = 10;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 4, 2));
    size_t sizes[16], n;
    uint64_t epochs[16];
    cr_assert_eq(run_sizes(ld, sizes, epochs, 16, &n), HDMLP_END);
    const size_t want[] = {4, 4, 2, 4, 4, 2};
    cr_assert_eq(n, 6);
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(sizes[i], want[i], "batch %zu: %zu samples", i, sizes[i]);
        cr_expect_eq(epochs[i], i / 3);
    }
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, short_last_batch_dropped_with_drop_last, .timeout = 30)
{
    testds_spec spec = small_spec();
    spec.n_samples = 10;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_config *cfg = new_config(ROOMY, 4, 2);
    cr_assert_eq(hdmlp_config_set_drop_last(cfg, 1), HDMLP_OK);
    hdmlp_loader *ld = new_loader(ds, cfg);
    size_t sizes[16], n;
    uint64_t epochs[16];
    cr_assert_eq(run_sizes(ld, sizes, epochs, 16, &n), HDMLP_END);
    cr_assert_eq(n, 4);
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(sizes[i], 4, "batch %zu: %zu samples", i, sizes[i]);
        cr_expect_eq(epochs[i], i / 2);
    }
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.samples, 16);
    cr_expect_eq(st.epochs, 2);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, drop_last_with_batch_above_dataset_ends_at_once, .timeout = 30)
{
    testds_spec spec = small_spec();
    spec.n_samples = 3;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_config *cfg = new_config(ROOMY, 4, 2);
    cr_assert_eq(hdmlp_config_set_drop_last(cfg, 1), HDMLP_OK);
    hdmlp_loader *ld = new_loader(ds, cfg);
    size_t sizes[4], n;
    uint64_t epochs[4];
    cr_expect_eq(run_sizes(ld, sizes, epochs, 4, &n), HDMLP_END);
    cr_expect_eq(n, 0);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, unbounded_epochs_run_until_freed, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 30, 0));
    uint64_t delivered = 0, last_epoch = 0;
    hdmlp_batch *held = NULL;
    while (delivered < 5 * spec.n_samples + 90) {
        hdmlp_batch *b = NULL;
        cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_OK, "%s", hdmlp_last_error());
        const uint64_t e = hdmlp_batch_epoch(b);
        cr_assert(e == last_epoch || e == last_epoch + 1, "epoch jumped to %" PRIu64, e);
        last_epoch = e;
        delivered += hdmlp_batch_size(b);
        hdmlp_batch_release(held);
        held = b;
    }
    cr_expect_eq(last_epoch, 5);
    /* Free mid-epoch with a batch still held and refills possibly in flight. */
    hdmlp_loader_free(ld);
    for (size_t i = 0; i < hdmlp_batch_size(held); i++) {
        expect_view(ds, &spec, &hdmlp_batch_samples(held)[i]);
    }
    hdmlp_batch_release(held);
    hdmlp_dataset_close(ds);
}
