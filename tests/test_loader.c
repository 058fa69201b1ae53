/*
 * Loader API tests: configuration setters (each success case beside its failure case),
 * loader creation and budget sizing, next/END/drop_last behaviour, batch ownership
 * (batches outliving the loader, release from any thread), stats access, and errors
 * (corrupt chunks, a segment deleted after open, batches held past the budget).
 */
#include "hdmlp.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers --------------------------------------------------------------------------- */

#define MAX_DIRS 16
static char tmp_dirs[MAX_DIRS][512];
static int n_tmp_dirs;

static void remove_tmp_dirs(void)
{
    for (int i = 0; i < n_tmp_dirs; i++) {
        testds_rm_rf(tmp_dirs[i]);
    }
    n_tmp_dirs = 0;
}

TestSuite(config, .fini = remove_tmp_dirs);
TestSuite(loader_api, .fini = remove_tmp_dirs);
TestSuite(loader_errors, .fini = remove_tmp_dirs);

/* A small default dataset: 200 samples of 8..100 bytes, K = 10, one chunk per segment
 * file (so chunk c is the only chunk of segment-%06u c, at offset 0). */
static testds_spec small_spec(void)
{
    testds_spec s;
    memset(&s, 0, sizeof(s));
    s.n_samples = 200;
    s.chunk_size = 10;
    s.chunks_per_segment = 1;
    s.seed = 42;
    s.min_size = 8;
    s.max_size = 100;
    s.n_labels = 3;
    return s;
}

