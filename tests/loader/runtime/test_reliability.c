/* Reliability: corrupt data at run time (fail or skip-and-report), exact resume. */
#include "format.h"
#include "hdmlp.h"
#include "loader.h"
#include "loader_dataset.h"
#include "support/fakenet.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const testds_spec spec = {1500, 16, 0, 12, 100, 900, 0, 0, 3, 0};

static hdmlp_dataset *make(char *dir, size_t cap)
{
    cr_assert_eq(testds_mkdtemp("rel", dir, cap), 0);
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    return ds;
}

/* Flips one payload byte of sample `index` in its segment file. */
static void corrupt_sample(hdmlp_dataset *ds, const char *dir, uint64_t index)
{
    fmt_sample s;
    fmt_chunk ch;
    cr_assert_eq(ds_sample_record(ds, index, &s), HDMLP_OK, "%s", hdmlp_last_error());
    fmt_index_chunk(&ds->ix, index / spec.chunk_size, &ch);
    char path[1024];
    snprintf(path, sizeof(path), "%s/segment-%06u", dir, ch.segment);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    const long off = (long)(ch.offset + s.offset + s.stored_len / 2);
    fseek(f, off, SEEK_SET);
    const int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

static hdmlp_config *config(hdmlp_dataset *ds, uint64_t epochs)
{
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
    hdmlp_config_set_ram_cache(cfg, 0);
    hdmlp_config_set_epochs(cfg, epochs);
    hdmlp_config_set_batch_size(cfg, 20);
    hdmlp_config_set_seed(cfg, 99);
    return cfg;
}

Test(reliability, corrupt_sample_fails_by_default_naming_it, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    corrupt_sample(ds, dir, 700);
    hdmlp_config *cfg = config(ds, 1);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK);
    hdmlp_batch *b;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        hdmlp_batch_release(b);
    }
    cr_assert_eq(rc, HDMLP_E_CORRUPT, "%s", hdmlp_err_name(rc));
    cr_assert(strstr(hdmlp_last_error(), "sample 700") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "chunk 43") != NULL, "%s", hdmlp_last_error());
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(reliability, skip_mode_leaves_out_and_reports_only_the_bad_sample, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    corrupt_sample(ds, dir, 700);
    corrupt_sample(ds, dir, 33);
    const hdmlp_refill modes[] = {HDMLP_REFILL_WHOLE, HDMLP_REFILL_RANGES};
    for (int m = 0; m < 2; m++) {
        hdmlp_config *cfg = config(ds, 2);
        hdmlp_config_set_refill(cfg, modes[m]);
        cr_assert_eq(hdmlp_config_set_on_corrupt(cfg, HDMLP_CORRUPT_SKIP), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_on_corrupt(cfg, (hdmlp_on_corrupt)7), HDMLP_E_INVAL);
        hdmlp_loader *ld = NULL;
        cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK);
        uint8_t *seen = calloc(2 * spec.n_samples, 1);
        uint8_t buf[1000];
        hdmlp_batch *b;
        int rc;
        uint64_t got = 0;
        while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
            const hdmlp_sample_view *v = hdmlp_batch_samples(b);
            for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
                cr_assert_eq(seen[hdmlp_batch_epoch(b) * spec.n_samples + v[i].index]++, 0);
                testds_fill(v[i].index, spec.seed, buf, v[i].size);
                cr_assert_eq(memcmp(buf, v[i].data, v[i].size), 0, "sample %llu is wrong",
                             (unsigned long long)v[i].index);
                got++;
            }
            hdmlp_batch_release(b);
        }
        cr_assert_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
        hdmlp_stats st;
        hdmlp_loader_stats(ld, &st, sizeof st);
        char last[1024];
        hdmlp_loader_last_skip(ld, last, sizeof(last));
        printf("skip mode %d: %llu delivered, %llu skipped; last: %s\n", m,
               (unsigned long long)got, (unsigned long long)st.skipped_samples, last);
        cr_assert_eq(st.skipped_samples, 4, "two bad samples in each of two epochs");
        cr_assert_eq(got, 2 * (spec.n_samples - 2));
        for (int e = 0; e < 2; e++) {
            cr_assert_eq(seen[e * spec.n_samples + 700], 0, "a bad sample is never delivered");
            cr_assert_eq(seen[e * spec.n_samples + 33], 0);
        }
        cr_assert(strstr(last, "sample 700") != NULL || strstr(last, "sample 33") != NULL, "%s",
                  last);
        free(seen);
        hdmlp_loader_free(ld);
        hdmlp_config_free(cfg);
    }
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

