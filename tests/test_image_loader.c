/*
 * The loader with the image pipeline on, end to end over small image datasets packed in the
 * test: the same samples in the same batches as without it (exactly once per epoch), pixels
 * equal to the libraries' decodes, output identical for any number of decode threads,
 * shape/dtype/layout, corrupt images under fail and skip, exact resume, and misuse.
 */
#include "hdmlp.h"
#include "loader.h"
#include "support/fakenet.h"
#include "support/testds.h"
#include "support/testimg.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_dir[512];

static void cleanup(void)
{
    if (tmp_dir[0] != '\0') {
        testds_rm_rf(tmp_dir);
        tmp_dir[0] = '\0';
    }
}

TestSuite(image_loader, .fini = cleanup, .timeout = 120);

/* Packs n images (sides around w × h, or exactly with exact) into a fresh directory and
 * opens the dataset; extra(dir) may add files to the image folders before packing. */
static uint32_t pack_k = 8; /* samples per chunk of the next image_dataset */

static hdmlp_dataset *image_dataset(uint32_t n, uint32_t w, uint32_t h, int exact,
                                    void (*extra)(const char *dir))
{
    cr_assert_eq(testds_mkdtemp("img", tmp_dir, sizeof(tmp_dir)), 0);
    char src[600], out[600];
    snprintf(src, sizeof(src), "%s/src", tmp_dir);
    snprintf(out, sizeof(out), "%s/ds", tmp_dir);
    cr_assert_eq(mkdir(src, 0755), 0);
    cr_assert_eq(testimg_pack(src, out, n, 3, w, h, exact, pack_k), 0);
    if (extra != NULL) {
        extra(src);
        cr_assert_eq(testimg_pack(src, out, 0, 3, w, h, exact, pack_k), 0);
    }
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(out, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    return ds;
}

static hdmlp_config *config(uint32_t batch, uint64_t epochs)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    hdmlp_config_set_batch_size(cfg, batch);
    hdmlp_config_set_epochs(cfg, epochs);
    hdmlp_config_set_seed(cfg, 1234);
    hdmlp_config_set_memory(cfg, 64ull << 20);
    return cfg;
}

static hdmlp_image_config *image_config(uint32_t h, uint32_t w)
{
    hdmlp_image_config *ic = NULL;
    cr_assert_eq(hdmlp_image_config_create(&ic), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_size(ic, h, w), HDMLP_OK);
    return ic;
}

static hdmlp_loader *loader(hdmlp_dataset *ds, hdmlp_config *cfg, const hdmlp_image_config *ic)
{
    cr_assert_eq(hdmlp_config_set_image(cfg, ic), HDMLP_OK);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    return ld;
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        x = (x ^ p[i]) * 0x100000001b3ull;
    }
    return x;
}

/* Delivered indices in order and a hash of each delivered image per (epoch, index). */
typedef struct run {
    uint64_t idx[4096];
    uint32_t batch_end[512]; /* cumulative sizes */
    uint64_t hash[4][512];
    uint32_t n, batches;
} run;

static int drain(hdmlp_loader *ld, run *r, int images)
{
    memset(r, 0, sizeof(*r));
    hdmlp_batch *b = NULL;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        const uint64_t ep = hdmlp_batch_epoch(b);
        if (images) {
            hdmlp_image_batch ib;
            cr_assert_eq(hdmlp_batch_image(b, &ib), HDMLP_OK);
            cr_assert_eq(ib.n, hdmlp_batch_size(b));
            const uint64_t one = ib.bytes / (ib.n ? ib.n : 1);
            for (uint32_t i = 0; i < ib.n; i++) {
                cr_assert_eq(ib.indices[i], v[i].index);
                cr_assert_eq(ib.labels[i], v[i].label);
                cr_assert_eq(v[i].data, (const uint8_t *)ib.data + i * one);
                cr_assert_eq(v[i].size, one);
                r->hash[ep][ib.indices[i]] = fnv((const uint8_t *)ib.data + i * one, one);
            }
        }
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            r->idx[r->n++] = v[i].index;
        }
        r->batch_end[r->batches++] = r->n;
        hdmlp_batch_release(b);
    }
    return rc;
}