static hdmlp_dataset *make_dataset(const testds_spec *spec, char *dir, size_t cap)
{
    cr_assert(n_tmp_dirs < MAX_DIRS);
    cr_assert_eq(testds_mkdtemp("loader-api", dir, cap), 0, "mkdtemp failed");
    snprintf(tmp_dirs[n_tmp_dirs++], sizeof(tmp_dirs[0]), "%s", dir);
    int rc = testds_write(dir, spec);
    cr_assert_eq(rc, HDMLP_OK, "testds_write: %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    rc = hdmlp_dataset_open(dir, &ds);
    cr_assert_eq(rc, HDMLP_OK, "open: %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    return ds;
}

static hdmlp_config *new_config(uint64_t memory, uint32_t batch, uint64_t epochs)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    cr_assert_not_null(cfg);
    cr_assert_eq(hdmlp_config_set_memory(cfg, memory), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_batch_size(cfg, batch), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_epochs(cfg, epochs), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_seed(cfg, 7), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_engine(cfg, HDMLP_ENGINE_PREAD), HDMLP_OK);
    return cfg;
}

static hdmlp_loader *new_loader(hdmlp_dataset *ds, hdmlp_config *cfg)
{
    hdmlp_loader *ld = NULL;
    const int rc = hdmlp_loader_create(ds, cfg, &ld);
    cr_assert_eq(rc, HDMLP_OK, "create: %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_not_null(ld);
    hdmlp_config_free(cfg);
    return ld;
}

/* Whether msg (case-insensitively) contains word. */
static int mentions(const char *msg, const char *word)
{
    const size_t n = strlen(word);
    for (const char *p = msg; *p != '\0'; p++) {
        if (strncasecmp(p, word, n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Whether msg contains "<word> <number>" with nothing but a non-digit after the number. */
static int mentions_number(const char *msg, const char *word, uint64_t number)
{
    char pat[96];
    snprintf(pat, sizeof(pat), "%s %" PRIu64, word, number);
    const size_t n = strlen(pat);
    for (const char *p = strstr(msg, pat); p != NULL; p = strstr(p + 1, pat)) {
        if (!isdigit((unsigned char)p[n])) {
            return 1;
        }
    }
    return 0;
}

/* Checks a view's size, label and bytes against the dataset and testds_fill. */
static void expect_view(hdmlp_dataset *ds, const testds_spec *spec, const hdmlp_sample_view *v)
{
    hdmlp_sample_info info;
    cr_assert_lt(v->index, spec->n_samples, "index %" PRIu64 " out of range", v->index);
    cr_assert_eq(hdmlp_dataset_sample_info(ds, v->index, &info), HDMLP_OK);
    cr_assert_eq(v->size, info.raw_size, "sample %" PRIu64 ": size", v->index);
    cr_assert_eq(v->label, info.label, "sample %" PRIu64 ": label", v->index);
    uint8_t *want = malloc(v->size + 1);
    cr_assert_not_null(want);
    testds_fill(v->index, spec->seed, want, v->size);
    cr_assert(v->size == 0 || memcmp(v->data, want, v->size) == 0,
              "sample %" PRIu64 ": bytes differ", v->index);
    free(want);
}

/* A budget comfortably above the minimum for these small datasets. */
#define ROOMY (16u << 20)

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

Test(config, policy_accepts_fill_rate_and_random_rejects_others)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    EXPECT_OK(hdmlp_config_set_policy(cfg, HDMLP_POLICY_FILL_RATE));
    EXPECT_OK(hdmlp_config_set_policy(cfg, HDMLP_POLICY_RANDOM));
    EXPECT_INVAL(hdmlp_config_set_policy(cfg, (hdmlp_policy)2), "policy");
    EXPECT_INVAL(hdmlp_config_set_policy(cfg, (hdmlp_policy)-1), "policy");
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
    cr_assert_eq(hdmlp_loader_stats(ld, &st), HDMLP_OK);
    cr_expect_eq(st.memory_budget, ROOMY, "budget changed by a failed setter");
    hdmlp_batch *b = NULL;
    cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_OK);
    cr_expect_eq(hdmlp_batch_size(b), 5, "batch size changed by a failed setter");
    hdmlp_batch_release(b);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

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
    cr_assert_eq(create_with_budget(ds, min, &ld), HDMLP_OK);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st), HDMLP_OK);
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
    cr_assert_eq(hdmlp_loader_stats(ld, &st), HDMLP_OK);
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
    cr_assert_eq(hdmlp_loader_stats(ld, &st), HDMLP_OK);
    cr_expect_eq(st.samples, 0);
    cr_expect_eq(st.batches, 0);
    cr_expect_eq(st.epochs, 0);
    cr_expect_eq(st.bytes_delivered, 0);
    cr_expect_eq(st.memory_budget, ROOMY);
    cr_expect_eq(hdmlp_loader_stats(NULL, &st), HDMLP_E_INVAL);
    cr_expect_eq(hdmlp_loader_stats(ld, NULL), HDMLP_E_INVAL);
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
    cr_assert_eq(hdmlp_loader_stats(ld, &st), HDMLP_OK);
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
    cr_assert_eq(hdmlp_loader_stats(ld, &st), HDMLP_OK);
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

/* ---- batch ownership ----------------------------------------------------------------------
 */

Test(loader_api, batches_outlive_loader_free, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 16, 2));
    hdmlp_batch *held[3];
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hdmlp_loader_next(ld, &held[i]), HDMLP_OK, "%s", hdmlp_last_error());
    }
    hdmlp_loader_free(ld);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hdmlp_batch_size(held[i]), 16);
        cr_assert_eq(hdmlp_batch_epoch(held[i]), 0);
        for (size_t j = 0; j < 16; j++) {
            expect_view(ds, &spec, &hdmlp_batch_samples(held[i])[j]);
        }
    }
    hdmlp_batch_release(held[1]);
    hdmlp_batch_release(held[0]);
    hdmlp_batch_release(held[2]);
    hdmlp_dataset_close(ds);
}

/* A releaser thread fed through a small queue. */
typedef struct release_queue {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    hdmlp_batch *items[8];
    int head, count, done;
} release_queue;

static void *releaser(void *arg)
{
    release_queue *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (q->count == 0 && !q->done) {
            pthread_cond_wait(&q->cv, &q->lock);
        }
        if (q->count == 0) {
            break;
        }
        hdmlp_batch *b = q->items[q->head];
        q->head = (q->head + 1) % 8;
        q->count--;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->lock);
        hdmlp_batch_release(b);
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

