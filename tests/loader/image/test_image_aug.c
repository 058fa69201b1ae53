/*
 * Image pipeline units, augmentation parameters and policy: torchvision's RandomResizedCrop
 * rule in distribution (against an independent implementation) and its reproducibility,
 * the fallback, flips, the validation resize and centre crop, the image config's setters,
 * and the I/O / decode split.
 */
#include "fmt_rng.h"
#include "hdmlp.h"
#include "loader_image.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- RandomResizedCrop ---------------------------------------------------------------------
 */

static struct hdmlp_image_config *train_config(void)
{
    hdmlp_image_config *ic = NULL;
    cr_assert_eq(hdmlp_image_config_create(&ic), HDMLP_OK);
    return ic;
}

/* torchvision.transforms.RandomResizedCrop.get_params, written out independently with its
 * own generator (an LCG-free xorshift, uniform doubles), to compare distributions. */
typedef struct ref_rng {
    uint64_t x;
} ref_rng;

static double ref_uniform(ref_rng *r, double a, double b)
{
    r->x ^= r->x << 13;
    r->x ^= r->x >> 7;
    r->x ^= r->x << 17;
    return a + (b - a) * ((double)(r->x >> 11) / 9007199254740992.0);
}

static void ref_crop(ref_rng *r, double s0, double s1, double r0, double r1, uint32_t h,
                     uint32_t w, image_crop *out)
{
    const double area = (double)h * w;
    for (int i = 0; i < 10; i++) {
        const double ta = area * ref_uniform(r, s0, s1);
        const double ar = exp(ref_uniform(r, log(r0), log(r1)));
        const long cw = lround(sqrt(ta * ar)), ch = lround(sqrt(ta / ar));
        if (cw > 0 && cw <= (long)w && ch > 0 && ch <= (long)h) {
            out->width = (uint32_t)cw;
            out->height = (uint32_t)ch;
            out->top = (uint32_t)(ref_uniform(r, 0, 1) * (h - ch + 1));
            out->left = (uint32_t)(ref_uniform(r, 0, 1) * (w - cw + 1));
            return;
        }
    }
    const double in_ratio = (double)w / h;
    long cw = w, ch = h;
    if (in_ratio < r0) {
        ch = lround(cw / r0);
    } else if (in_ratio > r1) {
        cw = lround(ch * r1);
    }
    out->width = (uint32_t)cw;
    out->height = (uint32_t)ch;
    out->top = (uint32_t)(h - ch) / 2;
    out->left = (uint32_t)(w - cw) / 2;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Two-sample Kolmogorov-Smirnov statistic (both arrays sorted here). */
static double ks(double *a, double *b, size_t n)
{
    qsort(a, n, sizeof(double), cmp_double);
    qsort(b, n, sizeof(double), cmp_double);
    size_t i = 0, j = 0;
    double d = 0;
    while (i < n && j < n) {
        const double v = a[i] < b[j] ? a[i] : b[j];
        while (i < n && a[i] <= v) {
            i++;
        }
        while (j < n && b[j] <= v) {
            j++;
        }
        const double diff = fabs((double)i / n - (double)j / n);
        d = diff > d ? diff : d;
    }
    return d;
}

#define NCROPS 20000
/* KS critical value for n = m = 20000 at alpha = 1e-6: sqrt(-ln(alpha / 2) / 2) ×
 * sqrt(2 / n) = 2.76 × 0.0100 = 0.0276. The seeds are fixed, so the outcome is too: the
 * bound only has to be wide enough that a correct rule passes for these seeds, and narrow
 * enough that a wrong one fails (the power check below). */
#define KS_BOUND 0.0276

/* Crop statistics (area fraction, log aspect, relative left, relative top) of the
 * pipeline's rule (ours != 0, seeds (42, epoch 3, sample i)) or the reference rule. */
static void crop_stats(int ours, double s0, double s1, uint32_t h, uint32_t w, double *stat[4])
{
    struct hdmlp_image_config *ic = train_config();
    hdmlp_image_config_set_scale(ic, s0, s1);
    ref_rng rr = {0x1234567887654321ull};
    for (size_t i = 0; i < NCROPS; i++) {
        image_crop c;
        if (ours) {
            fmt_rng rng;
            image_rng_seed(&rng, 42, 3, i);
            image_crop_train(ic, &rng, h, w, &c);
        } else {
            ref_crop(&rr, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, h, w, &c);
        }
        cr_assert(c.width >= 1 && c.width <= w && c.height >= 1 && c.height <= h);
        cr_assert(c.left + c.width <= w && c.top + c.height <= h);
        stat[0][i] = (double)c.width * c.height / ((double)w * h);
        stat[1][i] = log((double)c.width / c.height);
        stat[2][i] = w > c.width ? (double)c.left / (w - c.width) : 0.5;
        stat[3][i] = h > c.height ? (double)c.top / (h - c.height) : 0.5;
    }
    hdmlp_image_config_free(ic);
}

static void crop_ks(double s0, double s1, uint32_t h, uint32_t w, double d[4])
{
    double *a[4], *b[4];
    for (int k = 0; k < 4; k++) {
        a[k] = malloc(NCROPS * sizeof(double));
        b[k] = malloc(NCROPS * sizeof(double));
    }
    crop_stats(1, s0, s1, h, w, a);
    crop_stats(0, 0.08, 1.0, h, w, b);
    for (int k = 0; k < 4; k++) {
        d[k] = ks(a[k], b[k], NCROPS);
        free(a[k]);
        free(b[k]);
    }
}

Test(image_crop, follows_torchvision_rule_in_distribution, .timeout = 60)
{
    /* A landscape image (many first attempts fail for large scales) and a square one. */
    const uint32_t sizes[2][2] = {{300, 500}, {256, 256}};
    for (int s = 0; s < 2; s++) {
        double d[4];
        crop_ks(0.08, 1.0, sizes[s][0], sizes[s][1], d);
        cr_log_info("KS area %.4f, log ratio %.4f, left %.4f, top %.4f", d[0], d[1], d[2],
                    d[3]);
        for (int k = 0; k < 4; k++) {
            cr_assert_lt(d[k], KS_BOUND, "statistic %d of %u x %u: KS %.4f", k, sizes[s][1],
                         sizes[s][0], d[k]);
        }
    }
}

Test(image_crop, distribution_test_detects_a_wrong_scale, .timeout = 60)
{
    /* The same test on a rule drawing scale from 0.10..1 instead of 0.08..1 must fail. */
    double d[4];
    crop_ks(0.10, 1.0, 300, 500, d);
    cr_assert_gt(d[0], KS_BOUND, "KS %.4f", d[0]);
}

Test(image_crop, reproducible_for_seed_epoch_and_sample)
{
    struct hdmlp_image_config *ic = train_config();
    int differ_sample = 0, differ_epoch = 0;
    for (uint64_t i = 0; i < 100; i++) {
        image_crop a, b, c, e;
        fmt_rng r;
        image_rng_seed(&r, 5, 1, i);
        image_crop_train(ic, &r, 480, 640, &a);
        image_rng_seed(&r, 5, 1, i);
        image_crop_train(ic, &r, 480, 640, &b);
        cr_assert(memcmp(&a, &b, sizeof(a)) == 0);
        image_rng_seed(&r, 5, 1, i + 1);
        image_crop_train(ic, &r, 480, 640, &c);
        image_rng_seed(&r, 5, 2, i);
        image_crop_train(ic, &r, 480, 640, &e);
        differ_sample += memcmp(&a, &c, sizeof(a)) != 0;
        differ_epoch += memcmp(&a, &e, sizeof(a)) != 0;
    }
    cr_assert_eq(differ_sample, 100);
    cr_assert_eq(differ_epoch, 100);
    hdmlp_image_config_free(ic);
}

Test(image_crop, fallback_is_the_centred_clamped_whole_image)
{
    /* 1000 × 10: no attempt can fit (w <= 10 × ... ratio); ratio clamps to 4/3. */
    struct hdmlp_image_config *ic = train_config();
    fmt_rng r;
    image_rng_seed(&r, 1, 0, 0);
    image_crop c;
    image_crop_train(ic, &r, 10, 1000, &c);
    cr_assert_eq(c.height, 10);
    cr_assert_eq(c.width, 13); /* round(10 × 4/3) */
    cr_assert_eq(c.top, 0);
    cr_assert_eq(c.left, (1000 - 13) / 2);
    hdmlp_image_config_free(ic);
}

Test(image_crop, flip_frequency_follows_probability)
{
    struct hdmlp_image_config *ic = train_config();
    int flips = 0;
    for (uint64_t i = 0; i < 4000; i++) {
        fmt_rng r;
        image_rng_seed(&r, 9, 0, i);
        image_crop c;
        image_crop_train(ic, &r, 100, 100, &c);
        flips += c.flip;
    }
    /* binomial(4000, 0.5): sd 31.6; 6 sd */
    cr_assert(flips > 2000 - 190 && flips < 2000 + 190, "%d flips", flips);
    hdmlp_image_config_set_flip(ic, 0.0);
    for (uint64_t i = 0; i < 200; i++) {
        fmt_rng r;
        image_rng_seed(&r, 9, 0, i);
        image_crop c;
        image_crop_train(ic, &r, 100, 100, &c);
        cr_assert_eq(c.flip, 0);
    }
    hdmlp_image_config_free(ic);
}

Test(image_crop, validation_resize_and_centre_crop)
{
    struct hdmlp_image_config *ic = train_config();
    hdmlp_image_config_set_mode(ic, HDMLP_IMAGE_VAL);
    uint32_t rh, rw, top, left;
    image_crop_val(ic, 375, 500, &rh, &rw, &top, &left);
    /* Resize(256): 256 × int(256 × 500 / 375) = 256 × 341; CenterCrop(224) */
    cr_assert(rh == 256 && rw == 341, "%u x %u", rw, rh);
    cr_assert_eq(top, 16);
    cr_assert_eq(left, (uint32_t)rint((341 - 224) / 2.0));
    hdmlp_image_config_free(ic);
}

/* ---- config ------------------------------------------------------------------------------ */

Test(image_config, setters_check_ranges)
{
    hdmlp_image_config *ic = NULL;
    cr_assert_eq(hdmlp_image_config_create(&ic), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_size(ic, 64, 96), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_size(ic, 0, 96), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_size(ic, 64, 8193), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_scale(ic, 0.5, 1.0), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_scale(ic, 0.0, 1.0), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_scale(ic, 0.6, 0.5), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_scale(ic, 0.5, 1.5), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_ratio(ic, 0.5, 2.0), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_ratio(ic, NAN, 2.0), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_crop_fraction(ic, 1.0), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_crop_fraction(ic, 0.0), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_flip(ic, 1.0), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_flip(ic, 1.01), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_mode(ic, HDMLP_IMAGE_VAL), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_mode(ic, (hdmlp_image_mode)2), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_layout(ic, HDMLP_LAYOUT_NCHW), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_layout(ic, (hdmlp_image_layout)7), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_dtype(ic, HDMLP_DTYPE_FLOAT32), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_dtype(ic, (hdmlp_image_dtype)-1), HDMLP_E_INVAL);
    const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.25f, 0.25f, 0.25f};
    const float bad_std[3] = {0.25f, 0.0f, 0.25f};
    cr_assert_eq(hdmlp_image_config_set_normalize(ic, mean, std), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_normalize(ic, mean, bad_std), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "channel 1") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_image_config_set_channels(ic, 1), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_channels(ic, 2), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_decode_threads(ic, 64), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_decode_threads(ic, 65), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_prefetch(ic, 16), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_prefetch(ic, 0), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_image_config_set_dct_scaling(ic, 0), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_dct_scaling(ic, 2), HDMLP_E_INVAL);
    cr_assert_eq(ic->fast_decode, 0, "fast decoding is off by default");
    cr_assert_eq(hdmlp_image_config_set_fast_decode(ic, 1), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_fast_decode(ic, -1), HDMLP_E_INVAL);
    cr_assert_eq(ic->fast_decode, 1);
    /* failed setters left the values alone */
    cr_assert_eq(ic->height, 64);
    cr_assert_eq(ic->width, 96);
    cr_assert_eq(ic->scale_min, 0.5);
    cr_assert_eq(ic->std[1], 0.25f);
    cr_assert_eq(ic->channels, 1);
    cr_assert_eq(hdmlp_image_config_set_size(NULL, 1, 1), HDMLP_E_INVAL);
    hdmlp_image_config_free(ic);
    hdmlp_image_config_free(NULL);
}

