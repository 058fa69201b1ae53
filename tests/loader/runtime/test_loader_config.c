/*
 * Loader API tests, configuration: each setter's success case beside its failure case, a
 * NULL config refused by every setter, and a failed setter keeping the previous value.
 * Part of the test_loader binary (fixtures: support/loader_fixture.h).
 */
#include "hdmlp.h"
#include "support/loader_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <math.h>

/* ---- config: each setter's success case beside its failure case ----------------------- */

Test(config, create_gives_defaults_and_free_accepts_null)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    cr_assert_not_null(cfg);
    hdmlp_config_free(cfg);
    hdmlp_config_free(NULL);
    hdmlp_loader_free(NULL);
    hdmlp_batch_release(NULL);
}

/* Setter returns E_INVAL and its detail names the parameter. */
#define EXPECT_INVAL(call, word)                                                               \
    do {                                                                                       \
        const int rc_ = (call);                                                                \
        cr_expect_eq(rc_, HDMLP_E_INVAL, "%s gave %s", #call, hdmlp_err_name(rc_));            \
        cr_expect(mentions(hdmlp_last_error(), word), "%s: detail '%s' does not name %s",      \
                  #call, hdmlp_last_error(), word);                                            \
    } while (0)

#define EXPECT_OK(call)                                                                        \
    do {                                                                                       \
        const int rc_ = (call);                                                                \
        cr_expect_eq(rc_, HDMLP_OK, "%s gave %s: %s", #call, hdmlp_err_name(rc_),              \
                     hdmlp_last_error());                                                      \
    } while (0)

Test(config, memory_accepts_4096_and_up_rejects_less)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_memory(cfg, 4096));
    EXPECT_OK(hdmlp_config_set_memory(cfg, UINT64_MAX));
    EXPECT_INVAL(hdmlp_config_set_memory(cfg, 4095), "memory");
    EXPECT_INVAL(hdmlp_config_set_memory(cfg, 0), "memory");
    hdmlp_config_free(cfg);
}

Test(config, batch_size_accepts_1_to_2_20_rejects_outside)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_batch_size(cfg, 1));
    EXPECT_OK(hdmlp_config_set_batch_size(cfg, 1u << 20));
    EXPECT_INVAL(hdmlp_config_set_batch_size(cfg, 0), "batch");
    EXPECT_INVAL(hdmlp_config_set_batch_size(cfg, (1u << 20) + 1), "batch");
    hdmlp_config_free(cfg);
}

Test(config, seed_accepts_any_value_rejects_null_config)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_seed(cfg, 0));
    EXPECT_OK(hdmlp_config_set_seed(cfg, UINT64_MAX));
    EXPECT_INVAL(hdmlp_config_set_seed(NULL, 1), "config");
    hdmlp_config_free(cfg);
}

Test(config, epochs_accepts_zero_for_unbounded_rejects_null_config)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_epochs(cfg, 0));
    EXPECT_OK(hdmlp_config_set_epochs(cfg, 1));
    EXPECT_OK(hdmlp_config_set_epochs(cfg, UINT64_MAX));
    EXPECT_INVAL(hdmlp_config_set_epochs(NULL, 1), "config");
    hdmlp_config_free(cfg);
}

Test(config, drop_last_accepts_0_1_rejects_others)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_drop_last(cfg, 0));
    EXPECT_OK(hdmlp_config_set_drop_last(cfg, 1));
    EXPECT_INVAL(hdmlp_config_set_drop_last(cfg, 2), "drop_last");
    EXPECT_INVAL(hdmlp_config_set_drop_last(cfg, -1), "drop_last");
    hdmlp_config_free(cfg);
}

Test(config, rank_accepts_rank_below_world_rejects_others)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_rank(cfg, 0, 1));
    EXPECT_OK(hdmlp_config_set_rank(cfg, 3, 4));
    EXPECT_INVAL(hdmlp_config_set_rank(cfg, 1, 1), "rank");
    EXPECT_INVAL(hdmlp_config_set_rank(cfg, 0, 0), "world");
    EXPECT_INVAL(hdmlp_config_set_rank(cfg, 5, 3), "rank");
    hdmlp_config_free(cfg);
}

