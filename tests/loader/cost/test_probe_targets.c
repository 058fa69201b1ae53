/*
 * Storage probe tests, targets other than one file: a directory (a scratch file, left
 * nowhere, also when the probe fails; missing or not a directory), a dataset's segments
 * (too small, missing), and this machine's disk, printed for the record. Part of the
 * test_probe binary.
 */
#include "hdmlp.h"
#include "loader_probe.h"
#include "support/probe_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "opendir(%s): %s", dir, strerror(errno));
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            n++;
        }
    }
    closedir(d);
    return n;
}

Test(probe, directory_probe_leaves_nothing_behind, .timeout = 60)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("probe-dir", dir, sizeof(dir)), 0);
    probe_limits lim;
    probe_limits_default(&lim);
    probe_result r;
    const double t0 = now_s();
    const int rc = probe_directory(dir, &lim, &r);
    const double wall = now_s() - t0;
    cr_assert_eq(rc, HDMLP_OK, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    check_sane(&r, &lim, wall);
    cr_assert_not_null(strstr(r.text, dir));
    cr_assert_eq(dir_entries(dir), 0, "the scratch file is left in %s", dir);
    cr_log_info("%s", r.text);
    /* A failed probe leaves nothing either: the scratch file cannot fit the time, but the
     * byte limit is tiny and the file is still removed. */
    lim.max_seconds = 0.001;
    lim.max_bytes = PROBE_MIN_FILE;
    lim.scratch_bytes = PROBE_MIN_FILE;
    cr_assert_eq(probe_directory(dir, &lim, &r), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(dir_entries(dir), 0);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

Test(probe, directory_errors, .timeout = 30)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("probe-err", dir, sizeof(dir)), 0);
    char missing[600];
    snprintf(missing, sizeof(missing), "%s/missing", dir);
    probe_result r;
    int rc = probe_directory(missing, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_NOTFOUND, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), missing), "%s", hdmlp_last_error());
    cr_assert_eq(testds_write_file(missing, "x", 1), 0);
    rc = probe_directory(missing, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_NOTFOUND, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), "not a directory"), "%s", hdmlp_last_error());
    cr_assert_eq(dir_entries(dir), 1);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

static hdmlp_dataset *dataset_make(const char *tag, uint32_t chunks_per_segment, char *dir,
                                   size_t cap)
{
    cr_assert_eq(testds_mkdtemp(tag, dir, cap), 0);
    const testds_spec spec = {3000, 16, chunks_per_segment, 77, 500, 1500, 0, 0, 3, 0};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    return ds;
}

Test(probe, dataset_probe, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = dataset_make("probe-ds", 0, dir, sizeof(dir));
    probe_limits lim;
    probe_limits_default(&lim);
    for (int direct = 0; direct < 2; direct++) {
        probe_result r;
        const double t0 = now_s();
        const int rc = probe_dataset(ds, direct, &lim, &r);
        const double wall = now_s() - t0;
        cr_assert_eq(rc, HDMLP_OK, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
        check_sane(&r, &lim, wall);
        cr_assert_eq(strncmp(r.text, dir, strlen(dir)), 0, "%s", r.text);
        cr_log_info("direct=%d: %s", direct, r.text);
    }
    /* The dataset still reads (the probe only read and dropped cache pages). */
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

Test(probe, dataset_of_small_segments_gives_range_error, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = dataset_make("probe-small", 1, dir, sizeof(dir)); /* ~16 KiB each */
    probe_result r;
    const int rc = probe_dataset(ds, 0, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_RANGE, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), dir), "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

Test(probe, dataset_missing_segment_names_it, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = dataset_make("probe-miss", 0, dir, sizeof(dir));
    char seg[600];
    snprintf(seg, sizeof(seg), "%s/segment-000000", dir);
    cr_assert_eq(unlink(seg), 0);
    probe_result r;
    const int rc = probe_dataset(ds, 0, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_NOTFOUND, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), seg), "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

/* This machine's disk: figures printed (stderr) for the record. */
Test(probe, this_machine, .timeout = 60)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("probe-disk", dir, sizeof(dir)), 0);
    probe_limits lim;
    probe_limits_default(&lim);
    for (int i = 0; i < 3; i++) {
        probe_result r;
        lim.seed = (uint64_t)i + 1;
        const int rc = probe_directory(dir, &lim, &r);
        cr_assert_eq(rc, HDMLP_OK, "%s", hdmlp_last_error());
        fprintf(stderr, "probe (disk, seed %d): %s; median 4 KiB %.1f us\n", i + 1, r.text,
                r.small_median_us);
    }
    cr_assert_eq(testds_rm_rf(dir), 0);
}
