/*
 * The image pipeline's output buffers: a released batch's buffer comes back for a later
 * batch, the buffers held (in use and pooled) never pass what the reserve covers, a batch
 * the user still holds is never reused, every buffer goes back at teardown, and the images
 * do not depend on what a reused buffer held before.
 */
#include "hdmlp.h"
#include "support/testds.h"
#include "support/testimg.h"
#include "test_image_common.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

TestSuite(image_pool, .fini = cleanup, .timeout = 120);

/* An allocator that counts the buffers out at once (and their peak) and fills each new
 * buffer with `fill`. */
typedef struct counting {
    pthread_mutex_t lock;
    int fill;
    uint64_t allocs, frees, live, live_peak, live_bytes, live_bytes_peak;
} counting;

static void *count_alloc(void *arg, size_t bytes)
{
    counting *c = arg;
    uint8_t *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    cr_assert_not_null(p);
    memset(p, c->fill, bytes);
    pthread_mutex_lock(&c->lock);
    c->allocs++;
    c->live++;
    c->live_bytes += bytes;
    c->live_peak = c->live > c->live_peak ? c->live : c->live_peak;
    c->live_bytes_peak =
        c->live_bytes > c->live_bytes_peak ? c->live_bytes : c->live_bytes_peak;
    pthread_mutex_unlock(&c->lock);
    return p;
}

static void count_free(void *arg, void *ptr, size_t bytes)
{
    counting *c = arg;
    pthread_mutex_lock(&c->lock);
    c->frees++;
    c->live--;
    c->live_bytes -= bytes;
    pthread_mutex_unlock(&c->lock);
    free(ptr);
}

static hdmlp_image_config *counted_config(uint32_t side, counting *c)
{
    hdmlp_image_config *ic = image_config(side, side);
    cr_assert_eq(hdmlp_image_config_set_allocator(ic, count_alloc, count_free, c), HDMLP_OK);
    return ic;
}

static void *batch_data(const hdmlp_batch *b)
{
    hdmlp_image_batch ib;
    cr_assert_eq(hdmlp_batch_image(b, &ib), HDMLP_OK);
    return ib.data;
}

/* Batches of 8 of 64 images, 3 epochs: prefetch 2 + two held = 4 buffers of 8 × 32 × 32 × 3
 * bytes are what the reserve covers. `hold` batches are kept while asking for the next. */
static void run_holding(int hold)
{
    hdmlp_dataset *ds = image_dataset(64, 60, 50, 0, NULL);
    hdmlp_config *cfg = config(8, 3);
    counting c = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0, 0};
    hdmlp_image_config *ic = counted_config(32, &c);
    hdmlp_loader *ld = loader(ds, cfg, ic);
    const uint64_t full = 8ull * 32 * 32 * 3;
    hdmlp_batch *held[2] = {NULL, NULL};
    void *first = NULL;
    uint32_t batches = 0, came_back = 0;
    hdmlp_batch *b = NULL;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        void *data = batch_data(b);
        if (first == NULL) {
            first = data;
        } else if (data == first) {
            came_back++;
        }
        batches++;
        if (hold == 0) {
            hdmlp_batch_release(b);
            continue;
        }
        hdmlp_batch_release(held[0]);
        held[0] = held[1];
        held[1] = b;
        if (hold == 1) {
            hdmlp_batch_release(held[0]);
            held[0] = NULL;
        }
    }
    cr_assert_eq(rc, HDMLP_END, "%s", hdmlp_last_error());
    cr_assert_eq(batches, 24);
    cr_assert_gt(came_back, 0, "the first batch's buffer never came back (hold %d)", hold);
    cr_assert_leq(c.allocs, 4, "hold %d: %llu buffers allocated", hold,
                  (unsigned long long)c.allocs);
    cr_assert_leq(c.live_peak, 4, "hold %d: %llu buffers out at once", hold,
                  (unsigned long long)c.live_peak);
    cr_assert_leq(c.live_bytes_peak, 4 * full);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
    cr_assert_leq(st.peak_memory_bytes, st.memory_budget);
    hdmlp_batch_release(held[0]);
    hdmlp_batch_release(held[1]);
    cr_assert_gt(c.live, 0, "pooled buffers are kept until the loader is freed");
    hdmlp_loader_free(ld);
    cr_assert_eq(c.frees, c.allocs);
    cr_assert_eq(c.live_bytes, 0);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

Test(image_pool, released_buffers_come_back_within_the_reserve)
{
    for (int hold = 0; hold <= 2; hold++) {
        run_holding(hold);
        cleanup();
    }
}

