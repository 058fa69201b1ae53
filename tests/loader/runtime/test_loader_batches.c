/*
 * Loader API tests, batch ownership: batches outliving the loader, released from another
 * thread (also while the loader is freed), stats read from another thread while iterating,
 * and holding every batch (E_NOMEM, then progress once released). Part of the test_loader
 * binary (fixtures: support/loader_fixture.h).
 */
#include "hdmlp.h"
#include "support/loader_fixture.h"
#include "support/release_queue.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

/* ---- batch ownership ----------------------------------------------------------------------
 */

Test(loader_api, batches_outlive_loader_free, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 16, 2));
    hdmlp_batch *held[3];
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hdmlp_loader_next(ld, &held[i]), HDMLP_OK, "%s", hdmlp_last_error());
    }
    hdmlp_loader_free(ld);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hdmlp_batch_size(held[i]), 16);
        cr_assert_eq(hdmlp_batch_epoch(held[i]), 0);
        for (size_t j = 0; j < 16; j++) {
            expect_view(ds, &spec, &hdmlp_batch_samples(held[i])[j]);
        }
    }
    hdmlp_batch_release(held[1]);
    hdmlp_batch_release(held[0]);
    hdmlp_batch_release(held[2]);
    hdmlp_dataset_close(ds);
}

Test(loader_api, batches_released_from_another_thread, .timeout = 60)
{
    testds_spec spec = small_spec();
    spec.n_samples = 2000;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 10, 2));
    release_queue q;
    cr_assert_eq(release_queue_start(&q, 8), 0);
    uint8_t *seen = calloc(spec.n_samples, 1);
    uint64_t n = 0;
    hdmlp_batch *b = NULL;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            expect_view(ds, &spec, &v[i]);
            seen[v[i].index]++;
        }
        n += hdmlp_batch_size(b);
        release_queue_push(&q, b);
    }
    release_queue_stop(&q);
    cr_expect_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_eq(n, 2 * spec.n_samples);
    for (uint64_t i = 0; i < spec.n_samples; i++) {
        cr_expect_eq(seen[i], 2, "sample %" PRIu64 " delivered %u times in 2 epochs", i,
                     seen[i]);
    }
    free(seen);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

typedef struct stats_poller {
    hdmlp_loader *ld;
    pthread_mutex_t lock; /* guards stop */
    int stop;
    uint64_t polls;
    int regressed;
} stats_poller;

static void *poll_stats(void *arg)
{
    stats_poller *p = arg;
    uint64_t last = 0;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        const int stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        if (stop) {
            break;
        }
        hdmlp_stats st;
        if (hdmlp_loader_stats(p->ld, &st, sizeof st) == HDMLP_OK) {
            if (st.samples < last || st.peak_memory_bytes > st.memory_budget) {
                p->regressed = 1;
            }
            last = st.samples;
        }
        p->polls++;
        sched_yield();
    }
    return NULL;
}

Test(loader_api, stats_readable_from_another_thread_while_iterating, .timeout = 60)
{
    testds_spec spec = small_spec();
    spec.n_samples = 3000;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(1u << 17, 10, 2));
    stats_poller p = {.ld = ld, .stop = 0, .polls = 0, .regressed = 0};
    pthread_mutex_init(&p.lock, NULL);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, poll_stats, &p), 0);
    hdmlp_batch *b = NULL;
    int rc;
    uint64_t n = 0;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        n += hdmlp_batch_size(b);
        hdmlp_batch_release(b);
    }
    pthread_mutex_lock(&p.lock);
    p.stop = 1;
    pthread_mutex_unlock(&p.lock);
    pthread_join(t, NULL);
    cr_expect_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_expect_eq(n, 2 * spec.n_samples);
    cr_expect_gt(p.polls, 0);
    cr_expect_not(p.regressed, "samples went backwards or peak exceeded the budget");
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, holding_every_batch_reports_nomem_then_resumes, .timeout = 60)
{
    /* A consumer that never releases cannot be served within a tight budget: next must
     * report the exhausted budget instead of hanging, and resume once batches return. */
    testds_spec spec = small_spec();
    spec.n_samples = 2000; /* ~108 KB of samples */
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(ds, new_config(1u << 16, 10, 1));
    hdmlp_batch **held = calloc(spec.n_samples, sizeof(*held));
    uint8_t *seen = calloc(spec.n_samples, 1);
    size_t n_held = 0;
    uint64_t n = 0;
    int nomem = 0;
    for (;;) {
        hdmlp_batch *b = NULL;
        const int rc = hdmlp_loader_next(ld, &b);
        if (rc == HDMLP_END) {
            break;
        }
        if (rc == HDMLP_E_NOMEM) {
            cr_assert_null(b);
            cr_assert_gt(n_held, 0, "E_NOMEM with no batch held: %s", hdmlp_last_error());
            nomem++;
            for (size_t i = 0; i < n_held; i++) {
                hdmlp_batch_release(held[i]);
            }
            n_held = 0;
            continue;
        }
        cr_assert_eq(rc, HDMLP_OK, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const hdmlp_sample_view *v = &hdmlp_batch_samples(b)[i];
            cr_assert_eq(seen[v->index], 0, "sample %" PRIu64 " twice", v->index);
            seen[v->index] = 1;
        }
        n += hdmlp_batch_size(b);
        held[n_held++] = b;
    }
    cr_expect_gt(nomem, 0, "a 64 KiB budget held all %" PRIu64 " samples", n);
    cr_expect_eq(n, spec.n_samples);
    for (size_t i = 0; i < n_held; i++) {
        hdmlp_batch_release(held[i]);
    }
    free(held);
    free(seen);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, free_while_another_thread_releases_batches, .timeout = 60)
{
    testds_spec spec = small_spec();
    spec.n_samples = 1000;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    for (int round = 0; round < 20; round++) {
        hdmlp_loader *ld = new_loader(ds, new_config(ROOMY, 10, 0));
        release_queue q;
        cr_assert_eq(release_queue_start(&q, 8), 0);
        for (int i = 0; i < 8 + round; i++) {
            hdmlp_batch *b = NULL;
            cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_OK, "%s", hdmlp_last_error());
            release_queue_push(&q, b);
        }
        /* The releaser may still hold queued batches while the loader goes away. */
        hdmlp_loader_free(ld);
        release_queue_stop(&q);
    }
    hdmlp_dataset_close(ds);
}