Test(config, threads_accepts_1_to_64_rejects_outside)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_threads(cfg, 1));
    EXPECT_OK(hdmlp_config_set_threads(cfg, 64));
    EXPECT_INVAL(hdmlp_config_set_threads(cfg, 0), "threads");
    EXPECT_INVAL(hdmlp_config_set_threads(cfg, 65), "threads");
    hdmlp_config_free(cfg);
}

Test(config, engine_accepts_known_engines_rejects_others)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_engine(cfg, HDMLP_ENGINE_AUTO));
    EXPECT_OK(hdmlp_config_set_engine(cfg, HDMLP_ENGINE_PREAD));
    EXPECT_OK(hdmlp_config_set_engine(cfg, HDMLP_ENGINE_IO_URING));
    EXPECT_INVAL(hdmlp_config_set_engine(cfg, (hdmlp_engine)3), "engine");
    EXPECT_INVAL(hdmlp_config_set_engine(cfg, (hdmlp_engine)-1), "engine");
    hdmlp_config_free(cfg);
}

Test(config, direct_io_accepts_0_1_auto_rejects_others)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_direct_io(cfg, 0));
    EXPECT_OK(hdmlp_config_set_direct_io(cfg, 1));
    EXPECT_OK(hdmlp_config_set_direct_io(cfg, HDMLP_DIRECT_IO_AUTO));
    EXPECT_INVAL(hdmlp_config_set_direct_io(cfg, 3), "direct");
    EXPECT_INVAL(hdmlp_config_set_direct_io(cfg, -1), "direct");
    hdmlp_config_free(cfg);
}

Test(config, cost_learning_accepts_0_1_rejects_others)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_cost_learning(cfg, 0));
    EXPECT_OK(hdmlp_config_set_cost_learning(cfg, 1));
    EXPECT_INVAL(hdmlp_config_set_cost_learning(cfg, 2), "cost_learning");
    EXPECT_INVAL(hdmlp_config_set_cost_learning(NULL, 1), "");
    hdmlp_config_free(cfg);
}

Test(config, lookahead_accepts_any_count_rejects_null_config)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_lookahead(cfg, 0));
    EXPECT_OK(hdmlp_config_set_lookahead(cfg, 1));
    EXPECT_OK(hdmlp_config_set_lookahead(cfg, UINT64_MAX));
    EXPECT_INVAL(hdmlp_config_set_lookahead(NULL, 1), "config");
    hdmlp_config_free(cfg);
}

Test(config, policy_accepts_auto_fill_rate_random_and_clairvoyant_rejects_others)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_policy(cfg, HDMLP_POLICY_FILL_RATE));
    EXPECT_OK(hdmlp_config_set_policy(cfg, HDMLP_POLICY_RANDOM));
    EXPECT_OK(hdmlp_config_set_policy(cfg, HDMLP_POLICY_CLAIRVOYANT));
    EXPECT_OK(hdmlp_config_set_policy(cfg, HDMLP_POLICY_AUTO));
    EXPECT_INVAL(hdmlp_config_set_policy(cfg, (hdmlp_policy)4), "policy");
    EXPECT_INVAL(hdmlp_config_set_policy(cfg, (hdmlp_policy)-1), "policy");
    hdmlp_config_free(cfg);
}

Test(config, order_and_pool_reads_are_range_checked)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_order(cfg, HDMLP_ORDER_STRICT));
    EXPECT_OK(hdmlp_config_set_order(cfg, HDMLP_ORDER_POOL));
    EXPECT_INVAL(hdmlp_config_set_order(cfg, (hdmlp_order)2), "order");
    EXPECT_INVAL(hdmlp_config_set_order(cfg, (hdmlp_order)-1), "order");
    EXPECT_OK(hdmlp_config_set_pool_reads(cfg, 0));
    EXPECT_OK(hdmlp_config_set_pool_reads(cfg, HDMLP_POOL_READS_MAX));
    EXPECT_INVAL(hdmlp_config_set_pool_reads(cfg, HDMLP_POOL_READS_MAX + 1), "pool_reads");
    EXPECT_INVAL(hdmlp_config_set_order(NULL, HDMLP_ORDER_POOL), "config");
    EXPECT_INVAL(hdmlp_config_set_pool_reads(NULL, 1), "config");
    /* relaxed is the pool order's former name */
    EXPECT_OK(hdmlp_config_set_relaxed(cfg, 1));
    EXPECT_INVAL(hdmlp_config_set_relaxed(cfg, 2), "relaxed");
    hdmlp_config_free(cfg);
}