/* The library's own buffers: the address of a released batch's buffer comes back. */
Test(image_pool, default_allocator_buffers_come_back)
{
    hdmlp_dataset *ds = image_dataset(64, 60, 50, 0, NULL);
    hdmlp_config *cfg = config(8, 2);
    hdmlp_image_config *ic = image_config(32, 32);
    hdmlp_loader *ld = loader(ds, cfg, ic);
    void *seen[16] = {NULL};
    uint32_t n = 0, repeats = 0;
    hdmlp_batch *b = NULL;
    while (hdmlp_loader_next(ld, &b) == HDMLP_OK) {
        void *data = batch_data(b);
        for (uint32_t i = 0; i < n; i++) {
            repeats += seen[i] == data;
        }
        cr_assert_lt(n, 16);
        seen[n++] = data;
        hdmlp_batch_release(b);
    }
    cr_assert_eq(n, 16);
    cr_assert_geq(repeats, 12, "only %u of 16 batches reused a buffer", repeats);
    hdmlp_loader_free(ld);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

/* A batch held through the rest of the run (and past the loader) keeps its buffer and its
 * pixels; it goes back to the user's allocator when released. */
Test(image_pool, a_held_batch_is_never_reused)
{
    hdmlp_dataset *ds = image_dataset(64, 60, 50, 0, NULL);
    hdmlp_config *cfg = config(8, 3);
    counting c = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0, 0};
    hdmlp_image_config *ic = counted_config(32, &c);
    hdmlp_loader *ld = loader(ds, cfg, ic);
    hdmlp_batch *held = NULL, *b = NULL;
    cr_assert_eq(hdmlp_loader_next(ld, &held), HDMLP_OK);
    hdmlp_image_batch hi;
    cr_assert_eq(hdmlp_batch_image(held, &hi), HDMLP_OK);
    uint8_t *want = malloc(hi.bytes);
    memcpy(want, hi.data, hi.bytes);
    uint32_t batches = 1;
    while (hdmlp_loader_next(ld, &b) == HDMLP_OK) {
        cr_assert_neq(batch_data(b), hi.data, "batch %u got the held batch's buffer", batches);
        hdmlp_batch_release(b);
        batches++;
    }
    cr_assert_eq(batches, 24);
    cr_assert_eq(memcmp(want, hi.data, hi.bytes), 0);
    const uint64_t frees = c.frees;
    hdmlp_loader_free(ld);
    cr_assert_eq(memcmp(want, hi.data, hi.bytes), 0);
    cr_assert_eq(c.frees + 1, c.allocs, "every buffer but the held one is back");
    cr_assert_geq(c.frees, frees);
    hdmlp_batch_release(held);
    cr_assert_eq(c.frees, c.allocs);
    cr_assert_eq(c.live_bytes, 0);
    free(want);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

/* Decodes 2 epochs of 30 images in batches of 4 (a last batch of 2 in a full batch's reused
 * buffer) into buffers that start as `fill`, then as what earlier batches left. */
static void images_with_fill(hdmlp_dataset *ds, int val, int fill, run *r)
{
    hdmlp_config *cfg = config(4, 2);
    counting c = {PTHREAD_MUTEX_INITIALIZER, fill, 0, 0, 0, 0, 0, 0};
    hdmlp_image_config *ic = counted_config(24, &c);
    if (val) {
        cr_assert_eq(hdmlp_image_config_set_mode(ic, HDMLP_IMAGE_VAL), HDMLP_OK);
        cr_assert_eq(hdmlp_image_config_set_layout(ic, HDMLP_LAYOUT_NCHW), HDMLP_OK);
        cr_assert_eq(hdmlp_image_config_set_dtype(ic, HDMLP_DTYPE_FLOAT32), HDMLP_OK);
    }
    hdmlp_loader *ld = loader(ds, cfg, ic);
    cr_assert_eq(drain(ld, r, 1), HDMLP_END, "%s", hdmlp_last_error());
    cr_assert_lt(c.allocs, r->batches, "no buffer was reused");
    hdmlp_loader_free(ld);
    cr_assert_eq(c.frees, c.allocs);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
}

Test(image_pool, images_do_not_depend_on_what_the_buffer_held)
{
    hdmlp_dataset *ds = image_dataset(30, 40, 30, 0, NULL);
    static run a, b;
    for (int val = 0; val <= 1; val++) {
        images_with_fill(ds, val, 0x00, &a);
        images_with_fill(ds, val, 0xff, &b);
        cr_assert_eq(a.n, 60);
        cr_assert_eq(a.batches, 16);
        cr_assert_eq(b.n, a.n);
        cr_assert_eq(memcmp(a.idx, b.idx, sizeof(a.idx)), 0);
        cr_assert_eq(memcmp(a.hash, b.hash, sizeof(a.hash)), 0, "val %d", val);
    }
    hdmlp_dataset_close(ds);
}