/* Runs a skip-mode loader (2 epochs) over the dataset with every sample but `keep` (-1:
 * none) corrupted; returns the final code, the samples and batches delivered. */
static int run_skip_all_but(hdmlp_dataset *ds, const char *dir, int64_t keep, uint64_t *got,
                            uint64_t *batches, hdmlp_loader **out)
{
    for (uint64_t i = 0; i < spec.n_samples; i++) {
        if ((int64_t)i != keep) {
            corrupt_sample(ds, dir, i);
        }
    }
    hdmlp_config *cfg = config(ds, 2);
    cr_assert_eq(hdmlp_config_set_on_corrupt(cfg, HDMLP_CORRUPT_SKIP), HDMLP_OK);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_config_free(cfg);
    hdmlp_batch *b;
    int rc;
    *got = *batches = 0;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        *got += hdmlp_batch_size(b);
        (*batches)++;
        hdmlp_batch_release(b);
    }
    *out = ld;
    return rc;
}

Test(reliability, skip_mode_fails_an_epoch_that_skipped_every_sample, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    hdmlp_loader *ld = NULL;
    uint64_t got, batches;
    const int rc = run_skip_all_but(ds, dir, -1, &got, &batches, &ld);
    char err[1024];
    snprintf(err, sizeof(err), "%s", hdmlp_last_error());
    printf("all corrupt, skip mode: %s after %llu empty batches: %s\n", hdmlp_err_name(rc),
           (unsigned long long)batches, err);
    cr_assert_eq(rc, HDMLP_E_CORRUPT, "%s: %s", hdmlp_err_name(rc), err);
    cr_assert(strstr(err, "every sample of epoch 0") != NULL, "%s", err);
    cr_assert(strstr(err, "1500 of 1500") != NULL, "%s", err);
    cr_assert(strstr(err, "chunk") != NULL, "names the last bad sample: %s", err);
    cr_assert_eq(got, 0);
    cr_assert_eq(batches, 1500 / 20 - 1, "every batch of epoch 0 but its last (empty ones)");
    hdmlp_stats st;
    hdmlp_loader_stats(ld, &st, sizeof st);
    cr_assert_eq(st.skipped_samples, 1500);
    hdmlp_batch *b = NULL;
    cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_E_CORRUPT, "failing stays failed");
    cr_assert_null(b);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(reliability, skip_mode_passes_an_epoch_that_kept_one_sample, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    hdmlp_loader *ld = NULL;
    uint64_t got, batches;
    const int rc = run_skip_all_but(ds, dir, 321, &got, &batches, &ld);
    cr_assert_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_eq(got, 2, "sample 321 in each of two epochs");
    cr_assert_eq(batches, 2 * (1500 / 20));
    hdmlp_stats st;
    hdmlp_loader_stats(ld, &st, sizeof st);
    cr_assert_eq(st.skipped_samples, 2 * 1499);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

/* Delivered indices of `batches` batches (all if 0), appended to out; returns the count. */
static size_t take(hdmlp_loader *ld, size_t batches, uint64_t *out)
{
    size_t n = 0, got = 0;
    hdmlp_batch *b;
    while ((batches == 0 || got < batches) && hdmlp_loader_next(ld, &b) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            out[n++] = v[i].index;
        }
        hdmlp_batch_release(b);
        got++;
    }
    return n;
}

