/*
 * Threading stress of the image pipeline for sanitizers (TSan cannot run Criterion
 * binaries): decode threads with the automatic split, batches released on another thread
 * while a third reads the stats, interrupts and short timeouts from another thread, a
 * loader freed with decoded batches queued, and damaged images skipped. Each run must
 * deliver what a plain run delivers. Plain C; prints "N passed, N failed" and exits
 * non-zero on any failure.
 */
#include "hdmlp.h"
#include "support/release_queue.h"
#include "support/testds.h"
#include "support/testimg.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

#define N_IMAGES 120
#define EPOCHS 3

static hdmlp_dataset *ds;

/* Batches handed to a releasing thread. */
typedef struct poker {
    hdmlp_loader *ld;
    atomic_int stop;
    int interrupt;
} poker;

/* Reads the stats (and interrupts, if asked) until stopped. */
static void *poke(void *arg)
{
    poker *p = arg;
    while (!atomic_load(&p->stop)) {
        hdmlp_stats st;
        hdmlp_loader_stats(p->ld, &st, sizeof st);
        if (p->interrupt) {
            hdmlp_loader_interrupt(p->ld);
        }
        sched_yield();
    }
    return NULL;
}

static hdmlp_loader *make(uint32_t io, uint32_t decode, uint32_t prefetch, int skip)
{
    hdmlp_config *cfg = NULL;
    hdmlp_image_config *ic = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_batch_size(cfg, 9);
    hdmlp_config_set_epochs(cfg, EPOCHS);
    hdmlp_config_set_seed(cfg, 77);
    hdmlp_config_set_threads(cfg, io);
    hdmlp_config_set_memory(cfg, 8ull << 20);
    hdmlp_config_set_on_corrupt(cfg, skip ? HDMLP_CORRUPT_SKIP : HDMLP_CORRUPT_FAIL);
    hdmlp_image_config_create(&ic);
    hdmlp_image_config_set_size(ic, 20, 28);
    hdmlp_image_config_set_decode_threads(ic, decode);
    hdmlp_image_config_set_prefetch(ic, prefetch);
    hdmlp_config_set_image(cfg, ic);
    hdmlp_loader *ld = NULL;
    if (hdmlp_loader_create(ds, cfg, &ld) != HDMLP_OK) {
        fprintf(stderr, "loader_create: %s\n", hdmlp_last_error());
    }
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    return ld;
}

typedef struct seq {
    uint64_t idx[N_IMAGES * EPOCHS + 8];
    uint64_t hash[N_IMAGES * EPOCHS + 8];
    uint32_t n;
} seq;

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        x = (x ^ p[i]) * 0x100000001b3ull;
    }
    return x;
}

/* Drains ld: batches released on another thread, stats read (and interrupts sent) from a
 * third; timeout_ms > 0 waits in short slices. Returns the final code. */
static int drain(hdmlp_loader *ld, seq *s, int interrupt, uint32_t timeout_ms)
{
    release_queue q;
    release_queue_start(&q, 8);
    poker pk = {ld, 0, interrupt};
    pthread_t pt;
    pthread_create(&pt, NULL, poke, &pk);
    s->n = 0;
    int rc;
    for (;;) {
        hdmlp_batch *b = NULL;
        rc = timeout_ms ? hdmlp_loader_next_timeout(ld, &b, timeout_ms)
                        : hdmlp_loader_next(ld, &b);
        if (rc == HDMLP_E_INTERRUPTED || rc == HDMLP_E_TIMEOUT) {
            continue;
        }
        if (rc != HDMLP_OK) {
            break;
        }
        hdmlp_image_batch ib;
        if (hdmlp_batch_image(b, &ib) == HDMLP_OK) {
            const size_t one = ib.n ? ib.bytes / ib.n : 0;
            for (uint32_t i = 0; i < ib.n; i++) {
                s->idx[s->n] = ib.indices[i];
                s->hash[s->n++] = fnv((const uint8_t *)ib.data + i * one, one);
            }
        }
        release_queue_push(&q, b);
    }
    atomic_store(&pk.stop, 1);
    release_queue_stop(&q);
    pthread_join(pt, NULL);
    return rc;
}

