/*
 * The loader with the image pipeline on, when things go wrong: corrupt images under fail
 * and skip, a read failure met ahead of the consumer, misuse, and the user's allocator
 * (every buffer back, NULL and misaligned buffers).
 */
#include "hdmlp.h"
#include "support/testds.h"
#include "support/testimg.h"
#include "test_image_common.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(image_errors, .fini = cleanup, .timeout = 120);

/* A JPEG cut in half and a PNG missing its last 30 bytes, among the good images. */
static void add_damaged(const char *dir)
{
    uint8_t *px = testimg_pattern(40, 30, 3, 99), *enc = NULL;
    size_t len = 0;
    char path[700];
    cr_assert_eq(testimg_jpeg(px, 40, 30, 3, 90, &enc, &len), 0);
    snprintf(path, sizeof(path), "%s/class-0/broken.jpg", dir);
    cr_assert_eq(testds_write_file(path, enc, len / 2), 0);
    free(enc);
    cr_assert_eq(testimg_png(px, 40, 30, 3, &enc, &len), 0);
    snprintf(path, sizeof(path), "%s/class-1/truncated.png", dir);
    cr_assert_eq(testds_write_file(path, enc, len - 30), 0);
    free(enc);
    free(px);
}

Test(image_errors, corrupt_images_fail_naming_the_sample)
{
    hdmlp_dataset *ds = image_dataset(30, 40, 30, 0, add_damaged);
    hdmlp_config *cfg = config(4, 1);
    hdmlp_image_config *ic = image_config(16, 16);
    hdmlp_loader *ld = loader(ds, cfg, ic);
    hdmlp_batch *b = NULL;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        hdmlp_batch_release(b);
    }
    cr_assert_eq(rc, HDMLP_E_CORRUPT, "%d %s", rc, hdmlp_last_error());
    const char *e = hdmlp_last_error();
    cr_assert(strstr(e, "broken.jpg") != NULL || strstr(e, "truncated.png") != NULL, "%s", e);
    /* failing stays failed */
    cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_E_CORRUPT);
    hdmlp_loader_free(ld);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

