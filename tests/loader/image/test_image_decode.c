/*
 * Image pipeline units, decoding and resampling: decodes against the libraries' own (exact
 * without DCT scaling, a stated bound with it), JPEG region decoding against full decodes,
 * CMYK against Pillow, damaged and hostile inputs, and PIL's bilinear resampling (values
 * computed with Pillow 9.4, Image.BILINEAR). Crop rules, config and the thread split:
 * test_image_aug.c.
 */
#include "fmt_rng.h"
#include "hdmlp.h"
#include "loader_image.h"
#include "support/testds.h"
#include "support/testimg.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

/* ---- resampling (PIL) ---------------------------------------------------------------------
 */

/* The 13 × 9 RGB image the golden values were computed from (same formula in Python). */
static image_buf golden_src(void)
{
    image_buf b = {malloc(13 * 9 * 3), 9, 13, 3, 0};
    for (uint32_t y = 0; y < 9; y++) {
        for (uint32_t x = 0; x < 13; x++) {
            for (uint32_t c = 0; c < 3; c++) {
                b.px[(y * 13 + x) * 3 + c] =
                    (uint8_t)((x * 37 + y * 11 + c * 50 + (x * y) % 7 * 20) % 256);
            }
        }
    }
    return b;
}

static void resize(const image_buf *src, double y0, double x0, double bh, double bw,
                   uint32_t rh, uint32_t rw, uint32_t top, uint32_t left, uint8_t *dst,
                   uint32_t dh, uint32_t dw)
{
    uint8_t *scratch = malloc(image_resize_scratch(src, dh, dw));
    cr_assert_eq(
        image_resize_region(src, y0, x0, bh, bw, rh, rw, top, left, dst, dh, dw, 0, scratch),
        HDMLP_OK);
    free(scratch);
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

Test(image_resize, downscale_equals_pil)
{
    /* im.resize((5, 4), Image.BILINEAR) */
    static const uint8_t want[60] = {
        66,  113, 143, 152, 152, 126, 98, 103, 127, 90,  137, 148, 143, 149, 121,
        117, 134, 133, 169, 119, 90,  89, 108, 147, 128, 141, 121, 127, 109, 96,
        146, 147, 99,  130, 122, 105, 75, 111, 147, 151, 153, 95,  97,  110, 122,
        132, 149, 170, 111, 117, 113, 89, 125, 140, 141, 155, 153, 99,  102, 120};
    image_buf src = golden_src();
    uint8_t got[60];
    resize(&src, 0, 0, 9, 13, 4, 5, 0, 0, got, 4, 5);
    cr_assert_arr_eq(got, want, 60);
    free(src.px);
}

Test(image_resize, upscale_equals_pil)
{
    /* im.resize((20, 17), Image.BILINEAR): FNV-1a 64 of its 1020 bytes */
    image_buf src = golden_src();
    uint8_t got[17 * 20 * 3];
    resize(&src, 0, 0, 9, 13, 17, 20, 0, 0, got, 17, 20);
    cr_assert_eq(fnv(got, sizeof(got)), 0x01f9e61a37ee25f5ull);
    free(src.px);
}

Test(image_resize, crop_then_resize_equals_pil)
{
    /* im.crop((2, 1, 11, 8)).resize((4, 3), Image.BILINEAR), as torchvision's resized_crop */
    static const uint8_t want[36] = {188, 153, 77, 111, 106, 116, 69,  114, 156, 133, 159, 108,
                                     181, 130, 98, 113, 101, 138, 95,  134, 134, 144, 159, 99,
                                     140, 130, 98, 61,  87,  126, 104, 117, 148, 163, 144, 105};
    image_buf src = golden_src();
    uint8_t got[36];
    resize(&src, 1, 2, 7, 9, 3, 4, 0, 0, got, 3, 4);
    cr_assert_arr_eq(got, want, 36);
    free(src.px);
}

Test(image_resize, window_of_resize_equals_pil)
{
    /* im.resize((5, 4), Image.BILINEAR).crop((1, 1, 4, 3)), as Resize + CenterCrop */
    static const uint8_t want[18] = {169, 119, 90,  89, 108, 147, 128, 141, 121,
                                     130, 122, 105, 75, 111, 147, 151, 153, 95};
    image_buf src = golden_src();
    uint8_t got[18];
    resize(&src, 0, 0, 9, 13, 4, 5, 1, 1, got, 2, 3);
    cr_assert_arr_eq(got, want, 18);
    free(src.px);
}

/* Flipped while resampling (how the pipeline writes flipped images): the mirror image of the
 * unflipped result, for reductions, enlargements and crops of odd and even widths. */
Test(image_resize, flip_is_the_mirror_of_the_unflipped_result)
{
    image_buf src = golden_src();
    static const uint32_t sizes[][2] = {{4, 5}, {17, 20}, {3, 4}, {9, 13}, {6, 2}, {5, 1}};
    for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
        const uint32_t dh = sizes[t][0], dw = sizes[t][1];
        uint8_t a[17 * 20 * 3], b[17 * 20 * 3];
        uint8_t *scratch = malloc(image_resize_scratch(&src, dh, dw));
        cr_assert_eq(image_resize_region(&src, 1, 2, 7, 9, dh, dw, 0, 0, a, dh, dw, 0, scratch),
                     HDMLP_OK);
        cr_assert_eq(image_resize_region(&src, 1, 2, 7, 9, dh, dw, 0, 0, b, dh, dw, 1, scratch),
                     HDMLP_OK);
        for (uint32_t y = 0; y < dh; y++) {
            for (uint32_t x = 0; x < dw; x++) {
                cr_assert_arr_eq(a + (y * dw + x) * 3, b + (y * dw + dw - 1 - x) * 3, 3,
                                 "%u x %u: pixel (%u, %u)", dw, dh, x, y);
            }
        }
        free(scratch);
    }
    free(src.px);
    /* a source 2 pixels wide, enlarged: the taps reach its last columns on every row */
    image_buf narrow = {malloc(2 * 9 * 3), 9, 2, 3, 0};
    for (uint32_t i = 0; i < 2 * 9 * 3; i++) {
        narrow.px[i] = (uint8_t)(i * 29 % 256);
    }
    uint8_t a[9 * 20 * 3], b[9 * 20 * 3];
    uint8_t *scratch = malloc(image_resize_scratch(&narrow, 9, 20));
    cr_assert_eq(image_resize_region(&narrow, 0, 0, 9, 2, 9, 20, 0, 0, a, 9, 20, 0, scratch),
                 HDMLP_OK);
    cr_assert_eq(image_resize_region(&narrow, 0, 0, 9, 2, 9, 20, 0, 0, b, 9, 20, 1, scratch),
                 HDMLP_OK);
    for (uint32_t y = 0; y < 9; y++) {
        for (uint32_t x = 0; x < 20; x++) {
            cr_assert_arr_eq(a + (y * 20 + x) * 3, b + (y * 20 + 19 - x) * 3, 3);
        }
    }
    free(scratch);
    free(narrow.px);
}

