/*
 * hostile_rpc's legitimate exchange: two loaders with peers on fresh loopback ports, a
 * consumer thread per rank checking every sample byte for byte, and exactly once per epoch
 * across both ranks at the end (see hostile_rpc.c).
 */
#include "hostile/hostile_rpc.h"

#include "rpc_transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const testds_spec spec = {4000, 10, 8, 4242, 200, 1200, 0, 0, 7, 0};

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtoull(line + 6, NULL, 10);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kb << 10;
}

int failures;

/* ---- the legitimate exchange ------------------------------------------------------------ */

static void *consume(void *arg)
{
    rank_run *r = arg;
    uint8_t *buf = malloc(spec.max_size + 1);
    hdmlp_batch *b;
    int rc;
    while ((rc = hdmlp_loader_next(r->ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const size_t size = testds_size(&spec, v[i].index);
            int ok = v[i].index < spec.n_samples && v[i].size == size && buf != NULL;
            if (ok && size > 0) {
                testds_fill(v[i].index, spec.seed, buf, size);
                ok = v[i].data != NULL && memcmp(buf, v[i].data, size) == 0;
            }
            r->wrong += !ok;
            if (r->n == r->cap) {
                r->cap = r->cap ? 2 * r->cap : 4096;
                r->ep = realloc(r->ep, r->cap * sizeof(*r->ep));
                r->idx = realloc(r->idx, r->cap * sizeof(*r->idx));
            }
            r->ep[r->n] = hdmlp_batch_epoch(b);
            r->idx[r->n++] = v[i].index;
        }
        atomic_fetch_add(&r->delivered, hdmlp_batch_size(b));
        hdmlp_batch_release(b);
    }
    r->rc = rc;
    snprintf(r->err, sizeof(r->err), "%s", rc == HDMLP_END ? "" : hdmlp_last_error());
    atomic_store(&r->done, 1);
    hdmlp_loader_free(r->ld);
    r->ld = NULL;
    free(buf);
    return NULL;
}

/* One try of exchange_create: 0, -1, or 1 when a rank's port was taken between its pick and
 * its listen (another test's pick, or the other rank's: picks are random, not reserved). */
static int exchange_try(exchange *x, hdmlp_dataset *ds, uint64_t epochs, uint32_t timeout_ms)
{
    memset(x, 0, sizeof(*x));
    x->epochs = epochs;
    const char *ptrs[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        if (rpc_pick_endpoint("127.0.0.1", x->eps[r], sizeof(x->eps[r])) != HDMLP_OK) {
            printf("rpc_pick_endpoint: %s\n", hdmlp_last_error());
            return -1;
        }
        ptrs[r] = x->eps[r];
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        hdmlp_config *cfg = NULL;
        hdmlp_config_create(&cfg);
        hdmlp_config_set_rank(cfg, r, WORLD);
        hdmlp_config_set_peers(cfg, ptrs, WORLD);
        hdmlp_config_set_job_token(cfg, TOKEN);
        /* The exchange runs over gRPC, as the attacks and the RSS limits assume (over rings
         * it is several times faster and delivers on a second thread: tests/hostile/
         * hostile_shm.c attacks those). */
        hdmlp_config_set_same_host(cfg, HDMLP_SAME_HOST_SOCKET);
        hdmlp_config_set_peer_timeout(cfg, timeout_ms);
        hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
        hdmlp_config_set_batch_size(cfg, BATCH);
        hdmlp_config_set_epochs(cfg, epochs);
        hdmlp_config_set_seed(cfg, 11);
        const int rc = hdmlp_loader_create(ds, cfg, &x->runs[r].ld);
        hdmlp_config_free(cfg);
        if (rc != HDMLP_OK) {
            const int taken = rc == HDMLP_E_IO && strstr(hdmlp_last_error(), "in use") != NULL;
            printf("rank %u: %s: %s%s\n", r, hdmlp_err_name(rc), hdmlp_last_error(),
                   taken ? " (picking other ports)" : "");
            for (uint32_t q = 0; q < r; q++) {
                hdmlp_loader_free(x->runs[q].ld);
                x->runs[q].ld = NULL;
            }
            return taken ? 1 : -1;
        }
    }
    return 0;
}

/* Creates both ranks' loaders on fresh loopback ports (picked again, up to 5 times, when
 * one was taken before its loader listened). 0 or -1. */
int exchange_create(exchange *x, hdmlp_dataset *ds, uint64_t epochs, uint32_t timeout_ms)
{
    int rc = 1;
    for (int attempt = 0; rc == 1 && attempt < 5; attempt++) {
        rc = exchange_try(x, ds, epochs, timeout_ms);
    }
    return rc == 0 ? 0 : -1;
}

void exchange_start(exchange *x)
{
    x->t0 = now_ns();
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_create(&x->th[r], NULL, consume, &x->runs[r]);
    }
}

/* Joins both ranks; checks bytes and (when `complete`) exactly once per epoch. Returns
 * delivered samples per second. */
double exchange_finish(exchange *x, const char *what, int complete)
{
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_join(x->th[r], NULL);
    }
    const double secs = (double)(now_ns() - x->t0) / 1e9;
    const uint64_t n = spec.n_samples;
    uint8_t *seen = calloc(n * x->epochs, 1);
    uint64_t total = 0, dup = 0, wrong = 0;
    for (uint32_t r = 0; r < WORLD; r++) {
        rank_run *rr = &x->runs[r];
        if (complete) {
            CHECK(rr->rc == HDMLP_END, "%s: rank %u ended with %s: %s", what, r,
                  hdmlp_err_name(rr->rc), rr->err);
        }
        for (uint64_t i = 0; i < rr->n; i++) {
            if (rr->ep[i] < x->epochs && rr->idx[i] < n) {
                dup += seen[rr->ep[i] * n + rr->idx[i]]++ != 0;
            }
        }
        total += rr->n;
        wrong += rr->wrong;
        free(rr->ep);
        free(rr->idx);
    }
    free(seen);
    CHECK(wrong == 0, "%s: %llu wrong samples", what, (unsigned long long)wrong);
    CHECK(dup == 0, "%s: %llu samples delivered twice in an epoch", what,
          (unsigned long long)dup);
    if (complete) {
        CHECK(total == n * x->epochs, "%s: %llu of %llu samples", what,
              (unsigned long long)total, (unsigned long long)(n * x->epochs));
    }
    const double rate = (double)total / secs;
    printf("%s: %llu epochs, %llu samples in %.2f s = %.0f samples/s; rank 0 %s, rank 1 %s\n",
           what, (unsigned long long)x->epochs, (unsigned long long)total, secs, rate,
           hdmlp_err_name(x->runs[0].rc), hdmlp_err_name(x->runs[1].rc));
    return rate;
}
