/*
 * Loader API tests, errors: corrupt samples and chunk headers (whole and ranged refill,
 * compressed), a batch held across an error, a segment deleted or truncated after open;
 * each error names what is wrong and every batch before it is intact. Part of the
 * test_loader binary (fixtures: support/loader_fixture.h).
 */
#include "hdmlp.h"
#include "support/loader_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
