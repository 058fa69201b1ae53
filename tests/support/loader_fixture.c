/*
 * Fixtures shared by the loader API tests (see loader_fixture.h): the suites and their
 * temporary dataset directories, datasets, configs, loaders, and checks.
 */
#include "support/loader_fixture.h"

#include <criterion/criterion.h>

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

testds_spec small_spec(void)
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

hdmlp_dataset *make_dataset(const testds_spec *spec, char *dir, size_t cap)
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

hdmlp_config *new_config(uint64_t memory, uint32_t batch, uint64_t epochs)
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

hdmlp_loader *new_loader(hdmlp_dataset *ds, hdmlp_config *cfg)
{
    hdmlp_loader *ld = NULL;
    const int rc = hdmlp_loader_create(ds, cfg, &ld);
    cr_assert_eq(rc, HDMLP_OK, "create: %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_not_null(ld);
    hdmlp_config_free(cfg);
    return ld;
}

/* Whether msg (case-insensitively) contains word. */
int mentions(const char *msg, const char *word)
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
int mentions_number(const char *msg, const char *word, uint64_t number)
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
void expect_view(hdmlp_dataset *ds, const testds_spec *spec, const hdmlp_sample_view *v)
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
