/*
 * Loader API tests, waiting: hdmlp_loader_next_timeout (zero waits like next, expiry while
 * reads wait) and hdmlp_loader_interrupt, without losing samples. Part of the test_loader
 * binary (fixtures: support/loader_fixture.h).
 */
#include "hdmlp.h"
#include "support/loader_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- waiting: timeouts and interrupts --------------------------------------------------- */

/* Replaces segment `s` (after the dataset was opened) by a FIFO: an I/O worker opening it
 * blocks until unblock_fifo, so the consumer waits deterministically. */
static void segment_to_fifo(const char *dir, uint32_t s, char *path, size_t cap)
{
    snprintf(path, cap, "%s/segment-%06u", dir, s);
    cr_assert_eq(unlink(path), 0, "unlink %s", path);
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s", path);
}

/* Lets the worker blocked in open() go on: its reads of the FIFO then fail. */
static void unblock_fifo(const char *path)
{
    for (int i = 0; i < 2000; i++) {
        const int fd = open(path, O_WRONLY | O_NONBLOCK);
        if (fd >= 0) {
            close(fd);
            return;
        }
        cr_assert_eq(errno, ENXIO, "open %s for writing: %s", path, strerror(errno));
        usleep(5000); /* no reader yet */
    }
    cr_assert_fail("no I/O worker opened %s within 10 s", path);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

Test(loader_api, next_timeout_zero_waits_like_next, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 16, 2));
    uint8_t seen[200] = {0};
    hdmlp_batch *b = NULL;
    int rc;
    uint64_t n = 0;
    while ((rc = hdmlp_loader_next_timeout(ld, &b, 0)) == HDMLP_OK) {
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const hdmlp_sample_view *v = &hdmlp_batch_samples(b)[i];
            expect_view(ds, &spec, v);
            seen[v->index]++;
        }
        n += hdmlp_batch_size(b);
        hdmlp_batch_release(b);
    }
    cr_expect_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_eq(n, 400);
    for (int i = 0; i < 200; i++) {
        cr_expect_eq(seen[i], 2, "sample %d delivered %u times in 2 epochs", i, seen[i]);
    }
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, next_timeout_expires_while_reads_wait, .timeout = 30)
{
    testds_spec spec = small_spec();
    spec.chunks_per_segment = 0; /* one segment: every refill waits on it */
    char dir[512], fifo[600];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    segment_to_fifo(dir, 0, fifo, sizeof(fifo));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 16, 1));
    for (int i = 0; i < 2; i++) {
        hdmlp_batch *b = (hdmlp_batch *)ds;
        const uint64_t t0 = mono_ms();
        const int rc = hdmlp_loader_next_timeout(ld, &b, 100);
        const uint64_t waited = mono_ms() - t0;
        cr_expect_eq(rc, HDMLP_E_TIMEOUT, "call %d: %s: %s", i, hdmlp_err_name(rc),
                     hdmlp_last_error());
        cr_expect_null(b);
        cr_expect_geq(waited, 90, "timed out after %" PRIu64 " ms of a 100 ms timeout", waited);
        cr_expect_lt(waited, 5000, "a 100 ms timeout took %" PRIu64 " ms", waited);
    }
    unblock_fifo(fifo);
    hdmlp_batch *b = (hdmlp_batch *)ds;
    const int rc = hdmlp_loader_next_timeout(ld, &b, 10000);
    cr_expect(rc < 0 && rc != HDMLP_E_TIMEOUT, "reading a FIFO gave %s", hdmlp_err_name(rc));
    cr_expect_null(b);
    cr_expect(strstr(hdmlp_last_error(), "segment-000000") != NULL, "detail: %s",
              hdmlp_last_error());
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

typedef struct interrupter {
    hdmlp_loader *ld;
    unsigned delay_us;
} interrupter;

static void *interrupt_later(void *arg)
{
    const interrupter *it = arg;
    usleep(it->delay_us);
    hdmlp_loader_interrupt(it->ld);
    return NULL;
}

Test(loader_api, interrupt_wakes_a_waiting_next, .timeout = 30)
{
    testds_spec spec = small_spec();
    spec.chunks_per_segment = 0;
    char dir[512], fifo[600];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    segment_to_fifo(dir, 0, fifo, sizeof(fifo));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 16, 1));
    interrupter it = {ld, 100000};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, interrupt_later, &it), 0);
    hdmlp_batch *b = (hdmlp_batch *)ds;
    const int rc = hdmlp_loader_next(ld, &b); /* no timeout: only the interrupt ends it */
    pthread_join(t, NULL);
    cr_expect_eq(rc, HDMLP_E_INTERRUPTED, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_null(b);
    /* Still waiting afterwards: the interrupt was consumed. */
    cr_expect_eq(hdmlp_loader_next_timeout(ld, &b, 50), HDMLP_E_TIMEOUT);
    unblock_fifo(fifo);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, interrupts_and_timeouts_lose_no_samples, .timeout = 60)
{
    /* Tight timeouts and interrupts from another thread while iterating: every epoch still
     * delivers every sample exactly once, and calls after E_TIMEOUT/E_INTERRUPTED resume. */
    testds_spec spec = small_spec();
    spec.n_samples = 20000;
    spec.chunk_size = 64;
    spec.chunks_per_segment = 0;
    spec.compress = 1;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_config *cfg = new_config(1u << 18, 50, 2);
    cr_assert_eq(hdmlp_config_set_threads(cfg, 1), HDMLP_OK);
    hdmlp_loader *ld = new_loader(ds, cfg);
    uint8_t *seen = calloc(spec.n_samples, 1);
    uint64_t timeouts = 0, interrupts = 0, n = 0, calls = 0;
    int rc;
    for (;;) {
        if (calls++ % 97 == 0) {
            hdmlp_loader_interrupt(ld);
        }
        hdmlp_batch *b = NULL;
        rc = hdmlp_loader_next_timeout(ld, &b, 1);
        if (rc == HDMLP_E_TIMEOUT || rc == HDMLP_E_INTERRUPTED) {
            cr_assert_null(b);
            timeouts += rc == HDMLP_E_TIMEOUT;
            interrupts += rc == HDMLP_E_INTERRUPTED;
            continue;
        }
        if (rc != HDMLP_OK) {
            break;
        }
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const hdmlp_sample_view *v = &hdmlp_batch_samples(b)[i];
            cr_assert_eq(seen[v->index], hdmlp_batch_epoch(b),
                         "sample %" PRIu64 " seen %u times before epoch %" PRIu64, v->index,
                         seen[v->index], hdmlp_batch_epoch(b));
            seen[v->index]++;
        }
        n += hdmlp_batch_size(b);
        hdmlp_batch_release(b);
    }
    cr_log_info("%" PRIu64 " timeouts, %" PRIu64 " interrupts in %" PRIu64 " calls", timeouts,
                interrupts, calls);
    cr_expect_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_eq(n, 2 * spec.n_samples);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_expect_eq(st.samples, n);
    free(seen);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}