Test(image_resize, same_size_is_a_copy)
{
    image_buf src = golden_src();
    uint8_t got[13 * 9 * 3];
    resize(&src, 0, 0, 9, 13, 9, 13, 0, 0, got, 9, 13);
    cr_assert_arr_eq(got, src.px, sizeof(got));
    free(src.px);
}

/* PIL's resampling written plainly (Imaging/Resample.c: precompute_coeffs, normalize_coeffs,
 * the horizontal then the vertical pass over the cut source, 22-bit fixed point), then the
 * window and the flip: what image_resize_region must give, whichever loops it runs. */
static void ref_axis(double in0, double len, uint32_t in_size, uint32_t out_size, uint32_t o,
                     uint32_t *first, uint32_t *cnt, int32_t *k)
{
    const double scale = len / out_size, fs = scale < 1.0 ? 1.0 : scale;
    const double center = in0 + (o + 0.5) * scale;
    int64_t a = (int64_t)(center - fs + 0.5), b = (int64_t)(center + fs + 0.5);
    a = a < 0 ? 0 : a;
    b = b > (int64_t)in_size ? (int64_t)in_size : b;
    double w[1024], sum = 0;
    const int64_t n = b > a ? b - a : 0;
    cr_assert_leq(n, 1024);
    for (int64_t x = 0; x < n; x++) {
        const double d = fabs(((double)(x + a) - center + 0.5) / fs);
        w[x] = d < 1.0 ? 1.0 - d : 0.0;
        sum += w[x];
    }
    for (int64_t x = 0; x < n; x++) {
        const double v = (sum != 0.0 ? w[x] / sum : 0.0) * (1 << 22);
        k[x] = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
    }
    *first = (uint32_t)a;
    *cnt = (uint32_t)n;
}