Test(image_loader, same_batches_as_without_the_pipeline_exactly_once)
{
    hdmlp_dataset *ds = image_dataset(90, 48, 40, 0, NULL);
    static run raw, img;
    hdmlp_config *cfg = config(10, 2);
    hdmlp_loader *a = loader(ds, cfg, NULL);
    cr_assert_eq(drain(a, &raw, 0), HDMLP_END);
    hdmlp_loader_free(a);
    hdmlp_image_config *ic = image_config(32, 32);
    hdmlp_loader *b = loader(ds, cfg, ic);
    cr_assert_eq(drain(b, &img, 1), HDMLP_END, "%s", hdmlp_last_error());
    cr_assert_eq(img.n, 180);
    cr_assert_eq(img.batches, raw.batches);
    cr_assert_arr_eq(img.idx, raw.idx, sizeof(uint64_t) * 180);
    cr_assert_arr_eq(img.batch_end, raw.batch_end, sizeof(uint32_t) * raw.batches);
    for (int e = 0; e < 2; e++) {
        uint8_t seen[90] = {0};
        for (int i = 0; i < 90; i++) {
            seen[img.idx[e * 90 + i]]++;
        }
        for (int i = 0; i < 90; i++) {
            cr_assert_eq(seen[i], 1, "epoch %d sample %d", e, i);
        }
    }
    /* epochs crop differently */
    int same = 0;
    for (int i = 0; i < 90; i++) {
        same += img.hash[0][i] == img.hash[1][i];
    }
    cr_assert_lt(same, 20);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(b, &st), HDMLP_OK);
    cr_assert_eq(st.images_decoded, 180);
    cr_assert_eq(st.decode_failures, 0);
    cr_assert_eq(st.samples, 180);
    cr_assert_geq(st.decode_threads_active, 1);
    cr_assert_geq(st.io_threads_active, 1);
    cr_assert_gt(st.decode_busy_ns, 0);
    cr_assert_leq(st.peak_memory_bytes, st.memory_budget);
    hdmlp_loader_free(b);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