Test(image_errors, corrupt_images_skipped_and_counted)
{
    hdmlp_dataset *ds = image_dataset(30, 40, 30, 0, add_damaged);
    hdmlp_config *cfg = config(4, 2);
    hdmlp_config_set_on_corrupt(cfg, HDMLP_CORRUPT_SKIP);
    hdmlp_image_config *ic = image_config(16, 16);
    hdmlp_loader *ld = loader(ds, cfg, ic);
    static run r;
    cr_assert_eq(drain(ld, &r, 1), HDMLP_END, "%s", hdmlp_last_error());
    cr_assert_eq(r.n, 2 * 30); /* 32 samples per epoch, 2 damaged */
    hdmlp_stats st;
    hdmlp_loader_stats(ld, &st, sizeof st);
    cr_assert_eq(st.skipped_samples, 4);
    cr_assert_eq(st.decode_failures, 4);
    cr_assert_eq(st.images_decoded, 60);
    cr_assert_eq(st.samples, 60);
    char skip[512];
    hdmlp_loader_last_skip(ld, skip, sizeof(skip));
    cr_assert(strstr(skip, "broken.jpg") != NULL || strstr(skip, "truncated.png") != NULL, "%s",
              skip);
    hdmlp_loader_free(ld);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

/* Only the damaged images (no good one): packed without image_dataset's generated ones. */
static hdmlp_dataset *all_damaged_dataset(void)
{
    cr_assert_eq(testds_mkdtemp("img", tmp_dir, sizeof(tmp_dir)), 0);
    char src[600], out[600], sub[700];
    snprintf(src, sizeof(src), "%s/src", tmp_dir);
    snprintf(out, sizeof(out), "%s/ds", tmp_dir);
    cr_assert_eq(mkdir(src, 0755), 0);
    for (int l = 0; l < 2; l++) {
        snprintf(sub, sizeof(sub), "%s/class-%d", src, l);
        cr_assert_eq(mkdir(sub, 0755), 0);
    }
    add_damaged(src);
    cr_assert_eq(testimg_pack(src, out, 0, 2, 40, 30, 0, pack_k), 0);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(out, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    return ds;
}

Test(image_errors, skip_mode_fails_when_every_image_of_an_epoch_is_corrupt)
{
    hdmlp_dataset *ds = all_damaged_dataset();
    hdmlp_config *cfg = config(1, 2);
    hdmlp_config_set_on_corrupt(cfg, HDMLP_CORRUPT_SKIP);
    hdmlp_image_config *ic = image_config(16, 16);
    hdmlp_loader *ld = loader(ds, cfg, ic);
    hdmlp_batch *b = NULL;
    int rc;
    uint64_t got = 0, batches = 0;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        got += hdmlp_batch_size(b);
        batches++;
        hdmlp_batch_release(b);
    }
    const char *e = hdmlp_last_error();
    cr_assert_eq(rc, HDMLP_E_CORRUPT, "%s: %s", hdmlp_err_name(rc), e);
    cr_assert(strstr(e, "every sample of epoch 0") != NULL, "%s", e);
    cr_assert(strstr(e, "broken.jpg") != NULL || strstr(e, "truncated.png") != NULL, "%s", e);
    cr_assert_eq(got, 0);
    cr_assert_eq(batches, 1, "the epoch's first (empty) batch, then the error");
    cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_E_CORRUPT, "failing stays failed");
    hdmlp_loader_free(ld);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

Test(image_errors, misuse_is_refused)
{
    hdmlp_dataset *ds = image_dataset(10, 40, 30, 0, NULL);
    hdmlp_config *cfg = config(4, 1);
    hdmlp_loader *ld = loader(ds, cfg, NULL);
    hdmlp_batch *b = NULL;
    cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_OK);
    hdmlp_image_batch ib;
    cr_assert_eq(hdmlp_batch_image(b, &ib), HDMLP_E_STATE);
    cr_assert_eq(hdmlp_batch_image(NULL, &ib), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_batch_image(b, NULL), HDMLP_E_INVAL);
    hdmlp_batch_release(b);
    hdmlp_loader_free(ld);
    /* 4 buffers (prefetch 2, two held) of 4 × 2048 × 2048 × 3 bytes do not fit in 64 MiB */
    hdmlp_image_config *ic = image_config(2048, 2048);
    cr_assert_eq(hdmlp_config_set_image(cfg, ic), HDMLP_OK);
    ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_E_RANGE);
    cr_assert_null(ld);
    cr_assert(strstr(hdmlp_last_error(), "memory budget") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_config_set_image(NULL, ic), HDMLP_E_INVAL);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

/* Creates a loader at the smallest budget (in 64 KiB steps from `from`) that
 * hdmlp_loader_create accepts for this pipeline. */
static hdmlp_loader *smallest_loader(hdmlp_dataset *ds, hdmlp_config *cfg,
                                     const hdmlp_image_config *ic, uint64_t from)
{
    cr_assert_eq(hdmlp_config_set_image(cfg, ic), HDMLP_OK);
    for (uint64_t m = from; m < (256ull << 20); m += 64 << 10) {
        hdmlp_config_set_memory(cfg, m);
        hdmlp_loader *ld = NULL;
        const int rc = hdmlp_loader_create(ds, cfg, &ld);
        if (rc == HDMLP_OK) {
            return ld;
        }
        cr_assert_eq(rc, HDMLP_E_RANGE, "%s", hdmlp_last_error());
    }
    cr_assert_fail("no budget below 256 MiB accepted");
    return NULL;
}

/* Whatever budget creation accepts, a loop that holds the batch it works on while asking
 * for the next (as `for x, y in loader` does) runs to the end within it. */
Test(image_errors, the_smallest_accepted_budget_runs_a_loop_holding_one_batch)
{
    pack_k = 4;
    hdmlp_dataset *ds = image_dataset(64, 60, 50, 0, NULL);
    pack_k = 8;
    hdmlp_config *cfg = config(8, 2);
    hdmlp_image_config *ic = image_config(96, 96);
    hdmlp_loader *ld = smallest_loader(ds, cfg, ic, 64 << 10);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_assert_geq(st.budget_images, 4ull * 8 * 96 * 96 * 3); /* prefetch 2 + two held */
    hdmlp_batch *held = NULL, *b = NULL;
    uint64_t n = 0;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        n += hdmlp_batch_size(b);
        hdmlp_batch_release(held);
        held = b;
    }
    cr_assert_eq(rc, HDMLP_END, "%s", hdmlp_last_error());
    cr_assert_eq(n, 128);
    hdmlp_batch_release(held);
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_assert_leq(st.peak_memory_bytes, st.memory_budget);
    hdmlp_loader_free(ld);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