static uint8_t ref_clip(int64_t v)
{
    v >>= 22;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static void ref_resize(const image_buf *src, double y0, double x0, double bh, double bw,
                       uint32_t rh, uint32_t rw, uint32_t top, uint32_t left, uint8_t *dst,
                       uint32_t dh, uint32_t dw, int flip)
{
    const uint32_t c = src->c;
    /* the box's whole pixels, as torchvision crops before resizing */
    const uint32_t cx0 = (uint32_t)floor(x0), cy0 = (uint32_t)floor(y0);
    const uint32_t cx1 = ceil(x0 + bw) >= src->w ? src->w : (uint32_t)ceil(x0 + bw);
    const uint32_t cy1 = ceil(y0 + bh) >= src->h ? src->h : (uint32_t)ceil(y0 + bh);
    const uint32_t cw = cx1 - cx0, ch = cy1 - cy0;
    uint8_t *mid = malloc((size_t)ch * rw * c);
    int32_t k[1024];
    uint32_t first, cnt;
    for (uint32_t x = 0; x < rw; x++) {
        ref_axis(x0 - cx0, bw, cw, rw, x, &first, &cnt, k);
        for (uint32_t y = 0; y < ch; y++) {
            for (uint32_t j = 0; j < c; j++) {
                int64_t s = 1 << 21;
                for (uint32_t t = 0; t < cnt; t++) {
                    s += (int64_t)
                             src->px[((size_t)(cy0 + y) * src->w + cx0 + first + t) * c + j] *
                         k[t];
                }
                mid[((size_t)y * rw + x) * c + j] = ref_clip(s);
            }
        }
    }
    for (uint32_t y = 0; y < dh; y++) {
        ref_axis(y0 - cy0, bh, ch, rh, top + y, &first, &cnt, k);
        for (uint32_t x = 0; x < dw; x++) {
            const uint32_t to = flip ? dw - 1 - x : x;
            for (uint32_t j = 0; j < c; j++) {
                int64_t s = 1 << 21;
                for (uint32_t t = 0; t < cnt; t++) {
                    s += (int64_t)mid[((size_t)(first + t) * rw + left + x) * c + j] * k[t];
                }
                dst[((size_t)y * dw + to) * c + j] = ref_clip(s);
            }
        }
    }
    free(mid);
}

/* Over random sources, boxes (fractional too, as after DCT scaling), output sizes (every
 * width modulo 4 and 16, reductions up to 12x and enlargements), windows, flips and both
 * channel counts: the library's resampling with each instruction set the build and the CPU
 * have (plain loops, AVX2) equals a plain PIL implementation exactly. Seed
 * printed. */
Test(image_resize, equals_plain_pil_over_random_sizes, .timeout = 60)
{
    const uint64_t seed = 20261127;
    cr_log_info("seed %llu, instruction sets up to %d", (unsigned long long)seed,
                (int)image_resize_isa());
    fmt_rng r;
    fmt_rng_seed(&r, seed, 1);
    for (int trial = 0; trial < 400; trial++) {
        const uint32_t c = trial % 5 == 4 ? 1 : 3;
        const uint32_t w = 1 + (uint32_t)fmt_rng_below(&r, 300);
        const uint32_t h = 1 + (uint32_t)fmt_rng_below(&r, 200);
        uint8_t *px = testimg_pattern(w, h, c, seed + (uint64_t)trial);
        const image_buf src = {px, h, w, c, 0};
        /* a box inside the image, in fractional pixels half of the time */
        const int frac = trial % 2;
        const double bw = frac ? 0.5 + (w - 0.5) * (fmt_rng_next(&r) >> 11) * 0x1p-53
                               : 1 + (double)fmt_rng_below(&r, w);
        const double bh = frac ? 0.5 + (h - 0.5) * (fmt_rng_next(&r) >> 11) * 0x1p-53
                               : 1 + (double)fmt_rng_below(&r, h);
        const double x0 = (w - bw) * (frac ? (fmt_rng_next(&r) >> 11) * 0x1p-53 : 0.5);
        const double y0 = (h - bh) * (frac ? (fmt_rng_next(&r) >> 11) * 0x1p-53 : 0.5);
        const uint32_t rw = 1 + (uint32_t)fmt_rng_below(&r, trial % 3 == 0 ? 40 : 240);
        const uint32_t rh = 1 + (uint32_t)fmt_rng_below(&r, trial % 3 == 0 ? 40 : 120);
        const uint32_t dw = trial % 4 == 0 ? 1 + (uint32_t)fmt_rng_below(&r, rw) : rw;
        const uint32_t dh = trial % 4 == 0 ? 1 + (uint32_t)fmt_rng_below(&r, rh) : rh;
        const uint32_t left = (uint32_t)fmt_rng_below(&r, rw - dw + 1);
        const uint32_t top = (uint32_t)fmt_rng_below(&r, rh - dh + 1);
        const int flip = (int)(fmt_rng_next(&r) & 1);
        const size_t n = (size_t)dh * dw * c;
        uint8_t *got = malloc(n), *want = malloc(n);
        uint8_t *scratch = malloc(image_resize_scratch(&src, dh, dw));
        ref_resize(&src, y0, x0, bh, bw, rh, rw, top, left, want, dh, dw, flip);
        for (image_isa isa = IMAGE_ISA_PLAIN; isa <= image_resize_isa(); isa++) {
            cr_assert_eq(image_resize_region_isa(isa, &src, y0, x0, bh, bw, rh, rw, top, left,
                                                 got, dh, dw, flip, scratch),
                         HDMLP_OK);
            cr_assert_arr_eq(got, want, n,
                             "instruction set %d, trial %d: %u x %u x %u, box %.3f x %.3f at "
                             "(%.3f, %.3f) to %u x %u, window %u x %u at (%u, %u), flip %d",
                             (int)isa, trial, w, h, c, bw, bh, x0, y0, rw, rh, dw, dh, left,
                             top, flip);
        }
        free(scratch);
        free(got);
        free(want);
        free(px);
    }
}

/* ---- decoding -----------------------------------------------------------------------------
 */

static image_decoder *decoder(void)
{
    image_decoder *d = NULL;
    cr_assert_eq(image_decoder_create(&d), HDMLP_OK);
    return d;
}

Test(image_decode, jpeg_equals_turbojpeg_full_decode)
{
    image_decoder *d = decoder();
    for (uint32_t c = 1; c <= 3; c += 2) {
        uint8_t *px = testimg_pattern(61, 43, 3, 5), *enc = NULL, *ref = NULL;
        size_t len = 0;
        cr_assert_eq(testimg_jpeg(px, 61, 43, 3, 85, &enc, &len), 0);
        uint32_t rw = 0, rh = 0;
        cr_assert_eq(testimg_ref_jpeg(enc, len, c, 1, &ref, &rw, &rh), 0);
        image_buf img;
        cr_assert_eq(image_decode(d, enc, len, c, 1, &img), HDMLP_OK, "%s", hdmlp_last_error());
        cr_assert(img.w == 61 && img.h == 43 && img.c == c);
        cr_assert_arr_eq(img.px, ref, (size_t)61 * 43 * c, "channels %u", c);
        image_buf_free(&img);
        free(px);
        free(enc);
        free(ref);
    }
    image_decoder_free(d);
}

Test(image_decode, jpeg_dct_scaled_equals_turbojpeg_scaled_decode)
{
    image_decoder *d = decoder();
    uint8_t *px = testimg_pattern(200, 120, 3, 9), *enc = NULL, *ref = NULL;
    size_t len = 0;
    cr_assert_eq(testimg_jpeg(px, 200, 120, 3, 90, &enc, &len), 0);
    for (uint32_t denom = 2; denom <= 8; denom *= 2) {
        uint32_t rw = 0, rh = 0;
        cr_assert_eq(testimg_ref_jpeg(enc, len, 3, denom, &ref, &rw, &rh), 0);
        image_buf img;
        cr_assert_eq(image_decode(d, enc, len, 3, denom, &img), HDMLP_OK);
        cr_assert(img.w == rw && img.h == rh && rw == (200 + denom - 1) / denom);
        cr_assert_arr_eq(img.px, ref, (size_t)rw * rh * 3);
        image_buf_free(&img);
        free(ref);
    }
    free(px);
    free(enc);
    image_decoder_free(d);
}

/* DCT scaling, as the pipeline uses it: decode at 1/denom, then resize the same crop to the
 * output, against a full decode + resize. The documented bound: mean absolute difference
 * below 3 levels and the 99th percentile below 16 (the scaled IDCT is itself a low-pass
 * filter, slightly different from the bilinear one). */
Test(image_decode, dct_scaling_within_bound_of_full_decode)
{
    image_decoder *d = decoder();
    const uint32_t w = 640, h = 480, ow = 64, oh = 48;
    uint8_t *px = testimg_pattern(w, h, 3, 11), *enc = NULL;
    size_t len = 0;
    cr_assert_eq(testimg_jpeg(px, w, h, 3, 90, &enc, &len), 0);
    image_buf full, small;
    cr_assert_eq(image_decode(d, enc, len, 3, 1, &full), HDMLP_OK);
    cr_assert_eq(image_decode(d, enc, len, 3, 4, &small), HDMLP_OK);
    uint8_t a[64 * 48 * 3], b[64 * 48 * 3];
    /* the crop (top 40, left 60, 400 × 520) at full size and in the 1/4 image */
    resize(&full, 40, 60, 400, 520, oh, ow, 0, 0, a, oh, ow);
    resize(&small, 10, 15, 100, 130, oh, ow, 0, 0, b, oh, ow);
    uint32_t hist[256] = {0};
    double sum = 0;
    for (size_t i = 0; i < sizeof(a); i++) {
        const int e = abs((int)a[i] - (int)b[i]);
        hist[e]++;
        sum += e;
    }
    uint32_t p99 = 0, acc = 0;
    while (acc + hist[p99] < sizeof(a) * 99 / 100) {
        acc += hist[p99++];
    }
    cr_log_info("DCT 1/4 vs full: mean |diff| %.2f, p99 %u", sum / sizeof(a), p99);
    cr_assert_lt(sum / sizeof(a), 3.0);
    cr_assert_lt(p99, 16u);
    image_buf_free(&full);
    image_buf_free(&small);
    free(px);
    free(enc);
    image_decoder_free(d);
}

/* A JPEG of px with TurboJPEG: subsampling, flags (progressive), quality 85. */
static void encode(const uint8_t *px, uint32_t w, uint32_t h, uint32_t c, int samp, int flags,
                   uint8_t **out, size_t *len)
{
    tjhandle t = tjInitCompress();
    unsigned char *buf = NULL;
    unsigned long n = 0;
    cr_assert_eq(tjCompress2(t, px, (int)w, 0, (int)h, c == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &n,
                             samp, 85, flags),
                 0);
    *out = malloc(n);
    memcpy(*out, buf, n);
    *len = n;
    tjFree(buf);
    tjDestroy(t);
}

Test(image_decode, jpeg_region_equals_the_full_decode_there)
{
    const struct {
        uint32_t c;
        int samp, flags;
    } kinds[] = {{3, TJSAMP_420, 0},
                 {3, TJSAMP_422, 0},
                 {3, TJSAMP_444, 0},
                 {1, TJSAMP_GRAY, 0},
                 {3, TJSAMP_420, TJFLAG_PROGRESSIVE}};
    const uint32_t w = 203, h = 157;
    uint64_t x = 12345;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        uint8_t *px = testimg_pattern(w, h, kinds[k].c, 21 + k), *enc = NULL;
        size_t len = 0;
        encode(px, w, h, kinds[k].c, kinds[k].samp, kinds[k].flags, &enc, &len);
        for (uint32_t denom = 1; denom <= 4; denom *= 2) {
            for (uint32_t c_out = 1; c_out <= 3; c_out += 2) {
                uint8_t *ref = NULL;
                uint32_t rw = 0, rh = 0;
                cr_assert_eq(testimg_ref_jpeg(enc, len, c_out, denom, &ref, &rw, &rh), 0);
                for (int trial = 0; trial < 12; trial++) {
                    x = x * 6364136223846793005ull + 1442695040888963407ull;
                    const uint32_t rh_ = 1 + (uint32_t)(x >> 33) % rh;
                    const uint32_t rw_ = 1 + (uint32_t)(x >> 17) % rw;
                    const uint32_t top = (uint32_t)(x >> 45) % (rh - rh_ + 1);
                    const uint32_t left = (uint32_t)(x >> 5) % (rw - rw_ + 1);
                    image_buf img;
                    uint32_t oy = 0, ox = 0;
                    cr_assert_eq(image_decode_jpeg_region(enc, len, c_out, denom, top, left,
                                                          rh_, rw_, &img, &oy, &ox),
                                 HDMLP_OK, "%s", hdmlp_last_error());
                    cr_assert(oy == top && ox <= left && ox + img.w >= left + rw_ &&
                              img.h == rh_ && img.c == c_out && ox + img.w <= rw);
                    for (uint32_t r = 0; r < rh_; r++) {
                        cr_assert_arr_eq(img.px + ((size_t)r * img.w + left - ox) * c_out,
                                         ref + ((size_t)(oy + r) * rw + left) * c_out,
                                         (size_t)rw_ * c_out,
                                         "kind %zu, 1/%u, %u channels: row %u of %u x %u at "
                                         "(%u, %u)",
                                         k, denom, c_out, r, rw_, rh_, left, top);
                    }
                    image_buf_free(&img);
                }
                free(ref);
            }
        }
        /* damage after the region still fails */
        image_buf img;
        uint32_t oy, ox;
        cr_assert_eq(
            image_decode_jpeg_region(enc, len * 3 / 4, 3, 1, 0, 0, 8, 8, &img, &oy, &ox),
            HDMLP_E_CORRUPT, "kind %zu", k);
        free(px);
        free(enc);
    }
}

