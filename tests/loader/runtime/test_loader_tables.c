/* Where a miss's sample records come from when a format-2 dataset's tables are not held:
 * planning sums them from the tables' block offsets where the budget keeps those, else the
 * I/O thread that serves the job reads them; with the tables held, from memory. Every way,
 * every sample arrives once an epoch with its bytes and label. */
#include "hdmlp.h"
#include "support/loader_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>

/* 20,000 samples of 1-16 bytes, 8 a chunk: tables of 640 KB, block offsets of 12.5 KB (one
 * 4-byte offset and a state byte a chunk), so the three budgets below hold the tables
 * (16 MiB), keep only the block offsets (1 MiB) or neither (100 KB, whose sixteenth is
 * smaller than the block offsets). */
static testds_spec tiny_spec(void)
{
    testds_spec s = small_spec();
    s.n_samples = 20000;
    s.chunk_size = 8;
    s.chunks_per_segment = 0;
    s.seed = 77;
    s.min_size = 1;
    s.max_size = 16;
    s.n_labels = 5;
    s.version = 2;
    return s;
}

/* Drains ld, checking each sample's bytes and label and that each arrives once an epoch. */
static void drain_checked(hdmlp_dataset *ds, const testds_spec *spec, hdmlp_loader *ld,
                          uint64_t epochs)
{
    uint8_t *seen = calloc(spec->n_samples * epochs, 1);
    cr_assert_not_null(seen);
    uint64_t total = 0;
    hdmlp_batch *b = NULL;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const uint64_t epoch = hdmlp_batch_epoch(b);
        const hdmlp_sample_view *views = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const hdmlp_sample_view *v = &views[i];
            expect_view(ds, spec, v);
            cr_assert_lt(epoch, epochs);
            uint8_t *at = &seen[epoch * spec->n_samples + v->index];
            cr_assert_eq(*at, 0, "sample %" PRIu64 " twice in epoch %" PRIu64, v->index, epoch);
            *at = 1;
            total++;
        }
        hdmlp_batch_release(b);
    }
    cr_assert_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_eq(total, spec->n_samples * epochs);
    free(seen);
}

/* Chunks of 100 samples (4 blocks of FMT_TABLE_BLOCK) at 1 MiB: planning sums records from
 * block offsets past a chunk's first block. */
Test(loader_tables, records_from_later_blocks, .timeout = 120)
{
    testds_spec spec = tiny_spec();
    spec.chunk_size = 100;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_config *cfg = new_config(1u << 20, 16, 2);
    hdmlp_loader *ld = new_loader(ds, cfg);
    drain_checked(ds, &spec, ld, 2);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(loader_tables, records_from_blocks_io_threads_or_held_tables, .timeout = 120)
{
    const testds_spec spec = tiny_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    const uint64_t tables = 16 + spec.n_samples * 2 * 16;
    const uint64_t budgets[] = {100000, 1u << 20, 16u << 20};
    for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++) {
        hdmlp_config *cfg = new_config(budgets[i], 16, 2);
        cr_assert_eq(hdmlp_config_set_threads(cfg, 3), HDMLP_OK);
        hdmlp_loader *ld = new_loader(ds, cfg);
        hdmlp_stats st;
        cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
        /* Held: the tables and the offsets; else a table cache and (1 MiB) the offsets, all
         * within a sixteenth of the budget each. */
        if (i == 2) {
            cr_expect_gt(st.budget_sample_tables, tables, "held: %" PRIu64,
                         st.budget_sample_tables);
        } else {
            cr_expect_leq(st.budget_sample_tables, 2 * (budgets[i] / 16), "%" PRIu64,
                          st.budget_sample_tables);
        }
        drain_checked(ds, &spec, ld, 2);
        hdmlp_loader_free(ld);
    }
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}