Test(loader_api, batches_released_from_another_thread, .timeout = 60)
{
    testds_spec spec = small_spec();
    spec.n_samples = 2000;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 10, 2));
    release_queue q = {.head = 0, .count = 0, .done = 0};
    pthread_mutex_init(&q.lock, NULL);
    pthread_cond_init(&q.cv, NULL);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, releaser, &q), 0);
    uint8_t *seen = calloc(spec.n_samples, 1);
    uint64_t n = 0;
    hdmlp_batch *b = NULL;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            expect_view(ds, &spec, &v[i]);
            seen[v[i].index]++;
        }
        n += hdmlp_batch_size(b);
        pthread_mutex_lock(&q.lock);
        while (q.count == 8) {
            pthread_cond_wait(&q.cv, &q.lock);
        }
        q.items[(q.head + q.count) % 8] = b;
        q.count++;
        pthread_cond_broadcast(&q.cv);
        pthread_mutex_unlock(&q.lock);
    }
    pthread_mutex_lock(&q.lock);
    q.done = 1;
    pthread_cond_broadcast(&q.cv);
    pthread_mutex_unlock(&q.lock);
    pthread_join(t, NULL);
    cr_expect_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_eq(n, 2 * spec.n_samples);
    for (uint64_t i = 0; i < spec.n_samples; i++) {
        cr_expect_eq(seen[i], 2, "sample %" PRIu64 " delivered %u times in 2 epochs", i,
                     seen[i]);
    }
    free(seen);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

typedef struct stats_poller {
    hdmlp_loader *ld;
    pthread_mutex_t lock; /* guards stop */
    int stop;
    uint64_t polls;
    int regressed;
} stats_poller;

static void *poll_stats(void *arg)
{
    stats_poller *p = arg;
    uint64_t last = 0;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        const int stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        if (stop) {
            break;
        }
        hdmlp_stats st;
        if (hdmlp_loader_stats(p->ld, &st) == HDMLP_OK) {
            if (st.samples < last || st.peak_memory_bytes > st.memory_budget) {
                p->regressed = 1;
            }
            last = st.samples;
        }
        p->polls++;
        sched_yield();
    }
    return NULL;
}

Test(loader_api, stats_readable_from_another_thread_while_iterating, .timeout = 60)
{
    testds_spec spec = small_spec();
    spec.n_samples = 3000;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(1u << 17, 10, 2));
    stats_poller p = {.ld = ld, .stop = 0, .polls = 0, .regressed = 0};
    pthread_mutex_init(&p.lock, NULL);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, poll_stats, &p), 0);
    hdmlp_batch *b = NULL;
    int rc;
    uint64_t n = 0;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        n += hdmlp_batch_size(b);
        hdmlp_batch_release(b);
    }
    pthread_mutex_lock(&p.lock);
    p.stop = 1;
    pthread_mutex_unlock(&p.lock);
    pthread_join(t, NULL);
    cr_expect_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_eq(n, 2 * spec.n_samples);
    cr_expect_gt(p.polls, 0);
    cr_expect_not(p.regressed, "samples went backwards or peak exceeded the budget");
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, holding_every_batch_reports_nomem_then_resumes, .timeout = 60)
{
    /* A consumer that never releases cannot be served within a tight budget: next must
     * report the exhausted budget instead of hanging, and resume once batches return. */
    testds_spec spec = small_spec();
    spec.n_samples = 2000; /* ~108 KB of samples */
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(1u << 16, 10, 1));
    hdmlp_batch **held = calloc(spec.n_samples, sizeof(*held));
    uint8_t *seen = calloc(spec.n_samples, 1);
    size_t n_held = 0;
    uint64_t n = 0;
    int nomem = 0;
    for (;;) {
        hdmlp_batch *b = NULL;
        const int rc = hdmlp_loader_next(ld, &b);
        if (rc == HDMLP_END) {
            break;
        }
        if (rc == HDMLP_E_NOMEM) {
            cr_assert_null(b);
            cr_assert_gt(n_held, 0, "E_NOMEM with no batch held: %s", hdmlp_last_error());
            nomem++;
            for (size_t i = 0; i < n_held; i++) {
                hdmlp_batch_release(held[i]);
            }
            n_held = 0;
            continue;
        }
        cr_assert_eq(rc, HDMLP_OK, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const hdmlp_sample_view *v = &hdmlp_batch_samples(b)[i];
            cr_assert_eq(seen[v->index], 0, "sample %" PRIu64 " twice", v->index);
            seen[v->index] = 1;
        }
        n += hdmlp_batch_size(b);
        held[n_held++] = b;
    }
    cr_expect_gt(nomem, 0, "a 64 KiB budget held all %" PRIu64 " samples", n);
    cr_expect_eq(n, spec.n_samples);
    for (size_t i = 0; i < n_held; i++) {
        hdmlp_batch_release(held[i]);
    }
    free(held);
    free(seen);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