/* The pipeline's training path (a region decode at the crop) against a full decode, same
 * crop, same resized output, for `crops` crops of a 331 x 247 4:2:0 JPEG (pattern `seed`,
 * crops drawn with `rng_seed`), every `every`-th at 1/2 scale; `fast`: fast decoding. */
static void region_equals_full(int fast, uint64_t seed, uint64_t rng_seed, uint64_t crops,
                               uint64_t every)
{
    image_decoder *d = decoder();
    image_decoder_set_fast(d, fast);
    const uint32_t w = 331, h = 247;
    uint8_t *px = testimg_pattern(w, h, 3, seed), *enc = NULL;
    size_t len = 0;
    encode(px, w, h, 3, TJSAMP_420, 0, &enc, &len);
    struct hdmlp_image_config *ic = NULL;
    hdmlp_image_config_create(&ic);
    for (uint64_t i = 0; i < crops; i++) {
        fmt_rng r;
        image_rng_seed(&r, rng_seed, 0, i);
        image_crop c;
        image_crop_train(ic, &r, h, w, &c);
        const uint32_t denom = i % every == every - 1 ? 2 : 1;
        uint8_t a[32 * 24 * 3], b[32 * 24 * 3];
        for (int region = 0; region < 2; region++) {
            double box[4] = {c.top, c.left, c.height, c.width};
            image_buf img;
            cr_assert_eq(
                image_decode_box(d, enc, len, IMAGE_JPEG, h, w, 3, denom, region, box, &img),
                HDMLP_OK, "%s", hdmlp_last_error());
            resize(&img, box[0], box[1], box[2], box[3], 24, 32, 0, 0, region ? b : a, 24, 32);
            image_buf_free(&img);
        }
        cr_assert_arr_eq(a, b, sizeof(a), "crop %llu: %u x %u at (%u, %u), 1/%u",
                         (unsigned long long)i, c.width, c.height, c.left, c.top, denom);
    }
    hdmlp_image_config_free(ic);
    free(px);
    free(enc);
    image_decoder_free(d);
}