Test(image_loader, pixels_equal_the_libraries_decode)
{
    /* VAL with crop fraction 1 on images of exactly the output size: the identity, so each
     * output image is the decoded file (JPEG: TurboJPEG's decode; PNG: libspng's). */
    hdmlp_dataset *ds = image_dataset(24, 40, 30, 1, NULL);
    hdmlp_config *cfg = config(5, 1);
    hdmlp_image_config *ic = image_config(30, 40);
    hdmlp_image_config_set_mode(ic, HDMLP_IMAGE_VAL);
    hdmlp_image_config_set_crop_fraction(ic, 1.0);
    hdmlp_loader *ld = loader(ds, cfg, ic);
    hdmlp_batch *b = NULL;
    uint32_t checked = 0;
    while (hdmlp_loader_next(ld, &b) == HDMLP_OK) {
        hdmlp_image_batch ib;
        cr_assert_eq(hdmlp_batch_image(b, &ib), HDMLP_OK);
        cr_assert(ib.height == 30 && ib.width == 40 && ib.channels == 3);
        cr_assert(ib.layout == HDMLP_LAYOUT_NHWC && ib.dtype == HDMLP_DTYPE_UINT8);
        for (uint32_t i = 0; i < ib.n; i++) {
            hdmlp_sample_info info;
            cr_assert_eq(hdmlp_dataset_sample_info(ds, ib.indices[i], &info), HDMLP_OK);
            uint8_t *enc = malloc(info.raw_size), *ref = NULL;
            size_t len = 0;
            cr_assert_eq(hdmlp_dataset_read_sample(ds, ib.indices[i], enc, info.raw_size, &len),
                         HDMLP_OK);
            uint32_t rw = 0, rh = 0;
            const int png = len > 1 && enc[1] == 'P';
            cr_assert_eq(png ? testimg_ref_png(enc, len, &ref, &rw, &rh)
                             : testimg_ref_jpeg(enc, len, 3, 1, &ref, &rw, &rh),
                         0);
            cr_assert(rw == 40 && rh == 30);
            cr_assert_arr_eq((const uint8_t *)ib.data + (size_t)i * 30 * 40 * 3, ref,
                             30 * 40 * 3, "sample %llu (%s)", (unsigned long long)ib.indices[i],
                             png ? "PNG" : "JPEG");
            free(enc);
            free(ref);
            checked++;
        }
        hdmlp_batch_release(b);
    }
    cr_assert_eq(checked, 24);
    hdmlp_loader_free(ld);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

Test(image_loader, output_does_not_depend_on_thread_counts)
{
    hdmlp_dataset *ds = image_dataset(60, 64, 48, 0, NULL);
    static run r[3];
    const uint32_t decode[3] = {1, 3, 0};
    const uint32_t io[3] = {1, 2, 3};
    for (int k = 0; k < 3; k++) {
        hdmlp_config *cfg = config(7, 2);
        hdmlp_config_set_threads(cfg, io[k]);
        hdmlp_image_config *ic = image_config(24, 20);
        hdmlp_image_config_set_decode_threads(ic, decode[k]);
        hdmlp_image_config_set_prefetch(ic, (uint32_t)k + 1);
        hdmlp_loader *ld = loader(ds, cfg, ic);
        cr_assert_eq(drain(ld, &r[k], 1), HDMLP_END);
        hdmlp_loader_free(ld);
        hdmlp_image_config_free(ic);
        hdmlp_config_free(cfg);
    }
    for (int k = 1; k < 3; k++) {
        cr_assert_arr_eq(r[k].idx, r[0].idx, sizeof(uint64_t) * 120);
        cr_assert_arr_eq(r[k].hash, r[0].hash, sizeof(r[0].hash), "run %d", k);
    }
    hdmlp_dataset_close(ds);
}

Test(image_loader, float32_nchw_is_the_normalised_uint8_nhwc)
{
    hdmlp_dataset *ds = image_dataset(20, 50, 40, 0, NULL);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    hdmlp_config *cfg = config(6, 1);
    hdmlp_image_config *u8 = image_config(16, 24);
    hdmlp_image_config *f32 = image_config(16, 24);
    hdmlp_image_config_set_dtype(f32, HDMLP_DTYPE_FLOAT32);
    hdmlp_image_config_set_layout(f32, HDMLP_LAYOUT_NCHW);
    hdmlp_image_config_set_normalize(f32, mean, std);
    hdmlp_loader *a = loader(ds, cfg, u8);
    hdmlp_loader *b = loader(ds, cfg, f32);
    hdmlp_batch *x = NULL, *y = NULL;
    uint32_t n = 0;
    while (hdmlp_loader_next(a, &x) == HDMLP_OK) {
        cr_assert_eq(hdmlp_loader_next(b, &y), HDMLP_OK);
        hdmlp_image_batch ix, iy;
        cr_assert_eq(hdmlp_batch_image(x, &ix), HDMLP_OK);
        cr_assert_eq(hdmlp_batch_image(y, &iy), HDMLP_OK);
        cr_assert(iy.dtype == HDMLP_DTYPE_FLOAT32 && iy.layout == HDMLP_LAYOUT_NCHW);
        cr_assert_eq(iy.bytes, ix.bytes * 4);
        cr_assert_eq((uintptr_t)iy.data % 64, 0);
        const uint8_t *p = ix.data;
        const float *q = iy.data;
        for (uint32_t i = 0; i < ix.n; i++) {
            for (uint32_t yy = 0; yy < 16; yy++) {
                for (uint32_t xx = 0; xx < 24; xx++) {
                    for (uint32_t c = 0; c < 3; c++) {
                        const float want =
                            (p[((i * 16 + yy) * 24 + xx) * 3 + c] / 255.0f - mean[c]) / std[c];
                        const float got = q[((i * 3 + c) * 16 + yy) * 24 + xx];
                        cr_assert_float_eq(got, want, 1e-5, "image %u (%u,%u,%u)", i, yy, xx,
                                           c);
                    }
                }
            }
        }
        n += ix.n;
        hdmlp_batch_release(x);
        hdmlp_batch_release(y);
    }
    cr_assert_eq(n, 20);
    hdmlp_loader_free(a);
    hdmlp_loader_free(b);
    hdmlp_image_config_free(u8);
    hdmlp_image_config_free(f32);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

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

Test(image_loader, corrupt_images_fail_naming_the_sample)
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

Test(image_loader, corrupt_images_skipped_and_counted)
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
    hdmlp_loader_stats(ld, &st);
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

Test(image_loader, resume_continues_with_the_same_images)
{
    hdmlp_dataset *ds = image_dataset(40, 40, 30, 0, NULL);
    hdmlp_config *cfg = config(6, 2);
    hdmlp_image_config *ic = image_config(12, 12);
    static run full;
    hdmlp_loader *a = loader(ds, cfg, ic);
    cr_assert_eq(drain(a, &full, 1), HDMLP_END);
    hdmlp_loader_free(a);
    /* three batches (with more decoded ahead), save, resume in a new loader */
    hdmlp_loader *b = loader(ds, cfg, ic);
    hdmlp_batch *x = NULL;
    uint32_t got = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hdmlp_loader_next(b, &x), HDMLP_OK);
        got += (uint32_t)hdmlp_batch_size(x);
        hdmlp_batch_release(x);
    }
    uint8_t state[HDMLP_STATE_MAX];
    size_t len = 0;
    cr_assert_eq(hdmlp_loader_save_state(b, state, sizeof(state), &len), HDMLP_OK);
    hdmlp_loader_free(b);
    cr_assert_eq(hdmlp_config_set_resume(cfg, state, len), HDMLP_OK);
    hdmlp_loader *c = loader(ds, cfg, ic);
    static run rest;
    cr_assert_eq(drain(c, &rest, 1), HDMLP_END);
    cr_assert_eq(got + rest.n, full.n);
    cr_assert_arr_eq(rest.idx, full.idx + got, rest.n * sizeof(uint64_t));
    for (int e = 0; e < 2; e++) {
        for (uint32_t i = 0; i < 40; i++) {
            if (rest.hash[e][i] != 0) {
                cr_assert_eq(rest.hash[e][i], full.hash[e][i], "epoch %d sample %u", e, i);
            }
        }
    }
    hdmlp_loader_free(c);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

Test(image_loader, misuse_is_refused)
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
    /* 6 buffers of 4 × 1024 × 1024 × 3 bytes do not fit in half of 64 MiB */
    hdmlp_image_config *ic = image_config(1024, 1024);
    cr_assert_eq(hdmlp_config_set_image(cfg, ic), HDMLP_OK);
    ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_E_INVAL);
    cr_assert_null(ld);
    cr_assert(strstr(hdmlp_last_error(), "memory budget") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_config_set_image(NULL, ic), HDMLP_E_INVAL);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}