Test(config, refill_accepts_auto_whole_ranges_rejects_others)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_refill(cfg, HDMLP_REFILL_AUTO));
    EXPECT_OK(hdmlp_config_set_refill(cfg, HDMLP_REFILL_WHOLE));
    EXPECT_OK(hdmlp_config_set_refill(cfg, HDMLP_REFILL_RANGES));
    EXPECT_INVAL(hdmlp_config_set_refill(cfg, (hdmlp_refill)3), "refill");
    EXPECT_INVAL(hdmlp_config_set_refill(cfg, (hdmlp_refill)-1), "refill");
    hdmlp_config_free(cfg);
}

Test(config, storage_cost_accepts_its_range_rejects_outside_and_nan)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_storage_cost(cfg, 0.0, 1.0));
    EXPECT_OK(hdmlp_config_set_storage_cost(cfg, 1e7, 1e12));
    EXPECT_OK(hdmlp_config_set_storage_cost(cfg, 100.0, 1e9));
    EXPECT_INVAL(hdmlp_config_set_storage_cost(cfg, -1.0, 1e9), "op_us");
    EXPECT_INVAL(hdmlp_config_set_storage_cost(cfg, 1.0001e7, 1e9), "op_us");
    EXPECT_INVAL(hdmlp_config_set_storage_cost(cfg, NAN, 1e9), "op_us");
    EXPECT_INVAL(hdmlp_config_set_storage_cost(cfg, 100.0, 0.0), "bandwidth");
    EXPECT_INVAL(hdmlp_config_set_storage_cost(cfg, 100.0, -1e9), "bandwidth");
    EXPECT_INVAL(hdmlp_config_set_storage_cost(cfg, 100.0, NAN), "bandwidth");
    hdmlp_config_free(cfg);
}

Test(config, every_setter_rejects_null_config)
{
    EXPECT_INVAL(hdmlp_config_set_memory(NULL, 1u << 20), "config");
    EXPECT_INVAL(hdmlp_config_set_batch_size(NULL, 1), "config");
    EXPECT_INVAL(hdmlp_config_set_drop_last(NULL, 0), "config");
    EXPECT_INVAL(hdmlp_config_set_rank(NULL, 0, 1), "config");
    EXPECT_INVAL(hdmlp_config_set_threads(NULL, 1), "config");
    EXPECT_INVAL(hdmlp_config_set_engine(NULL, HDMLP_ENGINE_PREAD), "config");
    EXPECT_INVAL(hdmlp_config_set_direct_io(NULL, 0), "config");
    EXPECT_INVAL(hdmlp_config_set_policy(NULL, HDMLP_POLICY_RANDOM), "config");
    EXPECT_INVAL(hdmlp_config_set_refill(NULL, HDMLP_REFILL_WHOLE), "config");
    EXPECT_INVAL(hdmlp_config_set_storage_cost(NULL, 1.0, 1.0), "config");
}

Test(config, failed_setter_keeps_the_previous_value, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_config *cfg = new_config(ROOMY, 5, 1);
    cr_assert_eq(hdmlp_config_set_memory(cfg, 100), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_config_set_batch_size(cfg, 0), HDMLP_E_INVAL);
    hdmlp_loader *ld = new_loader(ds, cfg);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.memory_budget, ROOMY, "budget changed by a failed setter");
    hdmlp_batch *b = NULL;
    cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_OK);
    cr_expect_eq(hdmlp_batch_size(b), 5, "batch size changed by a failed setter");
    hdmlp_batch_release(b);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}
