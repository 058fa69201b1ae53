/* The forecast (metadata-only replay) equals what loaders actually do, field by field. */
#include "hdmlp.h"
#include "loader.h"
#include "support/fakenet.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect_same(const hdmlp_stats *f, const hdmlp_stats *a, const char *what)
{
#define SAME(field)                                                                            \
    cr_expect_eq(f->field, a->field, "%s: " #field " forecast %llu, actual %llu", what,        \
                 (unsigned long long)f->field, (unsigned long long)a->field)
    SAME(samples);
    SAME(batches);
    SAME(epochs);
    SAME(requests);
    SAME(hits);
    SAME(misses);
    SAME(chunk_loads);
    SAME(read_ops);
    SAME(bytes_read);
    SAME(bytes_delivered);
    SAME(stored_bytes_delivered);
    SAME(samples_filled);
    SAME(whole_refills);
    SAME(ranged_refills);
    SAME(abstract_chunks);
    for (int i = 0; i < 11; i++) {
        SAME(fill_hist[i]);
    }
#undef SAME
}

static hdmlp_config *config(hdmlp_dataset *ds, double frac, hdmlp_refill refill, int drop_last)
{
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, (uint64_t)(hdmlp_dataset_raw_bytes(ds) * frac));
    hdmlp_config_set_epochs(cfg, 3);
    hdmlp_config_set_batch_size(cfg, 24);
    hdmlp_config_set_seed(cfg, 1234);
    hdmlp_config_set_refill(cfg, refill);
    hdmlp_config_set_drop_last(cfg, drop_last);
    hdmlp_config_set_threads(cfg, 2);
    /* A fixed cost model: bytes and operations are then exact too (see below for a
     * learning loader). */
    hdmlp_config_set_cost_learning(cfg, 0);
    return cfg;
}

static void run_to_end(hdmlp_loader *ld, hdmlp_stats *st)
{
    hdmlp_batch *b;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        hdmlp_batch_release(b);
    }
    cr_assert_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    hdmlp_loader_stats(ld, st, sizeof *st);
}

/* The single-rank runs' dataset: 4,099 samples, 32 per chunk, in a new directory `dir`. */
static hdmlp_dataset *single_rank_dataset(const char *name, char *dir, size_t cap)
{
    cr_assert_eq(testds_mkdtemp(name, dir, cap), 0);
    const testds_spec spec = {4099, 32, 3, 8, 100, 3000, 1, 0, 7, 0};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK);
    return ds;
}

/* Forecasts cfg (loads, first and epoch_bytes as hdmlp_loader_forecast takes them), runs a
 * loader with it to the end and expects the two to agree field by field; *actual gets the
 * run's stats and *fc the forecast's. */
static void forecast_and_run(hdmlp_dataset *ds, const hdmlp_config *cfg, const char *what,
                             uint64_t *loads, uint64_t *first, uint64_t *epoch_bytes,
                             hdmlp_stats *fc, hdmlp_stats *actual)
{
    cr_assert_eq(hdmlp_loader_forecast(ds, cfg, fc, sizeof *fc, loads, first, epoch_bytes),
                 HDMLP_OK, "%s: %s", what, hdmlp_last_error());
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    run_to_end(ld, actual);
    hdmlp_loader_free(ld);
    expect_same(fc, actual, what);
}

