/*
 * The object-store client against a server as strict as S3 and against the faults a real
 * network adds (tests/objstore/objstore_server.py): every signed request also signed by
 * botocore the same way; a region other than the server's refused with S3's error; an
 * endpoint naming its scheme's default port, virtual-hosted style and keys with dot
 * segments signed as sent; answers for another range retried; an index cut short without
 * Content-Length fetched again; an object ending inside the range asked for named as
 * shorter than the index says, at once; a server dripping a byte a second failed within a
 * minute with the default limits, naming the URL and the stall. Part of the test_objstore
 * binary.
 */
#include "hdmlp.h"
#include "loader_source.h"
#include "support/objstore_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every request the server saw signed was signed by botocore identically. */
static void assert_botocore_agreed(const objstore_server *s, long at_least)
{
    const long checked = objstore_server_stat(s, "botocore_checked");
    const long mismatch = objstore_server_stat(s, "botocore_mismatch");
    cr_assert_eq(mismatch, 0, "%ld of %ld requests signed otherwise than botocore signs them",
                 mismatch, checked);
    cr_assert_geq(checked, at_least, "botocore checked %ld requests", checked);
}

Test(objstore_strict, wrong_signature_and_region_are_named, .timeout = 60)
{
    objstore_server s = {0};
    const char *const args[] = {"--s3", "--botocore-check", NULL};
    objstore_start_py(&s, args);
    hdmlp_dataset *ds = NULL;
    /* A wrong secret: a signature mismatch with the canonical request's hash, not a
     * credentials hint. */
    hdmlp_source_config *c = objstore_s3_config(&s, "not/the/secret");
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_E_IO);
    const char *e = hdmlp_last_error();
    cr_assert(strstr(e, "signature mismatch") != NULL, "%s", e);
    cr_assert(strstr(e, "SignatureDoesNotMatch") != NULL, "%s", e);
    cr_assert(strstr(e, "canonical request SHA-256 ") != NULL, "%s", e);
    cr_assert(strstr(e, "/bucket/ds/index") != NULL, "%s", e);
    cr_assert(strstr(e, "check the credentials") == NULL, "%s", e);
    hdmlp_source_config_free(c);
    /* An unknown key id: that one is a credentials problem. */
    c = objstore_s3_config(&s, "hdmlp/test/secret");
    cr_assert_eq(hdmlp_source_config_set_credentials(c, "nosuchkey", "x", NULL), HDMLP_OK);
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "InvalidAccessKeyId") != NULL, "%s",
              hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "check the credentials") != NULL, "%s",
              hdmlp_last_error());
    hdmlp_source_config_free(c);
    /* Another region than the server's: refused as S3 refuses it. */
    c = objstore_s3_config(&s, "hdmlp/test/secret");
    cr_assert_eq(hdmlp_source_config_set_region(c, "eu-west-1"), HDMLP_OK);
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "AuthorizationHeaderMalformed") != NULL, "%s",
              hdmlp_last_error());
    cr_assert_null(ds);
    cr_assert_eq(objstore_server_stat(&s, "rejected_region"), 1);
    hdmlp_source_config_free(c);
    objstore_stop(&s);
}

/* Upload and read back at an endpoint naming port 80, in virtual-hosted style, under a
 * prefix with dot segments (a key of its own, as in S3): every request accepted by the
 * strict server and signed as botocore signs it. */