/* ---- the I/O / decode split (policy) ----------------------------------------------------- */

#define MS 1000000ull

Test(image_balance, moves_one_thread_after_two_clear_windows)
{
    image_split s = {1, 2, 2, 2, 0};
    /* decoders starved 60 % of the time, nobody waited on a full queue: toward I/O */
    cr_assert_eq(image_balance(&s, 240 * MS, 0, 200 * MS), 0); /* one window: no move */
    cr_assert_eq(image_balance(&s, 240 * MS, 0, 200 * MS), -1);
    cr_assert(s.io == 2 && s.decode == 1);
    /* at the I/O maximum it stays */
    cr_assert_eq(image_balance(&s, 200 * MS, 0, 200 * MS), 0);
    cr_assert_eq(image_balance(&s, 200 * MS, 0, 200 * MS), 0);
    cr_assert(s.io == 2 && s.decode == 1);
    /* the consumer waits on a full queue 80 % of the time: toward decoding */
    cr_assert_eq(image_balance(&s, 0, 160 * MS, 200 * MS), 0);
    cr_assert_eq(image_balance(&s, 0, 160 * MS, 200 * MS), 1);
    cr_assert(s.io == 1 && s.decode == 2);
    /* at least one I/O thread stays */
    cr_assert_eq(image_balance(&s, 0, 160 * MS, 200 * MS), 0);
    cr_assert_eq(image_balance(&s, 0, 160 * MS, 200 * MS), 0);
    cr_assert(s.io == 1 && s.decode == 2);
}

Test(image_balance, mixed_or_alternating_windows_do_not_move)
{
    image_split s = {2, 2, 3, 3, 0};
    for (int i = 0; i < 10; i++) {
        /* alternating verdicts */
        cr_assert_eq(image_balance(&s, i % 2 ? 300 * MS : 0, i % 2 ? 0 : 150 * MS, 200 * MS),
                     0);
    }
    for (int i = 0; i < 10; i++) {
        /* both signals (neither side clearly short), or neither */
        cr_assert_eq(image_balance(&s, 300 * MS, 150 * MS, 200 * MS), 0);
        cr_assert_eq(image_balance(&s, 10 * MS, 5 * MS, 200 * MS), 0);
    }
    cr_assert(s.io == 2 && s.decode == 2);
    cr_assert_eq(image_balance(&s, 100 * MS, 0, 0), 0); /* an empty window */
}
