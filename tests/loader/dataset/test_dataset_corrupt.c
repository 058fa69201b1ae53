/* Packed datasets on disk: opening what is not a (valid) dataset (missing, foreign,
 * truncated or damaged index, unknown major version, missing or resized segment files)
 * and chunk corruption (every byte flip detected). Part of the test_dataset binary. */
#include "loader_dataset.h"
#include "support/dataset_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    const uint16_t major = fmt_ld16(buf + 8); /* 1 and 2 are read */
    fmt_st16(buf + 8, 3);
    testds_reseal_index(buf, len);
    cr_assert_eq(testds_write_file(path, buf, len), 0);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_VERSION);
    cr_assert(strstr(hdmlp_last_error(), "version 3.0"), "%s", hdmlp_last_error());
    /* A newer minor of the same major is accepted. */
    fmt_st16(buf + 8, major);
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
                fmt_sample s; /* either version's record, through the table source */
                cr_assert_eq(ds_sample_record(ds, i, &s), HDMLP_OK, "%s", hdmlp_last_error());
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
