/* Packed datasets on disk: open, accessors, reads, verification and corruption. */
#include "loader_dataset.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PATH_CAP 4096

static char g_dir[2048];

static void make_dir(void)
{
    cr_assert_eq(testds_mkdtemp("dataset", g_dir, sizeof(g_dir)), 0, "mkdtemp");
}

static void remove_dir(void) { testds_rm_rf(g_dir); }

TestSuite(dataset, .init = make_dir, .fini = remove_dir, .timeout = 60);

static void write_ds(const testds_spec *spec)
{
    cr_log_info("dataset seed %llu: N=%llu K=%u per-segment=%u sizes %u..%u compress=%d "
                "dict=%d",
                (unsigned long long)spec->seed, (unsigned long long)spec->n_samples,
                spec->chunk_size, spec->chunks_per_segment, spec->min_size, spec->max_size,
                spec->compress, spec->dict);
    cr_assert_eq(testds_write(g_dir, spec), HDMLP_OK, "testds_write: %s", hdmlp_last_error());
}

static hdmlp_dataset *open_ok(void)
{
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_OK, "open: %s", hdmlp_last_error());
    cr_assert_not_null(ds);
    return ds;
}

static void path_of(char *buf, const char *name)
{
    snprintf(buf, PATH_CAP, "%s/%s", g_dir, name);
}

/* Reads every sample and compares it with testds_fill. */
static void check_all_samples(hdmlp_dataset *ds, const testds_spec *spec)
{
    uint8_t *want = malloc(spec->max_size + 1);
    uint8_t *got = malloc(spec->max_size + 1);
    for (uint64_t i = 0; i < spec->n_samples; i++) {
        const size_t n = testds_size(spec, i);
        testds_fill(i, spec->seed, want, n);
        size_t size = 12345;
        memset(got, 0xa5, spec->max_size + 1);
        cr_assert_eq(hdmlp_dataset_read_sample(ds, i, got, spec->max_size + 1, &size), HDMLP_OK,
                     "sample %llu: %s", (unsigned long long)i, hdmlp_last_error());
        cr_assert_eq(size, n, "sample %llu size", (unsigned long long)i);
        cr_assert_eq(memcmp(want, got, n), 0, "sample %llu bytes", (unsigned long long)i);
        cr_assert_eq(got[n], 0xa5, "sample %llu wrote past its size", (unsigned long long)i);
    }
    free(want);
    free(got);
}

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

/* ---- opening what is not a (valid) dataset ----------------------------------------------- */

Test(dataset, open_missing_directory)
{
    char path[PATH_CAP];
    path_of(path, "nope");
    hdmlp_dataset *ds = (hdmlp_dataset *)1;
    cr_assert_eq(hdmlp_dataset_open(path, &ds), HDMLP_E_NOTFOUND);
    cr_assert_null(ds);
    cr_assert(strstr(hdmlp_last_error(), path), "%s", hdmlp_last_error());
}

Test(dataset, open_directory_without_index)
{
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "not an hdmlp dataset"), "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "/index"), "%s", hdmlp_last_error());
}

Test(dataset, open_empty_or_foreign_index)
{
    char path[PATH_CAP];
    path_of(path, "index");
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(testds_write_file(path, "", 0), 0);
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "empty"), "%s", hdmlp_last_error());
    const char text[] = "this is a text file, not an index\n";
    cr_assert_eq(testds_write_file(path, text, sizeof(text) - 1), 0);
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "magic"), "%s", hdmlp_last_error());
    cr_assert_null(ds);
}

static const testds_spec small_spec = {.n_samples = 9,
                                       .chunk_size = 4,
                                       .chunks_per_segment = 2,
                                       .seed = 13,
                                       .min_size = 0,
                                       .max_size = 12,
                                       .compress = 0,
                                       .n_labels = 2};

Test(dataset, index_every_byte_flip_detected_at_open)
{
    write_ds(&small_spec);
    hdmlp_dataset_close(open_ok());
    char path[PATH_CAP];
    path_of(path, "index");
    uint8_t *buf;
    size_t len;
    cr_assert_eq(testds_read_file(path, &buf, &len), 0);
    cr_log_info("index of %zu bytes", len);
    static const uint8_t masks[] = {0x01, 0xff};
    for (size_t i = 0; i < len; i++) {
        for (size_t m = 0; m < sizeof(masks); m++) {
            buf[i] ^= masks[m];
            cr_assert_eq(testds_write_file(path, buf, len), 0);
            hdmlp_dataset *ds = NULL;
            const int rc = hdmlp_dataset_open(g_dir, &ds);
            cr_assert(rc == HDMLP_E_CORRUPT || rc == HDMLP_E_VERSION,
                      "byte %zu ^ 0x%02x: rc %d (%s)", i, masks[m], rc, hdmlp_last_error());
            cr_assert_null(ds);
            cr_assert(strstr(hdmlp_last_error(), "index"), "%s", hdmlp_last_error());
            buf[i] ^= masks[m];
        }
    }
    cr_assert_eq(testds_write_file(path, buf, len), 0);
    hdmlp_dataset_close(open_ok());
    free(buf);
}

Test(dataset, truncated_index)
{
    write_ds(&small_spec);
    char path[PATH_CAP];
    path_of(path, "index");
    uint8_t *buf;
    size_t len;
    cr_assert_eq(testds_read_file(path, &buf, &len), 0);
    const size_t cuts[] = {1, 11, 12, 100, 256, 271, 272, len / 2, len - 16, len - 8, len - 1};
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
        cr_assert_eq(testds_write_file(path, buf, cuts[k]), 0);
        hdmlp_dataset *ds = NULL;
        cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT, "cut at %zu", cuts[k]);
        cr_assert(strstr(hdmlp_last_error(), "index"), "%s", hdmlp_last_error());
    }
    free(buf);
}