/* ---- errors --------------------------------------------------------------------------- */

static void flip_byte(const char *dir, uint32_t segment, uint64_t offset)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/segment-%06u", dir, segment);
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(testds_read_file(path, &buf, &len), 0, "read %s", path);
    cr_assert_lt(offset, len);
    buf[offset] ^= 0x5a;
    cr_assert_eq(testds_write_file(path, buf, len), 0, "write %s", path);
    free(buf);
}

/* Runs to the first error; every batch before it must be intact. Returns the status and
 * keeps up to one batch held across the error when hold is set (released by the caller). */
static int run_to_error(hdmlp_loader *ld, hdmlp_dataset *ds, const testds_spec *spec,
                        hdmlp_batch **held, char *detail, size_t cap)
{
    hdmlp_batch *b = NULL;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            expect_view(ds, spec, &hdmlp_batch_samples(b)[i]);
        }
        if (held != NULL) {
            hdmlp_batch_release(*held);
            *held = b;
        } else {
            hdmlp_batch_release(b);
        }
    }
    snprintf(detail, cap, "%s", hdmlp_last_error());
    cr_expect_null(b, "*out not NULL with %s", hdmlp_err_name(rc));
    return rc;
}

static void corrupt_payload_case(hdmlp_refill refill, int compress)
{
    testds_spec spec = small_spec();
    spec.compress = compress;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    /* Chunk 5 is segment 5's only chunk; byte 64 is the first stored byte of sample 50. */
    flip_byte(dir, 5, 64);
    hdmlp_config *cfg = new_config(ROOMY, 8, 2);
    cr_assert_eq(hdmlp_config_set_refill(cfg, refill), HDMLP_OK);
    hdmlp_loader *ld = new_loader(ds, cfg);
    char detail[1024];
    const int rc = run_to_error(ld, ds, &spec, NULL, detail, sizeof(detail));
    cr_assert_eq(rc, HDMLP_E_CORRUPT, "expected HDMLP_E_CORRUPT, got %s: %s",
                 hdmlp_err_name(rc), detail);
    cr_log_info("detail: %s", detail);
    cr_expect(mentions_number(detail, "chunk", 5), "detail does not name chunk 5: %s", detail);
    for (int i = 0; i < 2; i++) {
        hdmlp_batch *b = (hdmlp_batch *)ds;
        const int again = hdmlp_loader_next(ld, &b);
        cr_expect_eq(again, HDMLP_E_CORRUPT, "call %d after the error gave %s", i,
                     hdmlp_err_name(again));
        cr_expect_null(b);
        cr_expect(mentions_number(hdmlp_last_error(), "chunk", 5),
                  "repeated detail does not name chunk 5: %s", hdmlp_last_error());
    }
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_errors, corrupt_sample_whole_refill_is_corrupt_naming_chunk, .timeout = 30)
{
    corrupt_payload_case(HDMLP_REFILL_WHOLE, 0);
}

Test(loader_errors, corrupt_sample_ranged_refill_is_corrupt_naming_chunk, .timeout = 30)
{
    corrupt_payload_case(HDMLP_REFILL_RANGES, 0);
}

