/*
 * Datasets in object storage, against real servers on 127.0.0.1 started by the tests:
 * nginx (range GETs over HTTP and HTTPS with the committed test CA) here, the suite's
 * object store (S3, fault injection, upload) in test_objstore_s3.c, the servers in
 * support/objstore_fixture.c. Each run delivers every sample exactly once with the bytes
 * checked, in the local dataset's order for the seed; bad credentials, missing objects,
 * truncated objects, dropped connections, 503s, cut bodies and stalled servers give a retry
 * or a clear error naming the URL, never a hang or a wrong sample. Tests skip (saying why)
 * where nginx or python3 is missing.
 */
#include "hdmlp.h"
#include "support/objstore_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

Test(objstore, http_nginx_exactly_once_local_order, .timeout = 120)
{
    objstore_server s = {0};
    int tls = 0;
    objstore_start_nginx(&s, &tls);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds/", s.port);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_sample_count(ds), objstore_spec.n_samples);
    objstore_same_as_local(&s, ds, HDMLP_REFILL_WHOLE);
    objstore_same_as_local(&s, ds, HDMLP_REFILL_RANGES);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    /* One sample alone, through the dataset's own connection. */
    uint8_t buf[4096], want[4096];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 17, buf, sizeof(buf), &size), HDMLP_OK, "%s",
                 hdmlp_last_error());
    testds_fill(17, objstore_spec.seed, want, size);
    cr_assert_eq(memcmp(buf, want, size), 0);
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
}

Test(objstore, https_nginx_with_the_test_ca, .timeout = 120)
{
    objstore_server s = {0};
    int tls = 0;
    objstore_start_nginx(&s, &tls);
    char url[128], ca[600];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/bucket/ds", tls);
    snprintf(ca, sizeof(ca), "%s/tests/data/tls/ca.pem", HDMLP_SOURCE_DIR);
    hdmlp_source_config *c = NULL;
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    /* Without the test CA the server's certificate is refused, naming the URL. */
    hdmlp_dataset *ds = NULL;
    int rc = hdmlp_dataset_open_source(url, c, &ds);
    cr_assert_eq(rc, HDMLP_E_IO, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), url) != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_source_config_set_ca_file(c, ca), HDMLP_OK);
    rc = hdmlp_dataset_open_source(url, c, &ds);
    cr_assert_eq(rc, HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    objstore_same_as_local(&s, ds, HDMLP_REFILL_AUTO);
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
}

Test(objstore, http_missing_and_truncated_objects, .timeout = 60)
{
    objstore_server s = {0};
    int tls = 0;
    objstore_start_nginx(&s, &tls);
    char url[128], path[700];
    hdmlp_dataset *ds = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/none", s.port);
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "404") != NULL, "%s", hdmlp_last_error());
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    /* A segment cut short: refused at open, naming the segment's URL. */
    snprintf(path, sizeof(path), "%s/bucket/ds/segment-000002", s.dir);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(truncate(path, st.st_size - 100), 0);
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "segment-000002") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "truncated") != NULL, "%s", hdmlp_last_error());
    /* A segment missing. */
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "segment-000002") != NULL, "%s", hdmlp_last_error());
    cr_assert_null(ds);
    objstore_stop(&s);
}

/* The SSD tier caches remote chunks: after the first epoch nothing comes from the store. */
Test(objstore, ssd_tier_caches_remote_chunks, .timeout = 120)
{
    objstore_server s = {0};
    int tls = 0;
    objstore_start_nginx(&s, &tls);
    char url[128], ssd[700];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    snprintf(ssd, sizeof(ssd), "%s/ssd", s.dir);
    cr_assert_eq(mkdir(ssd, 0755), 0);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
    hdmlp_config_set_epochs(cfg, 3);
    hdmlp_config_set_batch_size(cfg, 16);
    hdmlp_config_set_seed(cfg, 7);
    cr_assert_eq(hdmlp_config_set_ssd_cache(cfg, ssd, 64u << 20), HDMLP_OK);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    testds_seq seq = {0};
    cr_assert_eq(testds_drain(ld, &seq), HDMLP_END, "%s", hdmlp_last_error());
    cr_assert_eq(seq.n, 3 * objstore_spec.n_samples);
    uint64_t per_epoch[3] = {0, 0, 0};
    size_t known = 0;
    cr_assert_eq(hdmlp_loader_epoch_source_bytes(ld, per_epoch, 3, &known), HDMLP_OK);
    hdmlp_stats st;
    hdmlp_loader_stats(ld, &st, sizeof st);
    cr_assert_gt(st.ssd_staged_chunks, 0);
    cr_assert_gt(st.ssd_cache_bytes, 0);
    cr_assert_gt(per_epoch[0], 0);
    cr_assert_eq(per_epoch[1] + per_epoch[2], 0, "epochs 1-2 read %llu bytes from the store",
                 (unsigned long long)(per_epoch[1] + per_epoch[2]));
    free(seq.idx);
    free(seq.ep);
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
}

/* Drains 2 epochs of a store that answers every request after 25 ms (objstore_drain:
 * every epoch exactly once with the right bytes), with chunks large against the budget, as
 * in a real pack (64 samples of 2-6 KB, budget a quarter of the data): the budget has no
 * room for a whole read buffer per thread. */
static void drain_slow_store(uint64_t seed, hdmlp_refill refill, uint32_t threads,
                             uint32_t version, hdmlp_stats *st)
{
    const testds_spec spec = {.version = version,
                              .n_samples = 1280,
                              .chunk_size = 64,
                              .chunks_per_segment = 5,
                              .seed = seed,
                              .min_size = 2000,
                              .max_size = 6000,
                              .n_labels = 4};
    objstore_cur = &spec;
    objstore_server s = {0};
    const char *const args[] = {"--latency-ms", "25", NULL};
    objstore_start_py(&s, args);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    free(objstore_drain(ds, refill, threads, st));
    hdmlp_dataset_close(ds);
    objstore_stop(&s);
    objstore_cur = &objstore_spec;
}

/* The I/O threads share the read-buffer reserve by each refill's bytes, so most of the 8
 * threads wait on the slow store at once (not the two whose whole buffers the reserve
 * holds), within the budget. */
Test(objstore, slow_store_overlaps_refills_within_the_budget, .timeout = 120)
{
    hdmlp_stats st;
    drain_slow_store(1302, HDMLP_REFILL_RANGES, 8, 0, &st);
    /* 8 with the reserve shared by need; 2-4 when each thread needs a whole buffer. */
    cr_expect_geq(st.refills_in_flight_peak, 6, "at most %llu refills read at once",
                  (unsigned long long)st.refills_in_flight_peak);
    cr_expect_leq(st.peak_memory_bytes, st.memory_budget, "peak %llu of %llu bytes",
                  (unsigned long long)st.peak_memory_bytes,
                  (unsigned long long)st.memory_budget);
}

/* The planner runs ahead of the reads: the slow store's timings move the cost model while
 * refills wait in the queue, so queued auto refills planning made are planned again with
 * the new estimate when a thread takes them. (A version-1 dataset: planning reads its
 * records and so plans its reads; a version-2 dataset's held tables give planning only
 * sizes, and the thread that takes a job plans it then.) */
Test(objstore, queued_refills_follow_the_learnt_model, .timeout = 120)
{
    hdmlp_stats st;
    drain_slow_store(1303, HDMLP_REFILL_AUTO, 2, 1, &st);
    cr_expect_eq(st.cost_learning, 1);
    cr_expect_gt(st.cost_replans, 0, "no queued refill followed the model (%llu reads)",
                 (unsigned long long)st.cost_reads);
}