Test(objstore_strict, default_port_virtual_hosted_and_dot_segments, .timeout = 120)
{
    if (!objstore_port_free(80)) {
        cr_skip_test("127.0.0.1:80 is taken or not bindable here: the default-port endpoint "
                     "cannot be served");
    }
    objstore_server s = {0};
    const char *const args[] = {
        "--s3", "--botocore-check", "--dns-name", "localhost", "--also-port", "80", NULL};
    objstore_start_py(&s, args);
    char dir[700];
    snprintf(dir, sizeof(dir), "%s/bucket/ds", s.dir);
    hdmlp_source_config *c = objstore_s3_config(&s, "hdmlp/test/secret");
    cr_assert_eq(hdmlp_source_config_set_endpoint(c, "http://127.0.0.1:80"), HDMLP_OK);
    const char *const prefixes[] = {"s3://bucket/x/../y", "s3://bucket/y/./set"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(hdmlp_dataset_upload(dir, prefixes[i], c, NULL, NULL), HDMLP_OK, "%s",
                     hdmlp_last_error());
    }
    /* The keys are literal: "x/../y" is not "y". */
    char path[800];
    snprintf(path, sizeof(path), "%s/bucket/x/%%2E%%2E/y/index", s.dir);
    cr_assert_eq(access(path, F_OK), 0, "no object under the literal key x/../y/index");
    snprintf(path, sizeof(path), "%s/bucket/y/index", s.dir);
    cr_assert_neq(access(path, F_OK), 0);
    for (int style = 1; style >= 0; style--) {
        cr_assert_eq(hdmlp_source_config_set_path_style(c, style), HDMLP_OK);
        cr_assert_eq(hdmlp_source_config_set_endpoint(c, style ? "http://127.0.0.1:80"
                                                               : "http://LocalHost:80/"),
                     HDMLP_OK);
        for (int i = 0; i < 2; i++) {
            hdmlp_dataset *ds = NULL;
            cr_assert_eq(hdmlp_dataset_open_source(prefixes[i], c, &ds), HDMLP_OK,
                         "%s (path style %d): %s", prefixes[i], style, hdmlp_last_error());
            objstore_same_as_local(&s, ds, HDMLP_REFILL_AUTO);
            hdmlp_dataset_close(ds);
        }
    }
    hdmlp_source_config_free(c);
    assert_botocore_agreed(&s, 50);
    objstore_stop(&s);
}

/* A 206 carrying another range's bytes (and saying so) is asked again, like a cut body:
 * the epochs complete with every sample once, bytes checked. */
Test(objstore_strict, wrong_content_range_is_retried_exactly_once, .timeout = 120)
{
    objstore_server s = {0};
    const char *const args[] = {"--s3", "--botocore-check", "--fault", "badrange:4", NULL};
    objstore_start_py(&s, args);
    hdmlp_source_config *c = objstore_s3_config(&s, "hdmlp/test/secret");
    cr_assert_eq(hdmlp_source_config_set_retries(c, 20), HDMLP_OK);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_OK, "%s",
                 hdmlp_last_error());
    hdmlp_source_config_free(c);
    objstore_same_as_local(&s, ds, HDMLP_REFILL_RANGES);
    cr_assert_gt(objstore_server_stat(&s, "fault_badrange"), 0);
    hdmlp_dataset_close(ds);
    assert_botocore_agreed(&s, 20);
    objstore_stop(&s);
}

/* Once only: the retry gets the range asked for. Every time: the read fails naming the
 * range answered, never delivering another range's bytes. */
Test(objstore_strict, wrong_content_range_every_time_fails_with_the_range, .timeout = 60)
{
    objstore_server s = {0};
    const char *const args[] = {"--fault", "badrange:1", NULL};
    objstore_start_py(&s, args);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    hdmlp_source_config *c = NULL;
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_retries(c, 2), HDMLP_OK);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, c, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    uint8_t buf[4096];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 3, buf, sizeof(buf), &size), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "another range (Content-Range: bytes ") != NULL, "%s",
              hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "after 3 attempts") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), url) != NULL, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
}

/* An index answered without Content-Length and cut short is fetched again before it is
 * called corrupt; cut every time, it is corrupt, saying how often it was fetched. */
Test(objstore_strict, index_cut_without_length_is_fetched_again, .timeout = 60)
{
    objstore_server s = {0};
    const char *const once[] = {"--s3", "--fault", "indexcut:1:1", NULL};
    objstore_start_py(&s, once);
    hdmlp_source_config *c = objstore_s3_config(&s, "hdmlp/test/secret");
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert_eq(objstore_server_stat(&s, "fault_indexcut"), 1);
    cr_assert_eq(objstore_server_stat(&s, "index_gets"), 2);
    objstore_same_as_local(&s, ds, HDMLP_REFILL_AUTO);
    hdmlp_dataset_close(ds);
    hdmlp_source_config_free(c);
    objstore_stop(&s);

    const char *const always[] = {"--s3", "--fault", "indexcut:1", NULL};
    objstore_start_py(&s, always);
    c = objstore_s3_config(&s, "hdmlp/test/secret");
    cr_assert_eq(hdmlp_source_config_set_retries(c, 2), HDMLP_OK);
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "3 fetches") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "/index") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(objstore_server_stat(&s, "index_gets"), 3);
    hdmlp_source_config_free(c);
    objstore_stop(&s);
}

