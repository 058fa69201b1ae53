/* Packed datasets on disk: round trips, accessors, reads and verification, and the
 * test-dataset writer itself. Opening what is not a valid dataset and corrupt chunks:
 * test_dataset_corrupt.c (the same test_dataset binary); fixtures in
 * support/dataset_fixture.h. */
#include "loader_dataset.h"
#include "support/dataset_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- round trips ------------------------------------------------------------------------ */

typedef struct rt_param {
    uint32_t k;
    uint32_t per_segment;
    int compress;
    int dict;
} rt_param;

ParameterizedTestParameters(dataset, roundtrip)
{
    static rt_param params[] = {
        {1, 0, 0, 0},  {1, 1, 0, 0},  {1, 0, 1, 0},  {1, 1, 1, 1},  {7, 0, 0, 0},
        {7, 1, 0, 0},  {7, 0, 1, 0},  {7, 1, 1, 0},  {7, 0, 1, 1},  {7, 1, 1, 1},
        {64, 0, 0, 0}, {64, 1, 0, 0}, {64, 0, 1, 0}, {64, 1, 1, 0}, {64, 0, 1, 1},
        {64, 1, 1, 1}, {7, 3, 1, 0},
    };
    return cr_make_param_array(rt_param, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(rt_param *p, dataset, roundtrip)
{
    /* N = 453 is not a multiple of 7 or 64; sizes from 0 bytes up. */
    const testds_spec spec = {.n_samples = 453,
                              .chunk_size = p->k,
                              .chunks_per_segment = p->per_segment,
                              .seed = 1000 + p->k,
                              .min_size = 0,
                              .max_size = 700,
                              .compress = p->compress,
                              .dict = p->dict,
                              .n_labels = 5};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    const uint64_t chunks = (spec.n_samples + p->k - 1) / p->k;
    cr_assert_eq(hdmlp_dataset_sample_count(ds), spec.n_samples);
    cr_assert_eq(hdmlp_dataset_chunk_size(ds), p->k);
    cr_assert_eq(hdmlp_dataset_chunk_count(ds), chunks);
    const uint64_t per = p->per_segment ? p->per_segment : chunks;
    cr_assert_eq(hdmlp_dataset_segment_count(ds), (chunks + per - 1) / per);
    cr_assert_eq(hdmlp_dataset_label_count(ds), 5);
    cr_assert_eq(hdmlp_dataset_seed(ds), spec.seed);
    uint64_t raw = 0, stored = 0, empty = 0;
    for (uint64_t i = 0; i < spec.n_samples; i++) {
        hdmlp_sample_info info;
        cr_assert_eq(hdmlp_dataset_sample_info(ds, i, &info), HDMLP_OK);
        raw += info.raw_size;
        stored += info.stored_size;
        empty += info.raw_size == 0;
        const uint32_t want_codec = p->compress ? (p->dict ? 2u : 1u) : 0u;
        cr_assert_eq(info.codec, want_codec);
    }
    cr_assert_gt(empty, 0, "some samples are empty");
    cr_assert_eq(hdmlp_dataset_raw_bytes(ds), raw);
    cr_assert_eq(hdmlp_dataset_stored_bytes(ds), stored);
    if (p->compress) {
        cr_assert_lt(stored, raw / 2, "compressible content compresses");
    } else {
        cr_assert_eq(stored, raw);
    }
    check_all_samples(ds, &spec);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
}

Test(dataset, all_samples_empty)
{
    for (int compress = 0; compress <= 1; compress++) {
        const testds_spec spec = {.n_samples = 20,
                                  .chunk_size = 6,
                                  .seed = 5,
                                  .min_size = 0,
                                  .max_size = 0,
                                  .compress = compress,
                                  .n_labels = 1};
        write_ds(&spec);
        hdmlp_dataset *ds = open_ok();
        cr_assert_eq(hdmlp_dataset_raw_bytes(ds), 0);
        size_t size = 99;
        cr_assert_eq(hdmlp_dataset_read_sample(ds, 3, NULL, 0, &size), HDMLP_OK, "%s",
                     hdmlp_last_error());
        cr_assert_eq(size, 0);
        check_all_samples(ds, &spec);
        cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK);
        hdmlp_dataset_close(ds);
    }
}

static void count_progress(void *arg, uint64_t done, uint64_t total)
{
    uint64_t *calls = arg;
    cr_assert_eq(done, calls[0] + 1);
    calls[0]++;
    calls[1] = total;
}

Test(dataset, verify_reports_progress)
{
    const testds_spec spec = {.n_samples = 100,
                              .chunk_size = 8,
                              .chunks_per_segment = 4,
                              .seed = 6,
                              .max_size = 50,
                              .n_labels = 2};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    uint64_t calls[2] = {0, 0};
    cr_assert_eq(hdmlp_dataset_verify(ds, count_progress, calls), HDMLP_OK);
    cr_assert_eq(calls[0], 13);
    cr_assert_eq(calls[1], 13);
    hdmlp_dataset_close(ds);
}

/* ---- accessors --------------------------------------------------------------------------- */

Test(dataset, sample_info_fields)
{
    const testds_spec spec = {.n_samples = 30,
                              .chunk_size = 4,
                              .seed = 7,
                              .min_size = 10,
                              .max_size = 90,
                              .compress = 1,
                              .n_labels = 3};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    hdmlp_sample_info info;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 29, &info), HDMLP_OK);
    cr_assert_eq(info.index, 29);
    cr_assert_eq(info.chunk, 7);
    cr_assert_eq(info.slot, 1);
    cr_assert_eq(info.label, 29 % 3);
    cr_assert_eq(info.raw_size, testds_size(&spec, 29));
    cr_assert_gt(info.stored_size, 0);
    cr_assert_eq(info.codec, 1);
    cr_assert_eq(info.key_size, strlen("sample-29"));
    cr_assert_eq(memcmp(info.key, "sample-29", info.key_size), 0);
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 30, &info), HDMLP_E_RANGE);
    hdmlp_dataset_close(ds);
}

