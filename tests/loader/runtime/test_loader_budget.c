/*
 * Loader API tests, the budget as a ceiling (issue 25 items 1 and 4): a budget above what the
 * process can get is refused naming both numbers (the machine's memory, RLIMIT_AS); planning
 * holds no more than an epoch ahead of a dataset far smaller than the budget (accounted
 * bytes and resident memory); hdmlp_config_set_memory_raise lifts a budget below the least
 * that works to it, and without it that budget is refused naming it. Part of the test_loader
 * binary (fixtures in support/loader_fixture.h).
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
#include <sys/resource.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BUDGET_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BUDGET_SANITIZED 1
#endif

/* The fixed part of resident memory beyond what the loader accounts (thread stacks, malloc's
 * per-thread arenas, decoder contexts, the index): what hdmlp.h and the README promise. */
#define RSS_OVERHEAD (64ull << 20)

/* A "Key:   N kB" line of /proc/self/status (or /proc/meminfo) in bytes; 0 if absent. */
static uint64_t proc_kb(const char *path, const char *key)
{
    FILE *f = fopen(path, "re");
    cr_assert_not_null(f, "cannot open %s", path);
    char line[256];
    uint64_t v = 0;
    const size_t klen = strlen(key);
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long x;
        if (strncmp(line, key, klen) == 0 && sscanf(line + klen, "%llu", &x) == 1) {
            v = (uint64_t)x * 1024;
            break;
        }
    }
    fclose(f);
    return v;
}

/* The number written as "(N bytes)" right after `after` in msg; 0 if absent. */
static uint64_t bytes_after(const char *msg, const char *after)
{
    const char *p = strstr(msg, after);
    p = p != NULL ? strstr(p + strlen(after), "(") : NULL;
    unsigned long long v = 0;
    if (p == NULL || sscanf(p, "(%llu bytes)", &v) != 1) {
        return 0;
    }
    return (uint64_t)v;
}

static int create(hdmlp_dataset *ds, uint64_t memory, int raise, uint64_t epochs,
                  hdmlp_loader **ld)
{
    hdmlp_config *cfg = new_config(memory, 8, epochs);
    cr_assert_eq(hdmlp_config_set_memory_raise(cfg, raise), HDMLP_OK);
    const int rc = hdmlp_loader_create(ds, cfg, ld);
    hdmlp_config_free(cfg);
    return rc;
}

Test(loader_api, budget_above_the_machine_is_refused_naming_both_numbers, .timeout = 60)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    const uint64_t absurd = 10000000000000ull; /* '10TB' */
    hdmlp_loader *ld = NULL;
    const int rc = create(ds, absurd, 0, 1, &ld);
    const char *msg = hdmlp_last_error();
    cr_assert_eq(rc, HDMLP_E_RANGE, "10 TB budget: %s: %s", hdmlp_err_name(rc), msg);
    cr_assert_null(ld);
    cr_expect(strstr(msg, "10000000000000 bytes") != NULL, "'%s' does not name the budget",
              msg);
    const uint64_t ceiling = bytes_after(msg, "can get:");
    const uint64_t total = proc_kb("/proc/meminfo", "MemTotal:");
    cr_expect(ceiling > 0 && ceiling <= total,
              "'%s' does not name what the process can get (at most MemTotal %" PRIu64 ")", msg,
              total);
    /* raising never lifts a budget above the ceiling either */
    cr_expect_eq(create(ds, absurd, 1, 1, &ld), HDMLP_E_RANGE);
    hdmlp_dataset_close(ds);
}