Test(reliability, resume_continues_exactly_where_the_saved_loader_stopped, .timeout = 120)
{
    char dir[512];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    const uint64_t total = 3 * spec.n_samples;
    uint64_t *ref = malloc(total * sizeof(uint64_t));
    uint64_t *got = malloc(total * sizeof(uint64_t));
    hdmlp_config *cfg = config(ds, 3);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK);
    cr_assert_eq(take(ld, 0, ref), total);
    hdmlp_loader_free(ld);
    /* 75 batches = one epoch exactly; others stop mid-epoch. */
    const size_t stops[] = {1, 37, 75, 76, 149, 200};
    for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
        cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK);
        size_t n = take(ld, stops[i], got);
        uint8_t state[HDMLP_STATE_MAX];
        size_t len = 0;
        cr_assert_eq(hdmlp_loader_save_state(ld, state, sizeof(state), &len), HDMLP_OK);
        hdmlp_loader_free(ld); /* the process "dies" here */
        hdmlp_config *again = config(ds, 3);
        cr_assert_eq(hdmlp_config_set_resume(again, state, len), HDMLP_OK);
        cr_assert_eq(hdmlp_loader_create(ds, again, &ld), HDMLP_OK, "%s", hdmlp_last_error());
        n += take(ld, 0, got + n);
        hdmlp_loader_free(ld);
        hdmlp_config_free(again);
        cr_assert_eq(n, total, "stop after %zu batches: %zu samples in all", stops[i], n);
        cr_assert_eq(memcmp(ref, got, total * sizeof(uint64_t)), 0,
                     "stop after %zu batches: the resumed order differs", stops[i]);
    }
    free(ref);
    free(got);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(reliability, resume_refuses_another_dataset_or_order_changing_config, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    hdmlp_config *cfg = config(ds, 2);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK);
    uint64_t sink[2000];
    take(ld, 10, sink);
    uint8_t state[HDMLP_STATE_MAX];
    size_t len = 0;
    cr_assert_eq(hdmlp_loader_save_state(ld, state, sizeof(state), &len), HDMLP_OK);
    hdmlp_loader_free(ld);
    /* Another seed changes the order: refused, naming the seed. */
    hdmlp_config_set_seed(cfg, 100);
    cr_assert_eq(hdmlp_config_set_resume(cfg, state, len), HDMLP_OK);
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "seed") != NULL, "%s", hdmlp_last_error());
    cr_assert_null(ld);
    /* A damaged state is refused. */
    state[90] ^= 1;
    cr_assert_eq(hdmlp_config_set_resume(cfg, state, len), HDMLP_E_CORRUPT);
    cr_assert_eq(hdmlp_config_set_resume(cfg, "nonsense", 8), HDMLP_E_INVAL);
    /* A state of epoch order version 1 (Fisher–Yates at every size) is refused by name. */
    state[90] ^= 1;
    fmt_st32(state + 8, 1);
    fmt_st64(state + 96, fmt_checksum(state, 96));
    cr_assert_eq(hdmlp_config_set_resume(cfg, state, len), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "order version 1") != NULL, "%s", hdmlp_last_error());
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

typedef struct rank_job {
    hdmlp_loader *ld;
    size_t batches;
    uint64_t *out;
    size_t n;
    uint8_t state[HDMLP_STATE_MAX];
    size_t len;
} rank_job;

static void *rank_take(void *arg)
{
    rank_job *j = arg;
    j->n = take(j->ld, j->batches, j->out);
    hdmlp_loader_save_state(j->ld, j->state, sizeof(j->state), &j->len);
    hdmlp_loader_free(j->ld);
    return NULL;
}

/* Runs 3 ranks over the in-process transport: `batches` each (0 = to the end), from the
 * given states (or the start). */
static void run_ranks(hdmlp_dataset *ds, size_t batches, rank_job *jobs, int resume)
{
    fakenet *hub = NULL;
    fakenet_create(3, &hub);
    const char *peers[3] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
    for (uint32_t r = 0; r < 3; r++) {
        hdmlp_config *cfg = config(ds, 2);
        hdmlp_config_set_rank(cfg, r, 3);
        hdmlp_config_set_peers(cfg, peers, 3);
        if (resume) {
            cr_assert_eq(hdmlp_config_set_resume(cfg, jobs[r].state, jobs[r].len), HDMLP_OK);
        }
        cr_assert_eq(loader_create_with(ds, cfg, fakenet_factory, &jobs[r].ld), HDMLP_OK, "%s",
                     hdmlp_last_error());
        jobs[r].batches = batches;
        hdmlp_config_free(cfg);
    }
    pthread_t th[3];
    for (int r = 0; r < 3; r++) {
        pthread_create(&th[r], NULL, rank_take, &jobs[r]);
    }
    for (int r = 0; r < 3; r++) {
        pthread_join(th[r], NULL);
    }
    fakenet_free(hub);
}

Test(reliability, resume_with_three_ranks_matches_an_uninterrupted_run, .timeout = 120)
{
    char dir[512];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    rank_job ref[3], first[3], second[3];
    memset(ref, 0, sizeof(ref));
    memset(first, 0, sizeof(first));
    for (int r = 0; r < 3; r++) {
        ref[r].out = malloc(2 * spec.n_samples * sizeof(uint64_t));
        first[r].out = malloc(2 * spec.n_samples * sizeof(uint64_t));
    }
    run_ranks(ds, 0, ref, 0);
    run_ranks(ds, 31, first, 0); /* every rank stops after 31 batches */
    memcpy(second, first, sizeof(first));
    for (int r = 0; r < 3; r++) {
        second[r].out = first[r].out + first[r].n;
    }
    run_ranks(ds, 0, second, 1);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(first[r].n + second[r].n, ref[r].n, "rank %d", r);
        cr_assert_eq(memcmp(first[r].out, ref[r].out, ref[r].n * sizeof(uint64_t)), 0,
                     "rank %d: the resumed order differs", r);
        free(ref[r].out);
        free(first[r].out);
    }
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}