Test(dataset, find_key)
{
    const testds_spec spec = {
        .n_samples = 500, .chunk_size = 16, .seed = 8, .max_size = 20, .n_labels = 2};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    uint64_t idx = 0;
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-417", 10, &idx), HDMLP_OK);
    cr_assert_eq(idx, 417);
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-0", 8, &idx), HDMLP_OK);
    cr_assert_eq(idx, 0);
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-500", 10, &idx), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "sample-500"), "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-", 7, &idx), HDMLP_E_NOTFOUND,
                 "a prefix is not a match");
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-41\0", 10, &idx), HDMLP_E_NOTFOUND);
    cr_assert_eq(hdmlp_dataset_find_key(ds, "", 0, &idx), HDMLP_E_NOTFOUND);
    hdmlp_dataset_close(ds);
}

Test(dataset, label_names)
{
    const testds_spec spec = {
        .n_samples = 10, .chunk_size = 4, .seed = 9, .max_size = 8, .n_labels = 12};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    cr_assert_eq(hdmlp_dataset_label_count(ds), 12);
    for (uint32_t l = 0; l < 12; l++) {
        char want[32];
        snprintf(want, sizeof(want), "class-%u", l);
        size_t n = 0;
        const char *name = hdmlp_dataset_label_name(ds, l, &n);
        cr_assert_not_null(name);
        cr_assert_eq(n, strlen(want));
        cr_assert_str_eq(name, want, "label names are NUL-terminated");
    }
    size_t n = 7;
    cr_assert_null(hdmlp_dataset_label_name(ds, 12, &n));
    cr_assert_eq(n, 0);
    hdmlp_dataset_close(ds);
}

Test(dataset, read_sample_buffer_too_small)
{
    const testds_spec spec = {.n_samples = 10,
                              .chunk_size = 4,
                              .seed = 10,
                              .min_size = 100,
                              .max_size = 100,
                              .n_labels = 1};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    uint8_t buf[100];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 2, buf, 99, &size), HDMLP_E_RANGE);
    cr_assert_eq(size, 100);
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 2, buf, 100, &size), HDMLP_OK);
    cr_assert_eq(size, 100);
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 10, buf, 100, &size), HDMLP_E_RANGE);
    hdmlp_dataset_close(ds);
}