Test(dataset, unknown_major_version)
{
    write_ds(&small_spec);
    char path[PATH_CAP];
    path_of(path, "index");
    uint8_t *buf;
    size_t len;
    cr_assert_eq(testds_read_file(path, &buf, &len), 0);
    fmt_st16(buf + 8, 2);
    testds_reseal_index(buf, len);
    cr_assert_eq(testds_write_file(path, buf, len), 0);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_VERSION);
    cr_assert(strstr(hdmlp_last_error(), "version 2.0"), "%s", hdmlp_last_error());
    /* A newer minor of the same major is accepted. */
    fmt_st16(buf + 8, 1);
    fmt_st16(buf + 10, 7);
    testds_reseal_index(buf, len);
    cr_assert_eq(testds_write_file(path, buf, len), 0);
    hdmlp_dataset_close(open_ok());
    free(buf);
}

Test(dataset, missing_segment_file)
{
    write_ds(&small_spec);
    hdmlp_dataset_close(open_ok());
    char path[PATH_CAP];
    path_of(path, "segment-000001");
    cr_assert_eq(unlink(path), 0);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "segment-000001"), "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "missing"), "%s", hdmlp_last_error());
}

Test(dataset, truncated_or_grown_segment_file)
{
    write_ds(&small_spec);
    char path[PATH_CAP];
    path_of(path, "segment-000000");
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(truncate(path, st.st_size - 1), 0);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "segment-000000"), "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "truncated"), "%s", hdmlp_last_error());
    cr_assert_eq(truncate(path, st.st_size + 4096), 0);
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "segment-000000"), "%s", hdmlp_last_error());
    cr_assert_eq(truncate(path, st.st_size), 0);
    hdmlp_dataset_close(open_ok());
}

/* ---- chunk corruption -------------------------------------------------------------------- */

/* Flips every byte of chunk 1 (header and payload) in turn; verify must fail naming the
 * chunk, and reading any sample of the chunk must give the right bytes or HDMLP_E_CORRUPT —
 * and the sample holding a flipped payload byte must fail. */
static void chunk_flips(int compress)
{
    testds_spec spec = small_spec;
    spec.compress = compress;
    spec.min_size = 1;
    spec.max_size = 40;
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    const uint64_t c = 1;
    fmt_chunk ch;
    fmt_index_chunk(&ds->ix, c, &ch);
    char path[PATH_CAP];
    ds_segment_path(ds, ch.segment, path, sizeof(path));
    const int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    cr_log_info("chunk %llu: %llu bytes at %llu in %s", (unsigned long long)c,
                (unsigned long long)ch.length, (unsigned long long)ch.offset, path);
    uint8_t want[64], got[64];
    static const uint8_t masks[] = {0x01, 0xff};
    for (uint64_t b = 0; b < ch.length; b++) {
        for (size_t m = 0; m < sizeof(masks); m++) {
            uint8_t orig;
            cr_assert_eq(pread(fd, &orig, 1, (off_t)(ch.offset + b)), 1);
            const uint8_t bad = orig ^ masks[m];
            cr_assert_eq(pwrite(fd, &bad, 1, (off_t)(ch.offset + b)), 1);

            cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_E_CORRUPT,
                         "byte %llu ^ 0x%02x", (unsigned long long)b, masks[m]);
            cr_assert(strstr(hdmlp_last_error(), "segment-000000"), "%s", hdmlp_last_error());
            cr_assert(strstr(hdmlp_last_error(), "chunk 1"), "%s", hdmlp_last_error());
            for (uint32_t j = 0; j < ch.n_samples; j++) {
                const uint64_t i = c * spec.chunk_size + j;
                fmt_sample s;
                fmt_index_sample(&ds->ix, i, &s);
                const bool hit = b >= s.offset && b < s.offset + s.stored_len;
                const size_t n = testds_size(&spec, i);
                testds_fill(i, spec.seed, want, n);
                size_t size;
                const int rc = hdmlp_dataset_read_sample(ds, i, got, sizeof(got), &size);
                if (hit) {
                    cr_assert_eq(rc, HDMLP_E_CORRUPT, "byte %llu: sample %llu",
                                 (unsigned long long)b, (unsigned long long)i);
                    char expect[64];
                    snprintf(expect, sizeof(expect), "sample %llu", (unsigned long long)i);
                    cr_assert(strstr(hdmlp_last_error(), expect), "%s", hdmlp_last_error());
                    cr_assert(strstr(hdmlp_last_error(), "chunk 1"), "%s", hdmlp_last_error());
                    cr_assert(strstr(hdmlp_last_error(), "segment-000000"), "%s",
                              hdmlp_last_error());
                } else {
                    cr_assert_eq(rc, HDMLP_OK, "%s", hdmlp_last_error());
                    cr_assert_eq(size, n);
                    cr_assert_eq(memcmp(want, got, n), 0);
                }
            }
            cr_assert_eq(pwrite(fd, &orig, 1, (off_t)(ch.offset + b)), 1);
        }
    }
    close(fd);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK);
    hdmlp_dataset_close(ds);
}

Test(dataset, chunk_every_byte_flip_detected_raw) { chunk_flips(0); }

Test(dataset, chunk_every_byte_flip_detected_zstd) { chunk_flips(1); }

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