/* Holding more decoded batches than the two the budget keeps room for is reported (after a
 * grace period for releases from other threads) and resumable, as without the pipeline. */
Test(image_errors, holding_too_many_decoded_batches_is_reported_and_resumable)
{
    hdmlp_dataset *ds = image_dataset(64, 60, 50, 0, NULL);
    hdmlp_config *cfg = config(8, 1);
    hdmlp_image_config *ic = image_config(64, 64);
    hdmlp_loader *ld = loader(ds, cfg, ic);
    hdmlp_batch *held[8] = {NULL};
    int n_held = 0, rc;
    uint64_t n = 0;
    while ((rc = hdmlp_loader_next(ld, &held[n_held])) == HDMLP_OK) {
        n += hdmlp_batch_size(held[n_held]);
        n_held++;
        cr_assert_lt(n_held, 8, "eight decoded batches held without an error");
    }
    cr_assert_eq(rc, HDMLP_E_NOMEM, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "decoded batches are held") != NULL, "%s",
              hdmlp_last_error());
    cr_assert_geq(n_held, 2);
    for (int i = 0; i < n_held; i++) {
        hdmlp_batch_release(held[i]);
    }
    hdmlp_batch *b = NULL;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        n += hdmlp_batch_size(b);
        hdmlp_batch_release(b);
    }
    cr_assert_eq(rc, HDMLP_END, "%s", hdmlp_last_error());
    cr_assert_eq(n, 64);
    hdmlp_loader_free(ld);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

/* An allocator that counts, and can misbehave: mode 1 returns NULL, mode 2 a misaligned
 * pointer (its block stays owned: freed through the offset). */
typedef struct counting {
    pthread_mutex_t lock;
    int mode;
    uint64_t allocs, frees, live_bytes;
} counting;

static void *count_alloc(void *arg, size_t bytes)
{
    counting *c = arg;
    if (c->mode == 1) {
        return NULL;
    }
    uint8_t *p = aligned_alloc(64, (bytes + 64 + 63) / 64 * 64);
    pthread_mutex_lock(&c->lock);
    c->allocs++;
    c->live_bytes += bytes;
    pthread_mutex_unlock(&c->lock);
    return c->mode == 2 ? p + 8 : p;
}

static void count_free(void *arg, void *ptr, size_t bytes)
{
    counting *c = arg;
    pthread_mutex_lock(&c->lock);
    c->frees++;
    c->live_bytes -= bytes;
    pthread_mutex_unlock(&c->lock);
    free(c->mode == 2 ? (uint8_t *)ptr - 8 : ptr);
}

Test(image_errors, user_allocator_gets_every_buffer_back)
{
    hdmlp_dataset *ds = image_dataset(30, 40, 30, 0, NULL);
    hdmlp_config *cfg = config(4, 2);
    hdmlp_image_config *ic = image_config(16, 16);
    counting c = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};
    cr_assert_eq(hdmlp_image_config_set_allocator(ic, count_alloc, NULL, &c), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_allocator(ic, count_alloc, count_free, &c), HDMLP_OK);
    hdmlp_loader *ld = loader(ds, cfg, ic);
    hdmlp_batch *held = NULL, *b = NULL;
    uint32_t batches = 0;
    while (hdmlp_loader_next(ld, &b) == HDMLP_OK) {
        hdmlp_image_batch ib;
        cr_assert_eq(hdmlp_batch_image(b, &ib), HDMLP_OK);
        cr_assert_eq((uintptr_t)ib.data % 64, 0);
        if (held == NULL) {
            held = b; /* one batch outlives the loader */
        } else {
            hdmlp_batch_release(b);
        }
        batches++;
    }
    cr_assert_eq(batches, 16); /* 2 epochs of 30 in batches of 4 */
    /* released buffers are reused (test_image_pool.c): fewer than one a batch */
    cr_assert_lt(c.allocs, 16);
    hdmlp_loader_free(ld);
    cr_assert_eq(c.frees + 1, c.allocs); /* all but the held batch's */
    hdmlp_batch_release(held);
    cr_assert_eq(c.frees, c.allocs);
    cr_assert_eq(c.live_bytes, 0);
    /* NULL and misaligned buffers fail the loader, naming the allocator */
    for (int mode = 1; mode <= 2; mode++) {
        c.mode = mode;
        ld = loader(ds, cfg, ic);
        cr_assert_eq(hdmlp_loader_next(ld, &b), mode == 1 ? HDMLP_E_NOMEM : HDMLP_E_INVAL);
        cr_assert(strstr(hdmlp_last_error(), "allocator") != NULL, "%s", hdmlp_last_error());
        hdmlp_loader_free(ld);
    }
    cr_assert_eq(c.live_bytes, 0);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

