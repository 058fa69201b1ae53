/*
 * Threading stress for sanitizers (TSan cannot run Criterion binaries): the loader with
 * several I/O threads, batches released and stats read from other threads, interrupts
 * and timeouts, and three ranks exchanging samples over the in-process transport.
 * Plain C; prints "N passed, N failed" and exits non-zero on any failure.
 */
#include "hdmlp.h"
#include "support/fakenet.h"
#include "support/release_queue.h"
#include "support/testds.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, passes;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            failures++;                                                                        \
            return;                                                                            \
        }                                                                                      \
    } while (0)

typedef struct watcher {
    hdmlp_loader *ld;
    atomic_int stop;
} watcher;

static void *watch(void *arg)
{
    watcher *w = arg;
    hdmlp_stats st;
    while (!atomic_load(&w->stop)) {
        hdmlp_loader_stats(w->ld, &st, sizeof st);
        hdmlp_loader_interrupt(w->ld);
    }
    return NULL;
}

/* One loader with 4 I/O threads over dir, with `memory` bytes (0: a quarter of the data). */
static void single_rank(const char *dir, uint64_t memory)
{
    hdmlp_dataset *ds = NULL;
    CHECK(hdmlp_dataset_open(dir, &ds) == HDMLP_OK, "open: %s", hdmlp_last_error());
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, memory != 0 ? memory : hdmlp_dataset_raw_bytes(ds) / 4);
    hdmlp_config_set_threads(cfg, 4);
    hdmlp_config_set_epochs(cfg, 2);
    hdmlp_config_set_batch_size(cfg, 16);
    hdmlp_loader *ld = NULL;
    CHECK(hdmlp_loader_create(ds, cfg, &ld) == HDMLP_OK, "create: %s", hdmlp_last_error());
    release_queue q;
    release_queue_start(&q, 64);
    pthread_t wt;
    watcher w = {ld, 0};
    pthread_create(&wt, NULL, watch, &w);
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    uint8_t *seen = calloc(n * 2, 1);
    uint64_t got = 0;
    int rc;
    hdmlp_batch *b;
    for (;;) {
        rc = hdmlp_loader_next_timeout(ld, &b, 5);
        if (rc == HDMLP_E_INTERRUPTED || rc == HDMLP_E_TIMEOUT) {
            continue;
        }
        if (rc != HDMLP_OK) {
            break;
        }
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            seen[hdmlp_batch_epoch(b) * n + v[i].index]++;
            got++;
        }
        release_queue_push(&q, b);
    }
    release_queue_stop(&q);
    atomic_store(&w.stop, 1);
    pthread_join(wt, NULL);
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    int once = 1;
    for (uint64_t i = 0; i < 2 * n; i++) {
        once &= seen[i] == 1;
    }
    free(seen);
    CHECK(rc == HDMLP_END, "single rank ended with %s: %s", hdmlp_err_name(rc),
          hdmlp_last_error());
    CHECK(got == 2 * n && once, "single rank: %llu samples, exactly once: %d",
          (unsigned long long)got, once);
    passes++;
}

typedef struct rank_arg {
    hdmlp_loader *ld;
    uint64_t got;
    int rc;
} rank_arg;

static void *rank_main(void *arg)
{
    rank_arg *r = arg;
    hdmlp_batch *b;
    while ((r->rc = hdmlp_loader_next(r->ld, &b)) == HDMLP_OK) {
        r->got += hdmlp_batch_size(b);
        hdmlp_batch_release(b);
    }
    hdmlp_loader_free(r->ld);
    return NULL;
}

static void three_ranks(const char *dir)
{
    enum { WORLD = 3 };
    hdmlp_dataset *ds = NULL;
    CHECK(hdmlp_dataset_open(dir, &ds) == HDMLP_OK, "open: %s", hdmlp_last_error());
    fakenet *hub = NULL;
    fakenet_create(WORLD, &hub);
    const char *peers[WORLD] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
    rank_arg ranks[WORLD];
    memset(ranks, 0, sizeof(ranks));
    for (uint32_t r = 0; r < WORLD; r++) {
        hdmlp_config *cfg = NULL;
        hdmlp_config_create(&cfg);
        hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
        hdmlp_config_set_threads(cfg, 3);
        hdmlp_config_set_epochs(cfg, 2);
        hdmlp_config_set_rank(cfg, r, WORLD);
        hdmlp_config_set_peers(cfg, peers, WORLD);
        hdmlp_config_set_prefetch(cfg, 64);
        const int rc = loader_create_with(ds, cfg, fakenet_factory, &ranks[r].ld);
        hdmlp_config_free(cfg);
        CHECK(rc == HDMLP_OK, "rank %u: %s", r, hdmlp_last_error());
    }
    pthread_t th[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_create(&th[r], NULL, rank_main, &ranks[r]);
    }
    uint64_t total = 0;
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_join(th[r], NULL);
        total += ranks[r].got;
    }
    fakenet_free(hub);
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    hdmlp_dataset_close(ds);
    for (uint32_t r = 0; r < WORLD; r++) {
        CHECK(ranks[r].rc == HDMLP_END, "rank %u ended with %s", r,
              hdmlp_err_name(ranks[r].rc));
    }
    CHECK(total == 2 * n, "three ranks delivered %llu of %llu", (unsigned long long)total,
          (unsigned long long)(2 * n));
    passes++;
}

int main(void)
{
    char dir[512];
    if (testds_mkdtemp("stress", dir, sizeof(dir)) != 0) {
        fprintf(stderr, "cannot make a temporary directory\n");
        return 1;
    }
    const testds_spec spec = {3000, 16, 2, 5, 100, 900, 1, 0, 4, 0};
    if (testds_write(dir, &spec) != HDMLP_OK) {
        fprintf(stderr, "testds_write: %s\n", hdmlp_last_error());
        return 1;
    }
    single_rank(dir, 0);
    three_ranks(dir);
    testds_rm_rf(dir);
    /* Tiny samples whose tables' block offsets do not fit the budget's sixteenth: the I/O
     * threads read each job's records before its read. */
    const testds_spec tiny = {20000, 8, 0, 6, 1, 16, 0, 0, 5, 2};
    if (testds_mkdtemp("stress", dir, sizeof(dir)) != 0 ||
        testds_write(dir, &tiny) != HDMLP_OK) {
        fprintf(stderr, "tiny dataset: %s\n", hdmlp_last_error());
        return 1;
    }
    single_rank(dir, 100000);
    testds_rm_rf(dir);
    printf("%d passed, %d failed\n", passes, failures);
    return failures != 0;
}