Test(forecast, equals_a_single_rank_run, .timeout = 120)
{
    char dir[512];
    hdmlp_dataset *ds = single_rank_dataset("forecast", dir, sizeof(dir));
    const hdmlp_refill modes[] = {HDMLP_REFILL_AUTO, HDMLP_REFILL_WHOLE, HDMLP_REFILL_RANGES};
    const double fracs[] = {0.1, 0.3, 2.0};
    for (int m = 0; m < 3; m++) {
        for (int f = 0; f < 3; f++) {
            hdmlp_config *cfg = config(ds, fracs[f], modes[m], f == 1);
            hdmlp_stats fc, actual;
            const uint64_t c = hdmlp_dataset_chunk_count(ds);
            uint64_t *loads = calloc(c, sizeof(uint64_t));
            uint64_t *first = calloc(c, sizeof(uint64_t));
            uint64_t epoch_bytes[3];
            char what[64];
            snprintf(what, sizeof(what), "refill %d, memory %.1f", (int)modes[m], fracs[f]);
            forecast_and_run(ds, cfg, what, loads, first, epoch_bytes, &fc, &actual);
            uint64_t sum = 0;
            for (uint64_t i = 0; i < c; i++) {
                sum += loads[i];
                cr_expect_geq(loads[i], 3, "chunk %llu is read at least once per epoch",
                              (unsigned long long)i);
                cr_expect_lt(first[i], 3 * 4099ull);
            }
            cr_expect_eq(sum, actual.chunk_loads);
            cr_expect_eq(epoch_bytes[0] + epoch_bytes[1] + epoch_bytes[2], fc.source_bytes);
            free(loads);
            free(first);
            hdmlp_config_free(cfg);
        }
    }
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

typedef struct rank_run {
    hdmlp_loader *ld;
    hdmlp_stats st;
} rank_run;

static void *consume(void *arg)
{
    rank_run *r = arg;
    run_to_end(r->ld, &r->st);
    hdmlp_loader_free(r->ld);
    return NULL;
}

/* Three ranks over the in-process transport, each against its own forecast. */
static void three_ranks(hdmlp_order order, uint32_t pool_reads, hdmlp_policy policy)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("forecast3", dir, sizeof(dir)), 0);
    const testds_spec spec = {3001, 16, 0, 9, 200, 1500, 0, 0, 4, 0};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK);
    fakenet *hub = NULL;
    fakenet_create(3, &hub);
    const char *peers[3] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
    rank_run runs[3];
    hdmlp_stats fc[3];
    for (uint32_t r = 0; r < 3; r++) {
        hdmlp_config *cfg = config(ds, 0.3, HDMLP_REFILL_AUTO, 0);
        hdmlp_config_set_order(cfg, order);
        hdmlp_config_set_pool_reads(cfg, pool_reads);
        hdmlp_config_set_policy(cfg, policy);
        hdmlp_config_set_rank(cfg, r, 3);
        hdmlp_config_set_peers(cfg, peers, 3);
        cr_assert_eq(hdmlp_loader_forecast(ds, cfg, &fc[r], sizeof fc[r], NULL, NULL, NULL),
                     HDMLP_OK, "%s", hdmlp_last_error());
        cr_assert_eq(loader_create_with(ds, cfg, fakenet_factory, &runs[r].ld), HDMLP_OK);
        hdmlp_config_free(cfg);
    }
    pthread_t th[3];
    for (int r = 0; r < 3; r++) {
        pthread_create(&th[r], NULL, consume, &runs[r]);
    }
    for (int r = 0; r < 3; r++) {
        pthread_join(th[r], NULL);
    }
    for (int r = 0; r < 3; r++) {
        char what[32];
        snprintf(what, sizeof(what), "rank %d", r);
        expect_same(&fc[r], &runs[r].st, what);
    }
    fakenet_free(hub);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(forecast, equals_each_rank_of_a_three_rank_run, .timeout = 120)
{
    three_ranks(HDMLP_ORDER_STRICT, 0, HDMLP_POLICY_FILL_RATE);
}

Test(forecast, equals_each_rank_of_a_three_rank_clairvoyant_run, .timeout = 120)
{
    three_ranks(HDMLP_ORDER_STRICT, 0, HDMLP_POLICY_CLAIRVOYANT);
}

Test(forecast, equals_each_rank_of_a_three_rank_pool_run, .timeout = 120)
{
    three_ranks(HDMLP_ORDER_POOL, 4, HDMLP_POLICY_AUTO);
}