/* Damages sample `index` where it is stored (datasets here are packed without compression,
 * so its bytes appear as they are in the segment): its checksum fails when read. */
static void damage_sample(hdmlp_dataset *ds, uint64_t index)
{
    hdmlp_sample_info info;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, index, &info), HDMLP_OK);
    uint8_t *want = malloc(info.raw_size);
    size_t n = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, index, want, info.raw_size, &n), HDMLP_OK);
    char path[700];
    snprintf(path, sizeof(path), "%s/ds/segment-000000", tmp_dir);
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(testds_read_file(path, &buf, &len), 0, "%s", path);
    uint8_t *at = memmem(buf, len, want, n);
    cr_assert_not_null(at, "sample %llu not found in %s", (unsigned long long)index, path);
    at[n / 2] ^= 0x5a;
    cr_assert_eq(testds_write_file(path, buf, len), 0);
    free(buf);
    free(want);
}

Test(image_errors, read_failure_comes_after_the_same_batches_as_without_the_pipeline)
{
    /* A sample fails its checksum, and with it the refill (chunk of 2) holding it: the batches
     * before the failure are delivered with and without the pipeline, which has assembled
     * several of them and met the failure ahead of the consumer (it sleeps before asking, so
     * the reads are done). */
    pack_k = 2;
    hdmlp_dataset *ds = image_dataset(60, 40, 30, 0, NULL);
    pack_k = 8;
    hdmlp_config *cfg = config(4, 1);
    hdmlp_config_set_ram_cache(cfg, 0);
    static run clean, plain, piped;
    hdmlp_loader *a = loader(ds, cfg, NULL);
    cr_assert_eq(drain(a, &clean, 0), HDMLP_END);
    hdmlp_loader_free(a);
    /* the chunk whose first sample comes latest */
    uint32_t first[30];
    for (int c = 0; c < 30; c++) {
        first[c] = UINT32_MAX;
    }
    for (uint32_t i = 0; i < 60; i++) {
        const uint64_t c = clean.idx[i] / 2;
        first[c] = first[c] < i ? first[c] : i;
    }
    uint32_t late = 0;
    for (uint32_t c = 1; c < 30; c++) {
        late = first[c] > first[late] ? c : late;
    }
    cr_assert_geq(first[late], 16);
    damage_sample(ds, (uint64_t)late * 2);
    hdmlp_dataset_close(ds);
    char path[700];
    snprintf(path, sizeof(path), "%s/ds", tmp_dir);
    cr_assert_eq(hdmlp_dataset_open(path, &ds), HDMLP_OK);
    a = loader(ds, cfg, NULL);
    const int rc_plain = drain(a, &plain, 0);
    char err_plain[512];
    snprintf(err_plain, sizeof(err_plain), "%s", hdmlp_last_error());
    hdmlp_loader_free(a);
    cr_assert_eq(rc_plain, HDMLP_E_CORRUPT, "%s", err_plain);
    cr_assert_eq(plain.n, first[late] / 4 * 4, "%u", plain.n);
    hdmlp_image_config *ic = image_config(12, 12);
    hdmlp_image_config_set_prefetch(ic, 8);
    hdmlp_loader *b = loader(ds, cfg, ic);
    usleep(300 * 1000);
    const int rc_piped = drain(b, &piped, 1);
    cr_assert_eq(rc_piped, HDMLP_E_CORRUPT);
    cr_assert_str_eq(hdmlp_last_error(), err_plain);
    hdmlp_batch *x = NULL;
    cr_assert_eq(hdmlp_loader_next(b, &x), HDMLP_E_CORRUPT); /* and stays failed */
    hdmlp_loader_free(b);
    cr_assert_eq(piped.n, plain.n);
    cr_assert_eq(piped.batches, plain.batches);
    cr_assert_arr_eq(piped.idx, plain.idx, plain.n * sizeof(uint64_t));
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}