Test(loader_errors, corrupt_compressed_sample_is_corrupt_naming_chunk, .timeout = 30)
{
    corrupt_payload_case(HDMLP_REFILL_AUTO, 1);
}

Test(loader_errors, corrupt_chunk_header_whole_refill_is_corrupt_naming_chunk, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    flip_byte(dir, 7, 20); /* inside the header's chunk-number field */
    hdmlp_config *cfg = new_config(ROOMY, 8, 1);
    cr_assert_eq(hdmlp_config_set_refill(cfg, HDMLP_REFILL_WHOLE), HDMLP_OK);
    hdmlp_loader *ld = new_loader(ds, cfg);
    char detail[1024];
    const int rc = run_to_error(ld, ds, &spec, NULL, detail, sizeof(detail));
    cr_assert_eq(rc, HDMLP_E_CORRUPT, "got %s: %s", hdmlp_err_name(rc), detail);
    cr_expect(mentions_number(detail, "chunk", 7), "detail does not name chunk 7: %s", detail);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_errors, batch_held_across_an_error_outlives_the_loader, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    flip_byte(dir, 12, 64);
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 8, 1));
    hdmlp_batch *held = NULL;
    char detail[1024];
    const int rc = run_to_error(ld, ds, &spec, &held, detail, sizeof(detail));
    cr_assert_eq(rc, HDMLP_E_CORRUPT, "got %s: %s", hdmlp_err_name(rc), detail);
    hdmlp_loader_free(ld);
    if (held != NULL) {
        for (size_t i = 0; i < hdmlp_batch_size(held); i++) {
            expect_view(ds, &spec, &hdmlp_batch_samples(held)[i]);
        }
        hdmlp_batch_release(held);
    }
    hdmlp_dataset_close(ds);
}

Test(loader_errors, segment_deleted_after_open_is_an_error_naming_it, .timeout = 30)
{
    testds_spec spec = small_spec();
    spec.chunks_per_segment = 4; /* 20 chunks in 5 segments */
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    cr_assert_eq(hdmlp_dataset_segment_count(ds), 5);
    char path[600];
    snprintf(path, sizeof(path), "%s/segment-000002", dir);
    cr_assert_eq(unlink(path), 0, "unlink %s", path);
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 8, 1));
    char detail[1024];
    const int rc = run_to_error(ld, ds, &spec, NULL, detail, sizeof(detail));
    cr_assert(rc == HDMLP_E_NOTFOUND || rc == HDMLP_E_IO,
              "expected HDMLP_E_NOTFOUND or HDMLP_E_IO, got %s: %s", hdmlp_err_name(rc),
              detail);
    cr_log_info("detail: %s", detail);
    cr_expect(strstr(detail, "segment-000002") != NULL, "detail does not name the file: %s",
              detail);
    hdmlp_batch *b = (hdmlp_batch *)ds;
    cr_expect_eq(hdmlp_loader_next(ld, &b), rc, "the error does not repeat");
    cr_expect_null(b);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_errors, segment_truncated_after_open_is_an_error_naming_it, .timeout = 30)
{
    testds_spec spec = small_spec();
    spec.chunks_per_segment = 4;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    char path[600];
    snprintf(path, sizeof(path), "%s/segment-000003", dir);
    cr_assert_eq(truncate(path, 0), 0, "truncate %s", path);
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 8, 1));
    char detail[1024];
    const int rc = run_to_error(ld, ds, &spec, NULL, detail, sizeof(detail));
    cr_log_info("detail: %s", detail);
    cr_assert(rc == HDMLP_E_CORRUPT || rc == HDMLP_E_IO,
              "expected HDMLP_E_CORRUPT or HDMLP_E_IO, got %s: %s", hdmlp_err_name(rc), detail);
    cr_expect(strstr(detail, "segment-000003") != NULL, "detail does not name the file: %s",
              detail);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, free_while_another_thread_releases_batches, .timeout = 60)
{
    testds_spec spec = small_spec();
    spec.n_samples = 1000;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    for (int round = 0; round < 20; round++) {
        hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 10, 0));
        release_queue q = {.head = 0, .count = 0, .done = 0};
        pthread_mutex_init(&q.lock, NULL);
        pthread_cond_init(&q.cv, NULL);
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, releaser, &q), 0);
        for (int i = 0; i < 8 + round; i++) {
            hdmlp_batch *b = NULL;
            cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_OK, "%s", hdmlp_last_error());
            pthread_mutex_lock(&q.lock);
            while (q.count == 8) {
                pthread_cond_wait(&q.cv, &q.lock);
            }
            q.items[(q.head + q.count) % 8] = b;
            q.count++;
            pthread_cond_broadcast(&q.cv);
            pthread_mutex_unlock(&q.lock);
        }
        /* The releaser may still hold queued batches while the loader goes away. */
        hdmlp_loader_free(ld);
        pthread_mutex_lock(&q.lock);
        q.done = 1;
        pthread_cond_broadcast(&q.cv);
        pthread_mutex_unlock(&q.lock);
        pthread_join(t, NULL);
        pthread_mutex_destroy(&q.lock);
        pthread_cond_destroy(&q.cv);
    }
    hdmlp_dataset_close(ds);
}

