/*
 * Fixtures of the packed-dataset tests (see dataset_fixture.h).
 */
#include "support/dataset_fixture.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char g_dir[2048];

static void make_dir(void)
{
    cr_assert_eq(testds_mkdtemp("dataset", g_dir, sizeof(g_dir)), 0, "mkdtemp");
}

static void remove_dir(void) { testds_rm_rf(g_dir); }

TestSuite(dataset, .init = make_dir, .fini = remove_dir, .timeout = 60);

void write_ds(const testds_spec *spec)
{
    cr_log_info("dataset seed %llu: N=%llu K=%u per-segment=%u sizes %u..%u compress=%d "
                "dict=%d",
                (unsigned long long)spec->seed, (unsigned long long)spec->n_samples,
                spec->chunk_size, spec->chunks_per_segment, spec->min_size, spec->max_size,
                spec->compress, spec->dict);
    cr_assert_eq(testds_write(g_dir, spec), HDMLP_OK, "testds_write: %s", hdmlp_last_error());
}

hdmlp_dataset *open_ok(void)
{
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_OK, "open: %s", hdmlp_last_error());
    cr_assert_not_null(ds);
    return ds;
}

void path_of(char *buf, const char *name) { snprintf(buf, PATH_CAP, "%s/%s", g_dir, name); }

/* Reads every sample and compares it with testds_fill. */
void check_all_samples(hdmlp_dataset *ds, const testds_spec *spec)
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
