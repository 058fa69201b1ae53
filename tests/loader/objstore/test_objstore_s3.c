/*
 * Datasets in the suite's object store, tests/objstore/objstore_server.py on 127.0.0.1: S3
 * with SigV4 checked on every request, fault injection (503s, dropped connections, cut
 * bodies, stalls) and multipart upload. Part of the test_objstore binary (see
 * test_objstore.c); skips where python3 is missing.
 */
#include "hdmlp.h"
#include "support/objstore_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(objstore, s3_sigv4_exactly_once_local_order, .timeout = 120)
{
    objstore_server s = {0};
    const char *const args[] = {"--s3", "--botocore-check", NULL};
    objstore_start_py(&s, args);
    hdmlp_source_config *c = objstore_s3_config(&s, "hdmlp/test/secret");
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_OK, "%s",
                 hdmlp_last_error());
    objstore_same_as_local(&s, ds, HDMLP_REFILL_AUTO);
    hdmlp_dataset_close(ds);
    /* Kept-alive connections: far fewer connections than requests. */
    const long conns = objstore_server_stat(&s, "connections"),
               reqs = objstore_server_stat(&s, "requests");
    cr_assert_gt(reqs, 100);
    cr_assert_lt(conns * 5, reqs, "%ld connections for %ld requests", conns, reqs);
    /* botocore's S3SigV4Auth signs each of them the same way. */
    cr_assert_eq(objstore_server_stat(&s, "botocore_mismatch"), 0);
    /* (reqs counts the two /_stats requests above) */
    cr_assert_geq(objstore_server_stat(&s, "botocore_checked"), reqs - 2);
    /* A missing bucket or prefix: 404 naming the URL. */
    cr_assert_eq(hdmlp_dataset_open_source("s3://nobucket/ds", c, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "NoSuchBucket") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/nods", c, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "/bucket/nods/index") != NULL, "%s",
              hdmlp_last_error());
    hdmlp_source_config_free(c);
    /* Wrong secret: the server recomputes the signature and refuses it at once. */
    c = objstore_s3_config(&s, "not/the/secret");
    const double t0 = objstore_now_s();
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_E_IO);
    cr_assert_lt(objstore_now_s() - t0, 5.0, "a 403 is not retried");
    cr_assert(strstr(hdmlp_last_error(), "SignatureDoesNotMatch") != NULL, "%s",
              hdmlp_last_error());
    cr_assert_null(ds);
    hdmlp_source_config_free(c);
    /* No credentials at all. */
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", s.port);
    hdmlp_source_config_set_endpoint(c, ep);
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "AccessDenied") != NULL, "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    objstore_stop(&s);
}

/* 503s, dropped connections and cut bodies are retried: the run is exact. */
Test(objstore, faults_are_retried_exactly_once, .timeout = 120)
{
    objstore_server s = {0};
    const char *const args[] = {"--s3", "--fault", "503:5,drop:7,truncate:11", NULL};
    objstore_start_py(&s, args);
    hdmlp_source_config *c = objstore_s3_config(&s, "hdmlp/test/secret");
    cr_assert_eq(hdmlp_source_config_set_retries(c, 20), HDMLP_OK);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_OK, "%s",
                 hdmlp_last_error());
    hdmlp_source_config_free(c);
    objstore_same_as_local(&s, ds, HDMLP_REFILL_RANGES);
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
}

/* Retries are bounded: with every segment GET failing, the loader fails with the URL. */
Test(objstore, persistent_faults_fail_with_the_url, .timeout = 60)
{
    objstore_server s = {0};
    const char *const args[] = {"--fault", "503:1", NULL};
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
    cr_assert(strstr(hdmlp_last_error(), "503") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "after 3 attempts") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), url) != NULL, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
}

/* A server that stops sending mid-body: a timeout error within the configured limits. */
Test(objstore, stalled_server_times_out, .timeout = 60)
{
    objstore_server s = {0};
    const char *const args[] = {"--fault", "stall:1", "--stall-seconds", "60", NULL};
    objstore_start_py(&s, args);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    hdmlp_source_config *c = NULL;
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_timeouts(c, 2000, 1000, 5000), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_retries(c, 1), HDMLP_OK);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, c, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
    hdmlp_config_set_memory_raise(cfg, 1); /* a quarter of the data, or the least that works */
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    const double t0 = objstore_now_s();
    hdmlp_batch *b = NULL;
    const int rc = hdmlp_loader_next(ld, &b);
    cr_assert_eq(rc, HDMLP_E_TIMEOUT, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_lt(objstore_now_s() - t0, 15.0);
    cr_assert(strstr(hdmlp_last_error(), "segment-") != NULL, "%s", hdmlp_last_error());
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
}