/* A server sending a byte a second never goes silent, yet is stuck: with the default
 * limits (low-speed 1 KiB/s over 10 s, 4 retries) a read fails within a minute, naming
 * the URL and the stall. */
Test(objstore_strict, dripping_server_fails_within_a_minute_by_default, .timeout = 120)
{
    objstore_server s = {0};
    const char *const args[] = {"--fault", "drip:1", NULL};
    objstore_start_py(&s, args);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, NULL, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    uint8_t buf[4096];
    size_t size = 0;
    const double t0 = objstore_now_s();
    const int rc = hdmlp_dataset_read_sample(ds, 3, buf, sizeof(buf), &size);
    const double took = objstore_now_s() - t0;
    cr_log_info("a 1 byte/s server failed the read after %.1f s: %s", took, hdmlp_last_error());
    cr_assert_eq(rc, HDMLP_E_TIMEOUT, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_leq(took, 60.0, "took %.1f s", took);
    cr_assert(strstr(hdmlp_last_error(), "stalled") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), url) != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "after 5 attempts") != NULL, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
}

/* The request deadline covers the retries: a dripping server with a 3 s deadline, a 1 s
 * low-speed window and 20 retries fails at the deadline, not after 20 windows. */
Test(objstore_strict, request_deadline_covers_the_retries, .timeout = 60)
{
    objstore_server s = {0};
    const char *const args[] = {"--fault", "drip:1", NULL};
    objstore_start_py(&s, args);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    hdmlp_source_config *c = NULL;
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_timeouts(c, 2000, 1000, 3000), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_retries(c, 20), HDMLP_OK);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, c, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    uint8_t buf[4096];
    size_t size = 0;
    const double t0 = objstore_now_s();
    const int rc = hdmlp_dataset_read_sample(ds, 3, buf, sizeof(buf), &size);
    const double took = objstore_now_s() - t0;
    cr_assert_eq(rc, HDMLP_E_TIMEOUT, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_lt(took, 5.0, "took %.1f s", took);
    cr_assert(strstr(hdmlp_last_error(), "deadline of 3000 ms") != NULL, "%s",
              hdmlp_last_error());
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
}

/* A 206 whose Content-Range ends the object inside the range asked for: the object is
 * shorter than the index says (HDMLP_E_CORRUPT at once, not retried as a cut body). */
Test(objstore_strict, object_ending_inside_the_range_is_corrupt, .timeout = 60)
{
    objstore_server s = {0};
    objstore_start_py(&s, NULL);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    src_store *st = NULL;
    src_conn *c = NULL;
    cr_assert_eq(src_store_open(url, NULL, &st), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(src_conn_create(st, 2, &c), HDMLP_OK, "%s", hdmlp_last_error());
    const char *name = "segment-000000";
    uint64_t size = 0;
    cr_assert_eq(src_conn_sizes(c, &name, &size, 1), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_gt(size, 200);
    uint8_t buf[100];
    const src_range inside = {name, size - 100, 100, buf};
    cr_assert_eq(src_conn_read(c, &inside, 1), HDMLP_OK, "%s", hdmlp_last_error());
    const src_range past = {name, size - 10, 100, buf};
    const uint64_t before = src_conn_requests(c);
    cr_assert_eq(src_conn_read(c, &past, 1), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "ends inside the range") != NULL, "%s",
              hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "Content-Range: bytes ") != NULL, "%s",
              hdmlp_last_error());
    cr_assert_eq(src_conn_requests(c) - before, 1, "not retried");
    src_conn_free(c);
    src_store_free(st);
    objstore_stop(&s);
}