/* ---- waiting: timeouts and interrupts --------------------------------------------------- */

/* Replaces segment `s` (after the dataset was opened) by a FIFO: an I/O worker opening it
 * blocks until unblock_fifo, so the consumer waits deterministically. */
static void segment_to_fifo(const char *dir, uint32_t s, char *path, size_t cap)
{
    snprintf(path, cap, "%s/segment-%06u", dir, s);
    cr_assert_eq(unlink(path), 0, "unlink %s", path);
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s", path);
}

/* Lets the worker blocked in open() go on: its reads of the FIFO then fail. */
static void unblock_fifo(const char *path)
{
    for (int i = 0; i < 2000; i++) {
        const int fd = open(path, O_WRONLY | O_NONBLOCK);
        if (fd >= 0) {
            close(fd);
            return;
        }
        cr_assert_eq(errno, ENXIO, "open %s for writing: %s", path, strerror(errno));
        usleep(5000); /* no reader yet */
    }
    cr_assert_fail("no I/O worker opened %s within 10 s", path);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

Test(loader_api, next_timeout_zero_waits_like_next, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 16, 2));
    uint8_t seen[200] = {0};
    hdmlp_batch *b = NULL;
    int rc;
    uint64_t n = 0;
    while ((rc = hdmlp_loader_next_timeout(ld, &b, 0)) == HDMLP_OK) {
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const hdmlp_sample_view *v = &hdmlp_batch_samples(b)[i];
            expect_view(ds, &spec, v);
            seen[v->index]++;
        }
        n += hdmlp_batch_size(b);
        hdmlp_batch_release(b);
    }
    cr_expect_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_eq(n, 400);
    for (int i = 0; i < 200; i++) {
        cr_expect_eq(seen[i], 2, "sample %d delivered %u times in 2 epochs", i, seen[i]);
    }
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, next_timeout_expires_while_reads_wait, .timeout = 30)
{
    testds_spec spec = small_spec();
    spec.chunks_per_segment = 0; /* one segment: every refill waits on it */
    char dir[512], fifo[600];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    segment_to_fifo(dir, 0, fifo, sizeof(fifo));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 16, 1));
    for (int i = 0; i < 2; i++) {
        hdmlp_batch *b = (hdmlp_batch *)ds;
        const uint64_t t0 = mono_ms();
        const int rc = hdmlp_loader_next_timeout(ld, &b, 100);
        const uint64_t waited = mono_ms() - t0;
        cr_expect_eq(rc, HDMLP_E_TIMEOUT, "call %d: %s: %s", i, hdmlp_err_name(rc),
                     hdmlp_last_error());
        cr_expect_null(b);
        cr_expect_geq(waited, 90, "timed out after %" PRIu64 " ms of a 100 ms timeout", waited);
        cr_expect_lt(waited, 5000, "a 100 ms timeout took %" PRIu64 " ms", waited);
    }
    unblock_fifo(fifo);
    hdmlp_batch *b = (hdmlp_batch *)ds;
    const int rc = hdmlp_loader_next_timeout(ld, &b, 10000);
    cr_expect(rc < 0 && rc != HDMLP_E_TIMEOUT, "reading a FIFO gave %s", hdmlp_err_name(rc));
    cr_expect_null(b);
    cr_expect(strstr(hdmlp_last_error(), "segment-000000") != NULL, "detail: %s",
              hdmlp_last_error());
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

