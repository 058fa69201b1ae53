/*
 * rpc/ tests, real loaders exchanging samples over gRPC: every sample exactly once per
 * epoch across the ranks, with and without prefetching. Part of the test_rpc binary.
 */
#include "hdmlp.h"
#include "support/rpc_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the loader over gRPC ------------------------------------------------------------------
 */

typedef struct e2e_rank {
    hdmlp_loader *ld;
    testds_seq seq;
    int rc;
    char err[256];
    hdmlp_stats st;
} e2e_rank;

static void *e2e_consume(void *arg)
{
    e2e_rank *r = arg;
    r->rc = testds_drain(r->ld, &r->seq);
    snprintf(r->err, sizeof r->err, "%s", hdmlp_last_error());
    hdmlp_loader_stats(r->ld, &r->st, sizeof r->st);
    hdmlp_loader_free(r->ld);
    r->ld = NULL;
    return NULL;
}

/* R real loaders in one process, each with its own gRPC transport on loopback; checks that
 * every sample is delivered exactly once per epoch across ranks. */
static void e2e_run(uint32_t world, uint32_t prefetch, uint64_t epochs)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("rpc-e2e", dir, sizeof dir), 0);
    const uint64_t n = 2000;
    const testds_spec spec = {n, 10, 0, 77, 200, 1200, 0, 0, 5, 0};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    cluster c;
    cluster_config(&c, world, NULL, 5000);
    e2e_rank runs[MAX_RANKS];
    memset(runs, 0, sizeof runs);
    for (uint32_t r = 0; r < world; r++) {
        hdmlp_config *cfg = c.cfg[r];
        hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
        hdmlp_config_set_batch_size(cfg, 16);
        hdmlp_config_set_epochs(cfg, epochs);
        hdmlp_config_set_seed(cfg, 5);
        hdmlp_config_set_prefetch(cfg, prefetch);
        const int rc = hdmlp_loader_create(ds, cfg, &runs[r].ld);
        cr_assert_eq(rc, HDMLP_OK, "rank %u: %s", r, hdmlp_last_error());
    }
    pthread_t th[MAX_RANKS];
    for (uint32_t r = 0; r < world; r++) {
        pthread_create(&th[r], NULL, e2e_consume, &runs[r]);
    }
    for (uint32_t r = 0; r < world; r++) {
        pthread_join(th[r], NULL);
    }
    uint8_t *seen = calloc(n * epochs, 1);
    uint64_t total = 0, remote = 0, hits = 0, bytes = 0;
    for (uint32_t r = 0; r < world; r++) {
        cr_assert_eq(runs[r].rc, HDMLP_END, "rank %u: %s: %s", r, hdmlp_err_name(runs[r].rc),
                     runs[r].err);
        const testds_seq *q = &runs[r].seq;
        for (uint64_t i = 0; i < q->n; i++) {
            cr_assert_lt(q->idx[i], n);
            uint8_t *s = &seen[q->ep[i] * n + q->idx[i]];
            cr_assert_eq(*s, 0, "sample %llu twice", (unsigned long long)q->idx[i]);
            *s = 1;
            total++;
        }
        remote += runs[r].st.remote_requests;
        hits += runs[r].st.remote_hits;
        bytes += runs[r].st.net_bytes_in;
        testds_seq_free(&runs[r].seq);
    }
    cr_assert_eq(total, n * epochs);
    printf("rpc_loader: world %u prefetch %u: %llu samples, %llu remote requests, %llu remote "
           "hits, %llu bytes over gRPC\n",
           world, prefetch, (unsigned long long)total, (unsigned long long)remote,
           (unsigned long long)hits, (unsigned long long)bytes);
    free(seen);
    cluster_stop(&c);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(rpc_loader, exactly_once_three_ranks, .timeout = 120) { e2e_run(3, 256, 2); }

Test(rpc_loader, exactly_once_two_ranks_no_prefetch, .timeout = 120) { e2e_run(2, 0, 2); }