Test(forecast, equals_single_rank_pool_runs, .timeout = 120)
{
    char dir[512];
    hdmlp_dataset *ds = single_rank_dataset("forecastpool", dir, sizeof(dir));
    const uint32_t reads[] = {0, 1, 3, 32};
    const double fracs[] = {0.1, 0.3};
    const uint64_t c = hdmlp_dataset_chunk_count(ds);
    for (int r = 0; r < 4; r++) {
        for (int f = 0; f < 2; f++) {
            hdmlp_config *cfg = config(ds, fracs[f], HDMLP_REFILL_AUTO, f == 1);
            hdmlp_config_set_order(cfg, HDMLP_ORDER_POOL);
            hdmlp_config_set_pool_reads(cfg, reads[r]);
            hdmlp_stats fc, actual;
            uint64_t *loads = calloc(c, sizeof(uint64_t));
            char what[64];
            snprintf(what, sizeof(what), "pool reads %u, memory %.1f", reads[r], fracs[f]);
            forecast_and_run(ds, cfg, what, loads, NULL, NULL, &fc, &actual);
            /* one pass: every chunk's bytes once per epoch, in the same reads each epoch */
            for (uint64_t i = 0; i < c; i++) {
                cr_expect_eq(loads[i] % 3, 0, "%s: chunk %llu read %llu times in 3 epochs",
                             what, (unsigned long long)i, (unsigned long long)loads[i]);
            }
            cr_expect_eq(actual.samples_filled, 3 * 4099ull, "%s", what);
            free(loads);
            hdmlp_config_free(cfg);
        }
    }
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(forecast, equals_single_rank_clairvoyant_runs, .timeout = 120)
{
    char dir[512];
    hdmlp_dataset *ds = single_rank_dataset("forecastcv", dir, sizeof(dir));
    const hdmlp_refill modes[] = {HDMLP_REFILL_AUTO, HDMLP_REFILL_WHOLE, HDMLP_REFILL_RANGES};
    const double fracs[] = {0.1, 0.3};
    for (int m = 0; m < 3; m++) {
        for (int f = 0; f < 2; f++) {
            hdmlp_config *cfg = config(ds, fracs[f], modes[m], f == 1);
            hdmlp_config_set_policy(cfg, HDMLP_POLICY_CLAIRVOYANT);
            hdmlp_stats fc, actual;
            char what[64];
            snprintf(what, sizeof(what), "clairvoyant, refill %d, memory %.1f", (int)modes[m],
                     fracs[f]);
            forecast_and_run(ds, cfg, what, NULL, NULL, NULL, &fc, &actual);
            cr_expect_eq(actual.policy, HDMLP_POLICY_CLAIRVOYANT, "%s", what);
            /* each sample read once per epoch: no sample is held past its turn */
            cr_expect_eq(actual.samples_filled, 3 * 4099ull, "%s", what);
            hdmlp_config_free(cfg);
        }
    }
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(forecast, refuses_unbounded_epochs)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("forecast-inf", dir, sizeof(dir)), 0);
    const testds_spec spec = {100, 4, 0, 1, 10, 20, 0, 0, 1, 0};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK);
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_epochs(cfg, 0);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_forecast(ds, cfg, &st, sizeof st, NULL, NULL, NULL),
                 HDMLP_E_INVAL);
    hdmlp_config_set_epochs(cfg, 1);
    cr_assert_eq(hdmlp_loader_forecast(ds, cfg, &st, sizeof st, NULL, NULL, NULL), HDMLP_OK);
    cr_assert_eq(st.samples, 100);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

/* With cost learning (the default), plans follow the live estimate: the order, loads, hits,
 * misses and fills are still exact; bytes and operations are the forecast's estimate. */
Test(forecast, a_learning_loader_keeps_order_and_loads, .timeout = 120)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("forecast_learn", dir, sizeof(dir)), 0);
    const testds_spec spec = {3001, 32, 3, 8, 100, 3000, 1, 0, 7, 0};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK);
    hdmlp_config *cfg = config(ds, 0.3, HDMLP_REFILL_AUTO, 0);
    hdmlp_config_set_cost_learning(cfg, 1);
    hdmlp_stats fc, actual;
    cr_assert_eq(hdmlp_loader_forecast(ds, cfg, &fc, sizeof fc, NULL, NULL, NULL), HDMLP_OK,
                 "%s", hdmlp_last_error());
    cr_expect_eq(fc.cost_learning, 1);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    run_to_end(ld, &actual);
    hdmlp_loader_free(ld);
    cr_expect_eq(actual.cost_learning, 1);
    cr_expect_gt(actual.cost_reads, 0, "the model learnt from no read");
    cr_expect_eq(actual.cost_reads, actual.chunk_loads, "every refill read teaches it");
    cr_expect_eq(fc.cost_replans, 0, "the forecast plans with one estimate");
    cr_expect_eq(fc.samples, actual.samples);
    cr_expect_eq(fc.requests, actual.requests);
    cr_expect_eq(fc.hits, actual.hits);
    cr_expect_eq(fc.misses, actual.misses);
    cr_expect_eq(fc.chunk_loads, actual.chunk_loads);
    cr_expect_eq(fc.samples_filled, actual.samples_filled);
    for (int i = 0; i < 11; i++) {
        cr_expect_eq(fc.fill_hist[i], actual.fill_hist[i]);
    }
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}
