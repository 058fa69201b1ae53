/*
 * The loader with the image pipeline on, end to end over small image datasets packed in the
 * test: the same samples in the same batches as without it (exactly once per epoch), pixels
 * equal to the libraries' decodes, output identical for any number of decode threads,
 * shape/dtype/layout, exact resume, and three ranks. Failures: test_image_errors.c.
 */
#include "hdmlp.h"
#include "loader.h"
#include "support/fakenet.h"
#include "support/testds.h"
#include "support/testimg.h"
#include "test_image_common.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(image_loader, .fini = cleanup, .timeout = 120);

/* Each of the 90 samples once in each of the run's 2 epochs. */
static void expect_each_once(const run *r)
{
    for (int e = 0; e < 2; e++) {
        uint8_t seen[90] = {0};
        for (int i = 0; i < 90; i++) {
            seen[r->idx[e * 90 + i]]++;
        }
        for (int i = 0; i < 90; i++) {
            cr_assert_eq(seen[i], 1, "epoch %d sample %d", e, i);
        }
    }
}

/* Drains a plain loader and one with the pipeline (ic) over the same config: the same
 * samples in the same batches, each once per epoch. Returns the pipeline's loader (its
 * decoded run in *img) for the caller's checks. */
static hdmlp_loader *same_batches_as_plain(hdmlp_dataset *ds, hdmlp_config *cfg,
                                           const hdmlp_image_config *ic, run *img)
{
    static run raw;
    hdmlp_loader *a = loader(ds, cfg, NULL);
    cr_assert_eq(drain(a, &raw, 0), HDMLP_END);
    hdmlp_loader_free(a);
    hdmlp_loader *b = loader(ds, cfg, ic);
    cr_assert_eq(drain(b, img, 1), HDMLP_END, "%s", hdmlp_last_error());
    cr_assert_eq(img->n, 180);
    cr_assert_eq(img->batches, raw.batches);
    cr_assert_arr_eq(img->idx, raw.idx, sizeof(uint64_t) * 180);
    cr_assert_arr_eq(img->batch_end, raw.batch_end, sizeof(uint32_t) * raw.batches);
    expect_each_once(img);
    return b;
}

Test(image_loader, same_batches_as_without_the_pipeline_exactly_once)
{
    hdmlp_dataset *ds = image_dataset(90, 48, 40, 0, NULL);
    static run img;
    hdmlp_config *cfg = config(10, 2);
    hdmlp_image_config *ic = image_config(32, 32);
    hdmlp_loader *b = same_batches_as_plain(ds, cfg, ic, &img);
    /* epochs crop differently */
    int same = 0;
    for (int i = 0; i < 90; i++) {
        same += img.hash[0][i] == img.hash[1][i];
    }
    cr_assert_lt(same, 20);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(b, &st, sizeof st), HDMLP_OK);
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

/* The pool order through the pipeline: the same samples in the same batches as the plain
 * loader in the pool order, each once per epoch. */
Test(image_loader, pool_order_same_batches_as_without_the_pipeline)
{
    hdmlp_dataset *ds = image_dataset(90, 48, 40, 0, NULL);
    static run img;
    hdmlp_config *cfg = config(10, 2);
    cr_assert_eq(hdmlp_config_set_order(cfg, HDMLP_ORDER_POOL), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_pool_reads(cfg, 2), HDMLP_OK);
    hdmlp_image_config *ic = image_config(32, 32);
    hdmlp_loader *b = same_batches_as_plain(ds, cfg, ic, &img);
    hdmlp_stats st;
    cr_assert_eq(hdmlp_loader_stats(b, &st, sizeof st), HDMLP_OK);
    cr_assert_eq(st.order, 1);
    cr_assert_eq(st.images_decoded, 180);
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

Test(image_loader, stats_report_the_rates_and_the_split)
{
    /* chunks of 2 and a budget of a fraction of the dataset: reads go on all the run */
    pack_k = 2;
    hdmlp_dataset *ds = image_dataset(100, 96, 72, 0, NULL);
    pack_k = 8;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (uint32_t decode = 0; decode <= 2; decode += 2) {
        hdmlp_config *cfg = config(4, 1);
        hdmlp_config_set_threads(cfg, 2);
        hdmlp_config_set_memory(cfg, hdmlp_dataset_stored_bytes(ds) / 3);
        hdmlp_config_set_ram_cache(cfg, 0);
        hdmlp_image_config *ic = image_config(16, 16);
        hdmlp_image_config_set_decode_threads(ic, decode);
        hdmlp_loader *ld = loader(ds, cfg, ic);
        hdmlp_batch *b = NULL;
        cr_assert_eq(hdmlp_loader_next(ld, &b), HDMLP_OK);
        hdmlp_batch_release(b);
        usleep(300 * 1000); /* longer than a balance window: the next decode closes one */
        while (hdmlp_loader_next(ld, &b) == HDMLP_OK) {
            hdmlp_batch_release(b);
        }
        hdmlp_stats st;
        hdmlp_loader_stats(ld, &st, sizeof st);
        cr_assert_gt(st.decode_rate, 0, "decode threads %u", decode);
        cr_assert_gt(st.read_rate, 0, "decode threads %u", decode);
        if (decode == 0) { /* automatic: a total of CPUs + 1, at least one of each */
            cr_assert_eq(st.io_threads_active + st.decode_threads_active, (uint64_t)cpus + 1);
            cr_assert_geq(st.io_threads_active, 1);
            cr_assert_geq(st.decode_threads_active, 1);
        } else { /* fixed: every I/O thread and the decode threads asked for */
            cr_assert_eq(st.io_threads_active, 2);
            cr_assert_eq(st.decode_threads_active, 2);
            cr_assert_eq(st.balance_moves, 0);
        }
        hdmlp_loader_free(ld);
        hdmlp_image_config_free(ic);
        hdmlp_config_free(cfg);
    }
    hdmlp_dataset_close(ds);
}
