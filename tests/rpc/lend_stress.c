/*
 * Threaded stress of lending over the same-host rings, in plain C so it runs under TSan
 * (Criterion does not start there): three loaders in one process, each with its gRPC
 * transport and its shared-memory rings to the other two (peers on 127.0.0.1), their
 * samples allocated from each rank's arena and lent to the peers. Each rank's consumer
 * hands its batches to a release thread, which checks every sample's bytes and releases
 * it, so lent blocks go back to their owners from a thread other than the consumer's,
 * while the owners allocate, lend and free on theirs; the last batch of each rank is
 * released after its loader is freed. Checks exactly-once over 2 epochs, the bytes, and
 * that samples were lent. Exit 0 on success.
 */
#include "hdmlp.h"
#include "rpc_transport.h"
#include "support/testds.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* See rpc_stress.c: gRPC's own modules are not instrumented. */
#define TSAN_HOOK __attribute__((visibility("default")))
TSAN_HOOK const char *__tsan_default_options(void);
TSAN_HOOK const char *__tsan_default_options(void)
{
    return "ignore_noninstrumented_modules=1";
}

#define WORLD 3
#define EPOCHS 2
#define QUEUE 8

static const testds_spec SPEC = {2000, 16, 0, 5, 200, 9000, 0, 0, 11, 0};
static _Atomic unsigned seen[EPOCHS * 2000];
static atomic_int bad;

typedef struct rank_run {
    hdmlp_loader *ld;
    hdmlp_stats st;
    int rc;
    /* batches from the consumer to the release thread */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    hdmlp_batch *q[QUEUE];
    int head, count, done;
    hdmlp_batch *last; /* released after the loader is freed */
} rank_run;

static void check_batch(hdmlp_batch *b, uint8_t *want)
{
    const hdmlp_sample_view *v = hdmlp_batch_samples(b);
    const uint64_t e = hdmlp_batch_epoch(b);
    for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
        const size_t sz = testds_size(&SPEC, v[i].index);
        testds_fill(v[i].index, SPEC.seed, want, sz);
        if (e >= EPOCHS || v[i].index >= SPEC.n_samples || v[i].size != sz ||
            memcmp(v[i].data, want, sz) != 0) {
            atomic_fetch_add(&bad, 1);
            continue;
        }
        atomic_fetch_add(&seen[e * SPEC.n_samples + v[i].index], 1u);
    }
}

static void *release_main(void *arg)
{
    rank_run *r = arg;
    uint8_t *want = malloc(SPEC.max_size);
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (r->count == 0 && !r->done) {
            pthread_cond_wait(&r->cv, &r->mu);
        }
        if (r->count == 0) {
            pthread_mutex_unlock(&r->mu);
            break;
        }
        hdmlp_batch *b = r->q[r->head];
        r->head = (r->head + 1) % QUEUE;
        r->count--;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        check_batch(b, want);
        hdmlp_batch_release(b);
    }
    free(want);
    return NULL;
}

static void *consume_main(void *arg)
{
    rank_run *r = arg;
    pthread_t rel;
    pthread_create(&rel, NULL, release_main, r);
    hdmlp_batch *b;
    while ((r->rc = hdmlp_loader_next(r->ld, &b)) == HDMLP_OK) {
        if (r->last != NULL) {
            pthread_mutex_lock(&r->mu);
            while (r->count == QUEUE) {
                pthread_cond_wait(&r->cv, &r->mu);
            }
            r->q[(r->head + r->count) % QUEUE] = r->last;
            r->count++;
            pthread_cond_broadcast(&r->cv);
            pthread_mutex_unlock(&r->mu);
        }
        r->last = b;
    }
    pthread_mutex_lock(&r->mu);
    r->done = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(rel, NULL);
    hdmlp_loader_finish(r->ld);
    hdmlp_loader_stats(r->ld, &r->st, sizeof r->st);
    hdmlp_loader_free(r->ld);
    if (r->last != NULL) { /* lent blocks outlive the loader and its transport */
        uint8_t *want = malloc(SPEC.max_size);
        check_batch(r->last, want);
        free(want);
        hdmlp_batch_release(r->last);
    }
    return NULL;
}

int main(void)
{
    char dir[512];
    if (testds_mkdtemp("lend", dir, sizeof dir) != 0 || testds_write(dir, &SPEC) != HDMLP_OK) {
        fprintf(stderr, "lend_stress: cannot write the dataset: %s\n", hdmlp_last_error());
        return 1;
    }
    hdmlp_dataset *ds = NULL;
    if (hdmlp_dataset_open(dir, &ds) != HDMLP_OK) {
        fprintf(stderr, "lend_stress: open: %s\n", hdmlp_last_error());
        return 1;
    }
    char eps[WORLD][64];
    const char *peers[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        if (rpc_pick_endpoint("127.0.0.1", eps[r], sizeof eps[r]) != HDMLP_OK) {
            fprintf(stderr, "lend_stress: %s\n", hdmlp_last_error());
            return 1;
        }
        peers[r] = eps[r];
    }
    rank_run runs[WORLD];
    memset(runs, 0, sizeof runs);
    int failed = 0;
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_mutex_init(&runs[r].mu, NULL);
        pthread_cond_init(&runs[r].cv, NULL);
        hdmlp_config *cfg = NULL;
        hdmlp_config_create(&cfg);
        hdmlp_config_set_rank(cfg, r, WORLD);
        hdmlp_config_set_peers(cfg, peers, WORLD);
        hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
        hdmlp_config_set_threads(cfg, 3);
        hdmlp_config_set_batch_size(cfg, 16);
        hdmlp_config_set_epochs(cfg, EPOCHS);
        hdmlp_config_set_seed(cfg, 5);
        hdmlp_config_set_peer_timeout(cfg, 60000);
        if (hdmlp_loader_create(ds, cfg, &runs[r].ld) != HDMLP_OK) {
            fprintf(stderr, "lend_stress: rank %u: %s\n", r, hdmlp_last_error());
            return 1;
        }
        hdmlp_config_free(cfg);
    }
    pthread_t th[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_create(&th[r], NULL, consume_main, &runs[r]);
    }
    uint64_t in = 0, lent = 0;
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_join(th[r], NULL);
        if (runs[r].rc != HDMLP_END) {
            fprintf(stderr, "lend_stress: rank %u ended with %s\n", r,
                    hdmlp_err_name(runs[r].rc));
            failed = 1;
        }
        in += runs[r].st.net_bytes_in;
        lent += runs[r].st.net_bytes_lent;
        pthread_mutex_destroy(&runs[r].mu);
        pthread_cond_destroy(&runs[r].cv);
    }
    for (uint64_t i = 0; i < EPOCHS * SPEC.n_samples; i++) {
        if (atomic_load(&seen[i]) != 1) {
            fprintf(stderr, "lend_stress: epoch %llu sample %llu delivered %u times\n",
                    (unsigned long long)(i / SPEC.n_samples),
                    (unsigned long long)(i % SPEC.n_samples), atomic_load(&seen[i]));
            failed = 1;
            break;
        }
    }
    if (atomic_load(&bad) != 0 || lent == 0 || lent > in) {
        fprintf(stderr, "lend_stress: %d samples with wrong bytes; %llu of %llu bytes lent\n",
                atomic_load(&bad), (unsigned long long)lent, (unsigned long long)in);
        failed = 1;
    }
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
    printf("lend_stress: %llu bytes from peers, %llu lent: %s\n", (unsigned long long)in,
           (unsigned long long)lent, failed ? "FAILED" : "OK");
    return failed;
}