Test(image_decode, region_decode_then_resize_equals_full_decode_then_resize)
{
    region_equals_full(0, 77, 3, 40, 3);
}

/* Fast decoding (opt-in): switched off again, a decoder gives TurboJPEG's accurate pixels bit
 * for bit; on, the same sizes and pixels that differ (but for gray at 1/2: libjpeg-turbo's
 * scaled IDCTs have no fast variant and gray has no upsampling), by a mean absolute
 * difference below 3 levels on these test images (gray and 4:2:0 colour, full and 1/2). */
Test(image_decode, fast_decode_differs_boundedly_and_off_is_exact)
{
    image_decoder *d = decoder();
    const uint32_t w = 203, h = 149;
    for (uint32_t c = 1; c <= 3; c += 2) {
        uint8_t *px = testimg_pattern(w, h, c, 21), *enc = NULL;
        size_t len = 0;
        cr_assert_eq(testimg_jpeg(px, w, h, c, 90, &enc, &len), 0);
        for (uint32_t denom = 1; denom <= 2; denom++) {
            uint8_t *ref = NULL;
            uint32_t rw = 0, rh = 0;
            cr_assert_eq(testimg_ref_jpeg(enc, len, c, denom, &ref, &rw, &rh), 0);
            image_buf acc, fast;
            image_decoder_set_fast(d, 1);
            cr_assert_eq(image_decode(d, enc, len, c, denom, &fast), HDMLP_OK, "%s",
                         hdmlp_last_error());
            image_decoder_set_fast(d, 0);
            cr_assert_eq(image_decode(d, enc, len, c, denom, &acc), HDMLP_OK);
            cr_assert(acc.w == rw && acc.h == rh && acc.c == c);
            cr_assert_arr_eq(acc.px, ref, (size_t)rw * rh * c, "accurate again, c %u 1/%u", c,
                             denom);
            cr_assert(fast.w == rw && fast.h == rh && fast.c == c);
            const size_t n = (size_t)rw * rh * c;
            double sum = 0;
            int worst = 0;
            for (size_t i = 0; i < n; i++) {
                const int e = abs((int)fast.px[i] - (int)ref[i]);
                sum += e;
                worst = e > worst ? e : worst;
            }
            /* scaled IDCTs have no fast variant: a scaled gray decode is the same */
            cr_assert(worst > 0 || (c == 1 && denom > 1),
                      "fast decoding changed nothing (c %u, 1/%u)", c, denom);
            cr_assert_lt(sum / (double)n, 3.0, "c %u, 1/%u: mean %.3f, max %d", c, denom,
                         sum / (double)n, worst);
            cr_log_info("fast decode c %u 1/%u: mean abs diff %.3f, max %d\n", c, denom,
                        sum / (double)n, worst);
            image_buf_free(&acc);
            image_buf_free(&fast);
            free(ref);
        }
        free(px);
        free(enc);
    }
    image_decoder_free(d);
}