Test(loader_api, budget_above_rlimit_as_is_refused_naming_it, .timeout = 60)
{
#ifdef BUDGET_SANITIZED
    cr_skip_test("sanitizers map terabytes of shadow memory: RLIMIT_AS cannot be set");
#endif
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    /* Criterion runs each test in its own process: the limit stays in this one. */
    const uint64_t mapped = proc_kb("/proc/self/status", "VmSize:");
    const struct rlimit rl = {(rlim_t)(mapped + (1ull << 30)), (rlim_t)(mapped + (1ull << 30))};
    cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
    hdmlp_loader *ld = NULL;
    const int rc = create(ds, 2ull << 30, 0, 1, &ld);
    const char *msg = hdmlp_last_error();
    cr_assert_eq(rc, HDMLP_E_RANGE, "2 GiB budget under RLIMIT_AS: %s: %s", hdmlp_err_name(rc),
                 msg);
    cr_expect(strstr(msg, "2147483648 bytes") != NULL, "'%s' does not name the budget", msg);
    cr_expect(strstr(msg, "RLIMIT_AS") != NULL, "'%s' does not name RLIMIT_AS", msg);
    const uint64_t room = bytes_after(msg, "can get:");
    cr_expect(room > 0 && room <= (1ull << 30), "'%s' does not name the room left", msg);
    /* a budget within the room works and ends its epoch */
    cr_assert_eq(create(ds, 64ull << 20, 0, 1, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    testds_seq seq = {0};
    cr_expect_eq(testds_drain(ld, &seq), HDMLP_END, "%s", hdmlp_last_error());
    cr_expect_eq(seq.n, spec.n_samples);
    testds_seq_free(&seq);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

/* Runs `epochs` epochs of an unbounded loader, releasing every batch; returns its stats. */
static void run_epochs(hdmlp_loader *ld, uint64_t epochs, hdmlp_stats *st)
{
    hdmlp_batch *b = NULL;
    uint64_t done = 0;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const uint64_t epoch = hdmlp_batch_epoch(b);
        hdmlp_batch_release(b);
        if (epoch >= epochs) {
            break;
        }
        done = epoch;
    }
    cr_assert_eq(rc, HDMLP_OK, "next: %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_eq(done + 1, epochs);
    cr_assert_eq(hdmlp_loader_stats(ld, st, sizeof *st), HDMLP_OK);
}

Test(loader_api, budget_far_above_the_dataset_holds_an_epoch_ahead_not_the_budget,
     .timeout = 120)
{
    /* 400 samples of 2..6 KiB (1.6 MB) with a 1 GiB budget and no epoch count: planning
     * ran ahead epoch after epoch until it held the budget. What it may hold: the slots (at
     * most the dataset), one epoch ahead (at most twice the dataset: a window of one epoch
     * spans two), the batch the consumer holds and the read buffers. */
    testds_spec spec = small_spec();
    spec.n_samples = 400;
    spec.chunk_size = 16;
    spec.min_size = 2048;
    spec.max_size = 6144;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    const uint64_t raw = hdmlp_dataset_raw_bytes(ds);
    const uint64_t base = proc_kb("/proc/self/status", "VmRSS:");
    hdmlp_loader *ld = NULL;
    cr_assert_eq(create(ds, 1ull << 30, 0, 0, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_stats st;
    run_epochs(ld, 20, &st);
    const uint64_t bound = st.budget_read_buffers + st.budget_batches + 3 * raw;
    cr_log_info("raw %" PRIu64 ", peak accounted %" PRIu64 " (bound %" PRIu64 ")", raw,
                st.peak_memory_bytes, bound);
    cr_expect_leq(st.peak_memory_bytes, bound,
                  "peak accounted %" PRIu64 " bytes for a %" PRIu64 "-byte dataset and a 1 GiB "
                  "budget: planning holds more than an epoch ahead",
                  st.peak_memory_bytes, raw);
    const uint64_t hwm = proc_kb("/proc/self/status", "VmHWM:");
#ifdef BUDGET_SANITIZED
    (void)hwm; /* shadow memory: RSS says nothing */
    (void)base;
#else
    cr_expect_leq(hwm - base, bound + RSS_OVERHEAD,
                  "peak RSS grew by %" PRIu64 " bytes (bound %" PRIu64 " + %llu overhead)",
                  hwm - base, bound, RSS_OVERHEAD);
#endif
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, memory_raise_lifts_a_budget_below_the_least_that_works, .timeout = 60)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = NULL;
    /* Without raise: refused, proposing the budget that works. */
    cr_assert_eq(create(ds, 4096, 0, 1, &ld), HDMLP_E_RANGE);
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", hdmlp_last_error());
    const char *p = strstr(msg, "a budget of ");
    unsigned long long least = 0;
    cr_assert(p != NULL && sscanf(p, "a budget of %llu bytes", &least) == 1,
              "'%s' proposes no budget", msg);
    cr_expect_eq(create(ds, least - 1, 0, 1, &ld), HDMLP_E_RANGE, "one byte below %llu", least);
    /* With raise: lifted to exactly that budget, which the stats show beside the one set. */
    cr_assert_eq(create(ds, 4096, 1, 1, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.memory_budget, least);
    cr_expect_eq(st.memory_configured, 4096);
    testds_seq seq = {0};
    cr_expect_eq(testds_drain(ld, &seq), HDMLP_END, "%s", hdmlp_last_error());
    cr_expect_eq(seq.n, spec.n_samples);
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_leq(st.peak_memory_bytes, least);
    testds_seq_free(&seq);
    hdmlp_loader_free(ld);
    /* A budget that works is left as it is. */
    cr_assert_eq(create(ds, ROOMY, 1, 1, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.memory_budget, ROOMY);
    cr_expect_eq(st.memory_configured, ROOMY);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

/* What the loader holds outside the budget grows with chunks, not samples: with the same
 * chunk size, sample sizes and budget, four times the samples add at most 2 bits a sample
 * of loader state (the scheduler's two words and one K-bit mask per chunk: 1.25 bits at
 * K = 256, the rest is room for the planned positions' table, which varies by run), and
 * index_bytes is the index file. */
Test(loader_api, state_outside_the_budget_grows_by_at_most_two_bits_a_sample, .timeout = 120)
{
    const uint64_t sizes[2] = {20000, 80000};
    uint64_t meta[2];
    for (int i = 0; i < 2; i++) {
        const testds_spec spec = {sizes[i], 256, 0, 7, 60, 68, 0, 0, 10, 0};
        char dir[512];
        hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
        hdmlp_loader *ld = NULL;
        cr_assert_eq(create(ds, 1u << 20, 0, 0, &ld), HDMLP_OK, "%s", hdmlp_last_error());
        hdmlp_stats st;
        run_epochs(ld, 1, &st);
        meta[i] = st.metadata_bytes;
        char path[600];
        snprintf(path, sizeof(path), "%s/index", dir);
        uint8_t *buf = NULL;
        size_t len = 0;
        cr_assert_eq(testds_read_file(path, &buf, &len), 0);
        cr_assert_eq(st.index_bytes, len, "index_bytes is the index file");
        free(buf);
        cr_log_info("%llu samples: %llu bytes of loader state, %llu of index",
                    (unsigned long long)sizes[i], (unsigned long long)st.metadata_bytes,
                    (unsigned long long)st.index_bytes);
        hdmlp_loader_free(ld);
        hdmlp_dataset_close(ds);
        testds_rm_rf(dir);
    }
    cr_assert_gt(meta[0], 0);
    cr_assert_leq(meta[1] - meta[0], (sizes[1] - sizes[0]) / 4,
                  "%llu more bytes of state for %llu more samples",
                  (unsigned long long)(meta[1] - meta[0]),
                  (unsigned long long)(sizes[1] - sizes[0]));
}

/* A format-2 dataset's sample tables are held in a share of the budget when they fit a
 * sixteenth of it (planning then reads no file), else left in the file; the share also
 * holds the scheduler's table cache and the tables' block offsets (each at most a sixteenth
 * of the budget); the shares still add up to the budget, and a format-1 dataset has none
 * (its records are the index's). */
Test(loader_api, sample_tables_are_held_in_the_budget_when_they_fit_a_sixteenth, .timeout = 60)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    /* DIR/tables: a 16-byte header, then two 16-byte value records (bytes, label) a sample */
    const uint64_t tables = 16 + spec.n_samples * 2 * 16;
    struct {
        uint64_t memory, held;
    } cases[] = {{ROOMY, tables}, {16 * tables - 1, 0}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hdmlp_loader *ld = NULL;
        cr_assert_eq(create(ds, cases[i].memory, 1, 1, &ld), HDMLP_OK, "%s",
                     hdmlp_last_error());
        hdmlp_stats st;
        cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
        /* Held or not, a table cache and the block offsets take up to a sixteenth each. */
        const uint64_t extra = 2 * (st.memory_budget / 16);
        cr_expect(st.budget_sample_tables >= cases[i].held &&
                      st.budget_sample_tables <= cases[i].held + extra &&
                      st.budget_sample_tables > 0,
                  "budget %" PRIu64 ": %" PRIu64 " (tables %s)", st.memory_budget,
                  st.budget_sample_tables, cases[i].held ? "held" : "not held");
        cr_expect_eq(st.budget_read_buffers + st.budget_batches + st.budget_remote +
                         st.budget_ram_cache + st.budget_lookahead + st.budget_slots +
                         st.budget_images + st.budget_sample_tables,
                     st.memory_budget, "the shares add up to the budget");
        testds_seq seq = {0};
        cr_expect_eq(testds_drain(ld, &seq), HDMLP_END, "%s", hdmlp_last_error());
        cr_expect_eq(seq.n, spec.n_samples);
        testds_seq_free(&seq);
        hdmlp_loader_free(ld);
    }
    hdmlp_dataset_close(ds);
    spec.version = 1;
    ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = NULL;
    cr_assert_eq(create(ds, ROOMY, 1, 1, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.budget_sample_tables, 0);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}