typedef struct rank_ctx {
    hdmlp_loader *ld;
    run r;
    int rc;
} rank_ctx;

static void *rank_main(void *arg)
{
    rank_ctx *c = arg;
    c->rc = drain(c->ld, &c->r, 1);
    hdmlp_loader_free(c->ld);
    return NULL;
}

Test(image_loader, three_ranks_exactly_once_with_the_same_pixels)
{
    /* Each rank decodes what it is given; samples cross ranks raw. A sample's image in an
     * epoch does not depend on which rank delivers it. */
    hdmlp_dataset *ds = image_dataset(60, 96, 72, 0, NULL);
    hdmlp_image_config *ic = image_config(16, 20);
    hdmlp_config *cfg = config(5, 2);
    static run one;
    hdmlp_loader *ld = loader(ds, cfg, ic);
    cr_assert_eq(drain(ld, &one, 1), HDMLP_END);
    hdmlp_loader_free(ld);
    fakenet *hub = NULL;
    cr_assert_eq(fakenet_create(3, &hub), HDMLP_OK);
    static rank_ctx ranks[3];
    const char *peers[3] = {"127.0.0.1:1", "127.0.0.1:1", "127.0.0.1:1"};
    /* a small budget and no chunk cache: abstract memory holds a fraction of the dataset */
    hdmlp_config_set_memory(cfg, 1ull << 20);
    hdmlp_config_set_ram_cache(cfg, 0);
    for (uint32_t r = 0; r < 3; r++) {
        hdmlp_config_set_rank(cfg, r, 3);
        hdmlp_config_set_peers(cfg, peers, 3);
        hdmlp_config_set_peer_timeout(cfg, 5000);
        cr_assert_eq(loader_create_with(ds, cfg, fakenet_factory, &ranks[r].ld), HDMLP_OK, "%s",
                     hdmlp_last_error());
    }
    pthread_t th[3];
    for (int r = 0; r < 3; r++) {
        pthread_create(&th[r], NULL, rank_main, &ranks[r]);
    }
    for (int r = 0; r < 3; r++) {
        pthread_join(th[r], NULL);
    }
    fakenet_free(hub);
    uint8_t seen[2][60] = {{0}};
    uint32_t total = 0;
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(ranks[r].rc, HDMLP_END, "rank %d: %d", r, ranks[r].rc);
        total += ranks[r].r.n;
        for (int e = 0; e < 2; e++) {
            for (int i = 0; i < 60; i++) {
                if (ranks[r].r.hash[e][i] != 0) {
                    seen[e][i]++;
                    cr_assert_eq(ranks[r].r.hash[e][i], one.hash[e][i],
                                 "rank %d epoch %d sample %d", r, e, i);
                }
            }
        }
    }
    cr_assert_eq(total, 120);
    for (int e = 0; e < 2; e++) {
        for (int i = 0; i < 60; i++) {
            cr_assert_eq(seen[e][i], 1, "epoch %d sample %d", e, i);
        }
    }
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

Test(image_loader, user_allocator_gets_every_buffer_back)
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
    hdmlp_loader_free(ld);
    cr_assert_eq(c.allocs, 16);
    cr_assert_eq(c.frees, 15);
    hdmlp_batch_release(held);
    cr_assert_eq(c.frees, 16);
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

Test(image_loader, read_failure_comes_after_the_same_batches_as_without_the_pipeline)
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
