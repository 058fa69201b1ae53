/*
 * Augmentation: torchvision's crop parameter rules drawn from the sample's own RNG and the
 * store into the batch in the requested layout and dtype (with the horizontal flip). PIL's
 * antialiased bilinear resampling: loader_image_resize.c.
 */
#include "loader_image.h"

#include "fmt_rng.h"
#include "format.h"

#include <math.h>
#include <string.h>

void image_rng_seed(fmt_rng *rng, uint64_t seed, uint64_t epoch, uint64_t index)
{
    /* A stream per (epoch, sample), apart from the streams of the delivery order. */
    uint64_t x = epoch ^ 0x696d6167652d7267ull; /* "image-rg" */
    const uint64_t stream = fmt_splitmix64(&x) ^ index;
    fmt_rng_seed(rng, seed, stream);
}

/* Uniform in [a, b): 53 random bits. */
static double uniform(fmt_rng *rng, double a, double b)
{
    const double u = (double)(fmt_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    return a + (b - a) * u;
}

void image_crop_train(const struct hdmlp_image_config *ic, fmt_rng *rng, uint32_t h, uint32_t w,
                      image_crop *out)
{
    const double area = (double)h * (double)w;
    const double lr0 = log(ic->ratio_min), lr1 = log(ic->ratio_max);
    for (int attempt = 0; attempt < 10; attempt++) {
        const double target = area * uniform(rng, ic->scale_min, ic->scale_max);
        const double ar = exp(uniform(rng, lr0, lr1));
        /* Python's round(): half to even, as rint in the default rounding mode. */
        const double cw = rint(sqrt(target * ar));
        const double ch = rint(sqrt(target / ar));
        if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
            out->height = (uint32_t)ch;
            out->width = (uint32_t)cw;
            out->top = (uint32_t)fmt_rng_below(rng, h - out->height + 1);
            out->left = (uint32_t)fmt_rng_below(rng, w - out->width + 1);
            out->flip = uniform(rng, 0.0, 1.0) < image_flip_prob(ic);
            return;
        }
    }
    /* Fallback: the whole image, clamped to the ratio range, centred. */
    const double in_ratio = (double)w / (double)h;
    double cw = w, ch = h;
    if (in_ratio < ic->ratio_min) {
        ch = rint(cw / ic->ratio_min);
    } else if (in_ratio > ic->ratio_max) {
        cw = rint(ch * ic->ratio_max);
    }
    out->height = ch < 1 ? 1 : (uint32_t)ch;
    out->width = cw < 1 ? 1 : (uint32_t)cw;
    out->top = (h - out->height) / 2;
    out->left = (w - out->width) / 2;
    out->flip = uniform(rng, 0.0, 1.0) < image_flip_prob(ic);
}

void image_crop_val(const struct hdmlp_image_config *ic, uint32_t h, uint32_t w, uint32_t *rh,
                    uint32_t *rw, uint32_t *top, uint32_t *left)
{
    /* The smallest resize keeping the aspect that covers height / f × width / f; for a
     * square output, torchvision's Resize(int(size / f)) on the shorter side with the
     * longer one int(short × long / short), then CenterCrop's int(round((dim - crop) / 2)). */
    const double f = ic->crop_fraction;
    if ((double)ic->height / h >= (double)ic->width / w) {
        *rh = (uint32_t)((double)ic->height / f);
        *rw = (uint32_t)((double)*rh * w / h);
    } else {
        *rw = (uint32_t)((double)ic->width / f);
        *rh = (uint32_t)((double)*rw * h / w);
    }
    if (*rh < ic->height) {
        *rh = ic->height;
    }
    if (*rw < ic->width) {
        *rw = ic->width;
    }
    *top = (uint32_t)rint((*rh - ic->height) / 2.0);
    *left = (uint32_t)rint((*rw - ic->width) / 2.0);
}

void image_store(const struct hdmlp_image_config *ic, const uint8_t *px, int flip, void *out)
{
    const uint32_t h = ic->height, w = ic->width, c = ic->channels;
    const int nchw = ic->layout == HDMLP_LAYOUT_NCHW;
    const int f32 = ic->dtype == HDMLP_DTYPE_FLOAT32;
    float scale[3], shift[3];
    for (uint32_t ch = 0; ch < c; ch++) {
        scale[ch] = 1.0f / (255.0f * ic->std[ch]);
        shift[ch] = -ic->mean[ch] / ic->std[ch];
    }
    uint8_t *o8 = out;
    float *of = out;
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *row = px + (size_t)y * w * c;
        for (uint32_t x = 0; x < w; x++) {
            const uint8_t *pix = row + (size_t)(flip ? w - 1 - x : x) * c;
            for (uint32_t ch = 0; ch < c; ch++) {
                const size_t at =
                    nchw ? ((size_t)ch * h + y) * w + x : ((size_t)y * w + x) * c + ch;
                if (f32) {
                    of[at] = (float)pix[ch] * scale[ch] + shift[ch];
                } else {
                    o8[at] = pix[ch];
                }
            }
        }
    }
}