/* With fast decoding, a training crop's region decode still equals the (fast) full decode at
 * the crop: the pipeline's two paths agree with each other. */
Test(image_decode, fast_region_decode_equals_fast_full_decode)
{
    region_equals_full(1, 78, 4, 20, 2);
}

Test(image_decode, cmyk_jpeg_equals_pil_conversion)
{
    const char *dir = getenv("HDMLP_TEST_DATA");
    cr_assert_not_null(dir, "HDMLP_TEST_DATA is not set");
    char path[1024];
    uint8_t *jpg = NULL, *want = NULL;
    size_t jl = 0, wl = 0;
    snprintf(path, sizeof(path), "%s/image/cmyk.jpg", dir);
    cr_assert_eq(testds_read_file(path, &jpg, &jl), 0, "%s", path);
    snprintf(path, sizeof(path), "%s/image/cmyk_pil_rgb.raw", dir);
    cr_assert_eq(testds_read_file(path, &want, &wl), 0, "%s", path);
    cr_assert_eq(wl, 24 * 16 * 3);
    image_decoder *d = decoder();
    image_buf img;
    cr_assert_eq(image_decode(d, jpg, jl, 3, 1, &img), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert(img.w == 24 && img.h == 16 && img.c == 3);
    cr_assert_arr_eq(img.px, want, wl);
    image_buf_free(&img);
    /* and as a region (the training path) */
    uint32_t oy = 0, ox = 0;
    cr_assert_eq(image_decode_jpeg_region(jpg, jl, 3, 1, 3, 5, 8, 10, &img, &oy, &ox), HDMLP_OK,
                 "%s", hdmlp_last_error());
    for (uint32_t r = 0; r < 8; r++) {
        cr_assert_arr_eq(img.px + ((size_t)r * img.w + 5 - ox) * 3,
                         want + ((3 + r) * 24 + 5) * 3, 30, "row %u", r);
    }
    image_buf_free(&img);
    image_decoder_free(d);
    free(jpg);
    free(want);
}

Test(image_decode, png_equals_spng_decode)
{
    image_decoder *d = decoder();
    for (uint32_t c = 1; c <= 3; c += 2) {
        uint8_t *px = testimg_pattern(37, 29, c, 3), *enc = NULL, *ref = NULL;
        size_t len = 0;
        cr_assert_eq(testimg_png(px, 37, 29, c, &enc, &len), 0);
        uint32_t rw = 0, rh = 0;
        cr_assert_eq(testimg_ref_png(enc, len, &ref, &rw, &rh), 0);
        image_buf img;
        cr_assert_eq(image_decode(d, enc, len, 3, 1, &img), HDMLP_OK, "%s", hdmlp_last_error());
        cr_assert(img.w == 37 && img.h == 29 && img.c == 3);
        cr_assert_arr_eq(img.px, ref, (size_t)37 * 29 * 3);
        /* and PNG is lossless: the pattern itself */
        for (size_t i = 0; i < (size_t)37 * 29; i++) {
            cr_assert_eq(img.px[3 * i], px[i * c], "pixel %zu", i);
        }
        image_buf_free(&img);
        free(px);
        free(enc);
        free(ref);
    }
    image_decoder_free(d);
}

Test(image_decode, raw_array_and_gray_conversion)
{
    image_decoder *d = decoder();
    uint8_t buf[16 + 4 * 2 * 3] = {'H', 'D', 'R', 'I', 2, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0};
    for (int i = 0; i < 24; i++) {
        buf[16 + i] = (uint8_t)(i * 10);
    }
    image_buf img;
    cr_assert_eq(image_decode(d, buf, sizeof(buf), 3, 1, &img), HDMLP_OK);
    cr_assert(img.h == 2 && img.w == 4 && img.c == 3);
    cr_assert_arr_eq(img.px, buf + 16, 24);
    image_buf_free(&img);
    cr_assert_eq(image_decode(d, buf, sizeof(buf), 1, 1, &img), HDMLP_OK);
    /* PIL's L: (19595 R + 38470 G + 7471 B + 0x8000) >> 16 */
    cr_assert_eq(img.px[1], (uint8_t)((30u * 19595 + 40u * 38470 + 50u * 7471 + 0x8000) >> 16));
    image_buf_free(&img);
    /* one byte short, a bad channel count */
    cr_assert_eq(image_decode(d, buf, sizeof(buf) - 1, 3, 1, &img), HDMLP_E_CORRUPT);
    buf[12] = 2;
    cr_assert_eq(image_decode(d, buf, sizeof(buf), 3, 1, &img), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "channels") != NULL, "%s", hdmlp_last_error());
    image_decoder_free(d);
}