static seq ref, got;

static void same_as_reference(const char *what, uint32_t io, uint32_t decode, uint32_t prefetch,
                              int interrupt, uint32_t timeout_ms)
{
    hdmlp_loader *ld = make(io, decode, prefetch, 0);
    CHECK(ld != NULL, "%s: create", what);
    const int rc = drain(ld, &got, interrupt, timeout_ms);
    hdmlp_loader_free(ld);
    CHECK(rc == HDMLP_END, "%s: ended with %d (%s)", what, rc, hdmlp_last_error());
    CHECK(got.n == ref.n, "%s: %u images, reference %u", what, got.n, ref.n);
    CHECK(memcmp(got.idx, ref.idx, ref.n * sizeof(uint64_t)) == 0, "%s: order differs", what);
    CHECK(memcmp(got.hash, ref.hash, ref.n * sizeof(uint64_t)) == 0, "%s: pixels differ", what);
    passes++;
}

static void reference(void)
{
    hdmlp_loader *ld = make(1, 1, 1, 0);
    CHECK(ld != NULL, "reference: create");
    const int rc = drain(ld, &ref, 0, 0);
    hdmlp_loader_free(ld);
    CHECK(rc == HDMLP_END && ref.n == N_IMAGES * EPOCHS, "reference: %d, %u images", rc, ref.n);
    for (int e = 0; e < EPOCHS; e++) {
        uint8_t seen[N_IMAGES] = {0};
        for (int i = 0; i < N_IMAGES; i++) {
            seen[ref.idx[e * N_IMAGES + i]]++;
        }
        for (int i = 0; i < N_IMAGES; i++) {
            CHECK(seen[i] == 1, "reference: epoch %d sample %d seen %u times", e, i, seen[i]);
        }
    }
    passes++;
}

static void free_with_batches_queued(void)
{
    for (int round = 0; round < 4; round++) {
        hdmlp_loader *ld = make(2, 0, 4, 0);
        CHECK(ld != NULL, "create");
        hdmlp_batch *held = NULL;
        CHECK(hdmlp_loader_next(ld, &held) == HDMLP_OK, "first batch");
        for (int i = 0; i < round; i++) {
            hdmlp_batch *b = NULL;
            CHECK(hdmlp_loader_next(ld, &b) == HDMLP_OK, "batch %d", i);
            hdmlp_batch_release(b);
        }
        hdmlp_loader_free(ld); /* decoded-ahead batches dropped; `held` stays valid */
        hdmlp_image_batch ib;
        CHECK(hdmlp_batch_image(held, &ib) == HDMLP_OK && ib.n == 9, "held batch");
        CHECK(((const uint8_t *)ib.data)[ib.bytes - 1] ==
                  ((const uint8_t *)ib.data)[ib.bytes - 1],
              "readable");
        hdmlp_batch_release(held);
    }
    passes++;
}

int main(void)
{
    char dir[512], src[600], out[600];
    if (testds_mkdtemp("imgthr", dir, sizeof(dir)) != 0) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    snprintf(src, sizeof(src), "%s/src", dir);
    snprintf(out, sizeof(out), "%s/ds", dir);
    mkdir(src, 0755);
    if (testimg_pack(src, out, N_IMAGES, 4, 40, 30, 0, 8) != 0 ||
        hdmlp_dataset_open(out, &ds) != HDMLP_OK) {
        fprintf(stderr, "dataset: %s\n", hdmlp_last_error());
        return 1;
    }
    reference();
    same_as_reference("automatic split", 3, 0, 2, 0, 0);
    same_as_reference("4 decode threads, prefetch 3", 2, 4, 3, 0, 0);
    same_as_reference("interrupted", 2, 2, 2, 1, 0);
    same_as_reference("1 ms timeouts", 1, 3, 1, 0, 1);
    free_with_batches_queued();
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
    printf("%d passed, %d failed\n", passes, failures);
    return failures != 0;
}