static void on_upload(void *arg, uint64_t done, uint64_t total)
{
    uint64_t *last = arg;
    cr_assert_geq(done, last[0]);
    cr_assert_leq(done, total);
    last[0] = done;
    last[1] = total;
    last[2]++;
}

/* Upload: segments (multipart above the part size), the index last; the copy reads as the
 * original; refused for http(s) and with a wrong secret. */
Test(objstore, upload_multipart_then_read, .timeout = 120)
{
    objstore_cur = &objstore_big;
    objstore_mem_div = 2; /* large samples: 25 % holds too few chunks */
    objstore_server s = {0};
    const char *const args[] = {"--s3", "--botocore-check", NULL};
    objstore_start_py(&s, args);
    char dir[700];
    snprintf(dir, sizeof(dir), "%s/bucket/ds", s.dir);
    hdmlp_source_config *c = objstore_s3_config(&s, "hdmlp/test/secret");
    cr_assert_eq(hdmlp_source_config_set_part_size(c, 1000), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_set_part_size(c, 5u << 20), HDMLP_OK);
    uint64_t seen[3] = {0, 0, 0};
    cr_assert_eq(hdmlp_dataset_upload(dir, "s3://bucket/copy", c, on_upload, seen), HDMLP_OK,
                 "%s", hdmlp_last_error());
    cr_assert_eq(seen[0], seen[1], "progress ends at the total");
    cr_assert_geq(seen[2], 2, "a wave of parts, then the index");
    char uploads[700];
    snprintf(uploads, sizeof(uploads), "%s/.uploads", s.dir);
    cr_assert_eq(access(uploads, F_OK), 0, "the segment went as a multipart upload");
    char copy[700], orig[700];
    snprintf(copy, sizeof(copy), "%s/bucket/copy/segment-000000", s.dir);
    snprintf(orig, sizeof(orig), "%s/bucket/ds/segment-000000", s.dir);
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    cr_assert_eq(testds_read_file(copy, &a, &la), 0);
    cr_assert_eq(testds_read_file(orig, &b, &lb), 0);
    cr_assert_gt(lb, (size_t)(10u << 20));
    cr_assert(la == lb && memcmp(a, b, la) == 0, "uploaded segment differs");
    free(a);
    free(b);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/copy", c, &ds), HDMLP_OK, "%s",
                 hdmlp_last_error());
    objstore_same_as_local(&s, ds, HDMLP_REFILL_AUTO);
    /* --calibrate probes the store with range GETs (its 11 MiB segment is large enough). */
    hdmlp_config *lc = NULL;
    hdmlp_config_create(&lc);
    hdmlp_config_set_memory(lc, hdmlp_dataset_raw_bytes(ds) / 2);
    hdmlp_config_set_batch_size(lc, 16);
    cr_assert_eq(hdmlp_config_set_calibrate(lc, 1), HDMLP_OK);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, lc, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_stats st;
    hdmlp_loader_stats(ld, &st, sizeof st);
    cr_assert_eq(st.calibrated, 1);
    cr_assert_gt(st.source_op_ns_start, 0);
    cr_assert_gt(st.source_bytes_per_s_start, 0);
    hdmlp_loader_free(ld);
    hdmlp_config_free(lc);
    hdmlp_dataset_close(ds);
    /* Uploading again replaces the copy (the old index goes first). */
    cr_assert_eq(hdmlp_dataset_upload(dir, "s3://bucket/copy", c, NULL, NULL), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_upload(dir, "http://127.0.0.1:1/x", c, NULL, NULL),
                 HDMLP_E_UNSUPPORTED);
    hdmlp_source_config_free(c);
    c = objstore_s3_config(&s, "not/the/secret");
    cr_assert_eq(hdmlp_dataset_upload(dir, "s3://bucket/other", c, NULL, NULL), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "SignatureDoesNotMatch") != NULL, "%s",
              hdmlp_last_error());
    hdmlp_source_config_free(c);
    snprintf(copy, sizeof(copy), "%s/bucket/other/index", s.dir);
    cr_assert_neq(access(copy, F_OK), 0, "no index after a failed upload");
    /* PUT, multipart (POST ?uploads, PUT ?partNumber&uploadId, POST ?uploadId), DELETE,
     * HEAD and GET: each signed as botocore signs it. */
    cr_assert_eq(objstore_server_stat(&s, "botocore_mismatch"), 0);
    cr_assert_gt(objstore_server_stat(&s, "botocore_checked"), 50);
    objstore_stop(&s);
    objstore_cur = &objstore_spec;
    objstore_mem_div = 4;
}