Test(image_decode, damaged_and_hostile_inputs_are_corrupt)
{
    image_decoder *d = decoder();
    uint8_t *px = testimg_pattern(64, 48, 3, 1), *jpg = NULL, *png = NULL;
    size_t jl = 0, pl = 0;
    cr_assert_eq(testimg_jpeg(px, 64, 48, 3, 90, &jpg, &jl), 0);
    cr_assert_eq(testimg_png(px, 64, 48, 3, &png, &pl), 0);
    image_buf img;
    /* truncated JPEG (libjpeg-turbo would fill grey and warn) */
    cr_assert_eq(image_decode(d, jpg, jl / 2, 3, 1, &img), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "JPEG") != NULL, "%s", hdmlp_last_error());
    /* truncated PNG */
    cr_assert_eq(image_decode(d, png, pl - 20, 3, 1, &img), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "PNG") != NULL, "%s", hdmlp_last_error());
    /* a flipped byte in the PNG's image data: CRC or zlib failure */
    png[pl / 2] ^= 0x55;
    cr_assert_eq(image_decode(d, png, pl, 3, 1, &img), HDMLP_E_CORRUPT);
    /* a JPEG claiming 65000 × 65000 pixels: refused before any allocation */
    for (size_t i = 0; i + 8 < jl; i++) {
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) { /* SOF0: len(2) P(1) Y(2) X(2) */
            jpg[i + 5] = jpg[i + 7] = 0xFD;
            jpg[i + 6] = jpg[i + 8] = 0xE8;
            break;
        }
    }
    cr_assert_eq(image_decode(d, jpg, jl, 3, 1, &img), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "limit") != NULL, "%s", hdmlp_last_error());
    /* neither format; empty */
    cr_assert_eq(image_decode(d, (const uint8_t *)"GIF89a....", 10, 3, 1, &img),
                 HDMLP_E_CORRUPT);
    cr_assert_eq(image_decode(d, (const uint8_t *)"", 0, 3, 1, &img), HDMLP_E_CORRUPT);
    free(px);
    free(jpg);
    free(png);
    image_decoder_free(d);
}
