/*
 * Helpers of the image loader tests (test_image_loader.c, test_image_errors.c): small image
 * datasets packed in a temporary directory, loaders with or without the pipeline, and a
 * drain that records what they deliver. Included by each test file (one copy per file).
 */
#ifndef HDMLP_TEST_IMAGE_COMMON_H
#define HDMLP_TEST_IMAGE_COMMON_H

#include "hdmlp.h"
#include "support/testds.h"
#include "support/testimg.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static char tmp_dir[512];

static inline void cleanup(void)
{
    if (tmp_dir[0] != '\0') {
        testds_rm_rf(tmp_dir);
        tmp_dir[0] = '\0';
    }
}

/* Packs n images (sides around w × h, or exactly with exact) into a fresh directory and
 * opens the dataset; extra(dir) may add files to the image folders before packing. */
static uint32_t pack_k = 8; /* samples per chunk of the next image_dataset */

static inline hdmlp_dataset *image_dataset(uint32_t n, uint32_t w, uint32_t h, int exact,
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

static inline hdmlp_config *config(uint32_t batch, uint64_t epochs)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    hdmlp_config_set_batch_size(cfg, batch);
    hdmlp_config_set_epochs(cfg, epochs);
    hdmlp_config_set_seed(cfg, 1234);
    hdmlp_config_set_memory(cfg, 64ull << 20);
    return cfg;
}

static inline hdmlp_image_config *image_config(uint32_t h, uint32_t w)
{
    hdmlp_image_config *ic = NULL;
    cr_assert_eq(hdmlp_image_config_create(&ic), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_size(ic, h, w), HDMLP_OK);
    return ic;
}

static inline hdmlp_loader *loader(hdmlp_dataset *ds, hdmlp_config *cfg,
                                   const hdmlp_image_config *ic)
{
    cr_assert_eq(hdmlp_config_set_image(cfg, ic), HDMLP_OK);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    return ld;
}

static inline uint64_t fnv(const uint8_t *p, size_t n)
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

static inline int drain(hdmlp_loader *ld, run *r, int images)
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

#endif