typedef struct reader_arg {
    hdmlp_dataset *ds;
    const testds_spec *spec;
    unsigned id;
    int failures;
} reader_arg;

static void *reader(void *p)
{
    reader_arg *a = p;
    uint8_t *want = malloc(a->spec->max_size + 1);
    uint8_t *got = malloc(a->spec->max_size + 1);
    for (int round = 0; round < 3; round++) {
        for (uint64_t i = a->id; i < a->spec->n_samples; i += 2) {
            const size_t n = testds_size(a->spec, i);
            testds_fill(i, a->spec->seed, want, n);
            size_t size;
            if (hdmlp_dataset_read_sample(a->ds, i, got, a->spec->max_size, &size) !=
                    HDMLP_OK ||
                size != n || memcmp(want, got, n) != 0) {
                a->failures++;
            }
        }
    }
    free(want);
    free(got);
    return NULL;
}

Test(dataset, concurrent_reads)
{
    const testds_spec spec = {.n_samples = 400,
                              .chunk_size = 16,
                              .chunks_per_segment = 5,
                              .seed = 11,
                              .max_size = 2000,
                              .compress = 1,
                              .dict = 1,
                              .n_labels = 4};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    enum { T = 4 };
    pthread_t th[T];
    reader_arg args[T];
    for (unsigned t = 0; t < T; t++) {
        args[t] = (reader_arg){ds, &spec, t % 2, 0};
        cr_assert_eq(pthread_create(&th[t], NULL, reader, &args[t]), 0);
    }
    for (unsigned t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        cr_assert_eq(args[t].failures, 0, "thread %u", t);
    }
    hdmlp_dataset_close(ds);
}

Test(dataset, segment_fds_are_cached)
{
    const testds_spec spec = {.n_samples = 20,
                              .chunk_size = 4,
                              .chunks_per_segment = 2,
                              .seed = 12,
                              .max_size = 10,
                              .n_labels = 1};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    const int fd = ds_segment_fd(ds, 1, 0);
    cr_assert_geq(fd, 0, "%s", hdmlp_last_error());
    cr_assert_eq(ds_segment_fd(ds, 1, 0), fd);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    cr_assert_eq(ds_segment_fd(ds, 3, 0), HDMLP_E_RANGE);
    char path[PATH_CAP];
    ds_segment_path(ds, 2, path, sizeof(path));
    cr_assert(strstr(path, "/segment-000002") != NULL, "%s", path);
    const int dfd = ds_segment_fd(ds, 1, 1);
    if (dfd == HDMLP_E_UNSUPPORTED) {
        cr_log_warn("O_DIRECT unsupported here: %s", hdmlp_last_error());
    } else {
        cr_assert_geq(dfd, 0, "%s", hdmlp_last_error());
        cr_assert_neq(dfd, fd);
        cr_assert(fcntl(dfd, F_GETFL) & O_DIRECT);
        cr_assert_eq(ds_segment_fd(ds, 1, 1), dfd);
    }
    hdmlp_dataset_close(ds);
}

/* ---- the test-dataset writer itself --------------------------------------------------------
 */

Test(dataset, testds_is_deterministic_and_fast)
{
    const testds_spec spec = {.n_samples = 100000,
                              .chunk_size = 64,
                              .chunks_per_segment = 0,
                              .seed = 15,
                              .min_size = 0,
                              .max_size = 16,
                              .compress = 0,
                              .n_labels = 10};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    write_ds(&spec);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_log_info("testds_write of 100000 tiny samples: %.3f s", s);
    hdmlp_dataset *ds = open_ok();
    cr_assert_eq(hdmlp_dataset_sample_count(ds), 100000);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK);
    hdmlp_dataset_close(ds);
    char path[PATH_CAP];
    path_of(path, "index");
    uint8_t *a, *b;
    size_t la, lb;
    cr_assert_eq(testds_read_file(path, &a, &la), 0);
    write_ds(&spec);
    cr_assert_eq(testds_read_file(path, &b, &lb), 0);
    cr_assert_eq(la, lb);
    cr_assert_eq(memcmp(a, b, la), 0, "same spec, same bytes");
    free(a);
    free(b);
}