typedef struct interrupter {
    hdmlp_loader *ld;
    unsigned delay_us;
} interrupter;

static void *interrupt_later(void *arg)
{
    const interrupter *it = arg;
    usleep(it->delay_us);
    hdmlp_loader_interrupt(it->ld);
    return NULL;
}

Test(loader_api, interrupt_wakes_a_waiting_next, .timeout = 30)
{
    testds_spec spec = small_spec();
    spec.chunks_per_segment = 0;
    char dir[512], fifo[600];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    segment_to_fifo(dir, 0, fifo, sizeof(fifo));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 16, 1));
    interrupter it = {ld, 100000};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, interrupt_later, &it), 0);
    hdmlp_batch *b = (hdmlp_batch *)ds;
    const int rc = hdmlp_loader_next(ld, &b); /* no timeout: only the interrupt ends it */
    pthread_join(t, NULL);
    cr_expect_eq(rc, HDMLP_E_INTERRUPTED, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_null(b);
    /* Still waiting afterwards: the interrupt was consumed. */
    cr_expect_eq(hdmlp_loader_next_timeout(ld, &b, 50), HDMLP_E_TIMEOUT);
    unblock_fifo(fifo);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, interrupts_and_timeouts_lose_no_samples, .timeout = 60)
{
    /* Tight timeouts and interrupts from another thread while iterating: every epoch still
     * delivers every sample exactly once, and calls after E_TIMEOUT/E_INTERRUPTED resume. */
    testds_spec spec = small_spec();
    spec.n_samples = 20000;
    spec.chunk_size = 64;
    spec.chunks_per_segment = 0;
    spec.compress = 1;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_config *cfg = new_config(1u << 18, 50, 2);
    cr_assert_eq(hdmlp_config_set_threads(cfg, 1), HDMLP_OK);
    hdmlp_loader *ld = new_loader(ds, cfg);
    uint8_t *seen = calloc(spec.n_samples, 1);
    uint64_t timeouts = 0, interrupts = 0, n = 0, calls = 0;
    int rc;
    for (;;) {
        if (calls++ % 97 == 0) {
            hdmlp_loader_interrupt(ld);
        }
        hdmlp_batch *b = NULL;
        rc = hdmlp_loader_next_timeout(ld, &b, 1);
        if (rc == HDMLP_E_TIMEOUT || rc == HDMLP_E_INTERRUPTED) {
            cr_assert_null(b);
            timeouts += rc == HDMLP_E_TIMEOUT;
            interrupts += rc == HDMLP_E_INTERRUPTED;
            continue;
        }
        if (rc != HDMLP_OK) {
            break;
        }
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const hdmlp_sample_view *v = &hdmlp_batch_samples(b)[i];
            cr_assert_eq(seen[v->index], hdmlp_batch_epoch(b),
                         "sample %" PRIu64 " seen %u times before epoch %" PRIu64, v->index,
                         seen[v->index], hdmlp_batch_epoch(b));
            seen[v->index]++;
        }
        n += hdmlp_batch_size(b);
        hdmlp_batch_release(b);
    }
    cr_log_info("%" PRIu64 " timeouts, %" PRIu64 " interrupts in %" PRIu64 " calls", timeouts,
                interrupts, calls);
    cr_expect_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_eq(n, 2 * spec.n_samples);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st), HDMLP_OK);
    cr_expect_eq(st.samples, n);
    free(seen);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}
