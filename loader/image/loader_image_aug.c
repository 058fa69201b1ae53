/*
 * Augmentation: torchvision's crop parameter rules drawn from the sample's own RNG, PIL's
 * antialiased bilinear resampling, and the store into the batch in the requested layout
 * and dtype (with the horizontal flip).
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

/* PIL's resampling (Imaging/Resample.c): triangle filter of support 1 stretched by the
 * scale factor when reducing, coefficients normalised then held in 22-bit fixed point,
 * 8-bit results rounded and clipped after each pass. */
#define PRECISION_BITS (32 - 8 - 2)

typedef struct axis {
    uint32_t ksize;
    uint32_t *bounds; /* out × (first, count) */
    int32_t *k;       /* out × ksize */
} axis;

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static uint32_t axis_ksize(double in_len, uint32_t out_size)
{
    double fs = in_len / out_size;
    if (fs < 1.0) {
        fs = 1.0;
    }
    return (uint32_t)ceil(fs) * 2 + 1;
}

/* Coefficients for output pixels [o0, o0 + n) of out_size over [in0, in0 + in_len) of an
 * axis, the source cut to [lo, hi) first (as torchvision crops before resizing). */
static void axis_init(axis *a, uint32_t lo, uint32_t hi, double in0, double in_len,
                      uint32_t out_size, uint32_t o0, uint32_t n, double *tmp)
{
    const uint32_t in_size = hi - lo;
    in0 -= lo;
    const double scale = in_len / out_size;
    const double fs = scale < 1.0 ? 1.0 : scale;
    const double support = fs;
    const double ss = 1.0 / fs;
    for (uint32_t i = 0; i < n; i++) {
        const double center = in0 + (o0 + i + 0.5) * scale;
        int64_t xmin = (int64_t)(center - support + 0.5);
        int64_t xmax = (int64_t)(center + support + 0.5);
        if (xmin < 0) {
            xmin = 0;
        }
        if (xmax > (int64_t)in_size) {
            xmax = in_size;
        }
        int64_t cnt = xmax - xmin;
        if (cnt > (int64_t)a->ksize) {
            cnt = a->ksize;
        }
        if (cnt < 0) {
            cnt = 0;
        }
        double ww = 0.0;
        for (int64_t x = 0; x < cnt; x++) {
            tmp[x] = triangle(((double)(x + xmin) - center + 0.5) * ss);
            ww += tmp[x];
        }
        int32_t *k = a->k + (size_t)i * a->ksize;
        for (uint32_t x = 0; x < a->ksize; x++) {
            double v = (int64_t)x < cnt && ww != 0.0 ? tmp[x] / ww : 0.0;
            v *= (double)(1 << PRECISION_BITS);
            k[x] = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
        }
        a->bounds[2 * i] = (uint32_t)xmin + lo;
        a->bounds[2 * i + 1] = (uint32_t)cnt;
    }
}

static uint8_t clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* The integer edge of a crop at v: floor for its start (limit 0), ceil for its end. */
static uint32_t cut(double v, uint32_t limit)
{
    if (limit == 0) {
        return v <= 0 ? 0 : (uint32_t)floor(v);
    }
    const double e = ceil(v);
    return e >= limit ? limit : (uint32_t)e;
}

size_t image_resize_scratch(const image_buf *src, uint32_t dh, uint32_t dw)
{
    const uint32_t kx = axis_ksize(src->w, dw);
    const uint32_t ky = axis_ksize(src->h, dh);
    const size_t coeffs = (size_t)dw * (kx * 4 + 8) + (size_t)dh * (ky * 4 + 8);
    const size_t tmp = (size_t)(kx > ky ? kx : ky) * sizeof(double);
    const size_t rows = (size_t)src->h * dw * src->c; /* the horizontal pass's rows */
    const size_t acc = (size_t)dw * src->c * sizeof(int32_t);
    return coeffs + tmp + rows + acc + 64;
}

int image_resize_region(const image_buf *src, double y0, double x0, double bh, double bw,
                        uint32_t rh, uint32_t rw, uint32_t top, uint32_t left, uint8_t *dst,
                        uint32_t dh, uint32_t dw, uint8_t *scratch)
{
    const uint32_t c = src->c;
    axis ax = {axis_ksize(bw, rw), NULL, NULL};
    axis ay = {axis_ksize(bh, rh), NULL, NULL};
    uint8_t *p = scratch;
    ax.bounds = (uint32_t *)p;
    p += (size_t)dw * 8;
    ay.bounds = (uint32_t *)p;
    p += (size_t)dh * 8;
    ax.k = (int32_t *)p;
    p += (size_t)dw * ax.ksize * 4;
    ay.k = (int32_t *)p;
    p += (size_t)dh * ay.ksize * 4;
    double *tmp = (double *)(((uintptr_t)p + 7) & ~(uintptr_t)7);
    p = (uint8_t *)(tmp + (ax.ksize > ay.ksize ? ax.ksize : ay.ksize));
    axis_init(&ax, cut(x0, 0), cut(x0 + bw, src->w), x0, bw, rw, left, dw, tmp);
    axis_init(&ay, cut(y0, 0), cut(y0 + bh, src->h), y0, bh, rh, top, dh, tmp);
    /* Rows the vertical pass reads. */
    uint32_t r0 = UINT32_MAX, r1 = 0;
    for (uint32_t i = 0; i < dh; i++) {
        const uint32_t a = ay.bounds[2 * i], b = a + ay.bounds[2 * i + 1];
        r0 = a < r0 ? a : r0;
        r1 = b > r1 ? b : r1;
    }
    if (r0 >= r1) {
        return hd_err(HDMLP_E_CORRUPT, "image: empty resampling window");
    }
    uint8_t *rows = p; /* (r1 - r0) × dw × c */
    const size_t stride = (size_t)dw * c;
    int32_t *acc =
        (int32_t *)(((uintptr_t)(rows + (size_t)(r1 - r0) * stride) + 3) & ~(uintptr_t)3);
    /* Sums fit in 32 bits: the triangle's weights are >= 0 and add up to 2^22, and 255 × 2^22
     * + 2^21 < 2^31 (PIL's own arithmetic). */
    for (uint32_t y = r0; y < r1; y++) {
        const uint8_t *in = src->px + (size_t)y * src->w * c;
        uint8_t *o = rows + (size_t)(y - r0) * stride;
        for (uint32_t x = 0; x < dw; x++) {
            const uint32_t xmin = ax.bounds[2 * x], cnt = ax.bounds[2 * x + 1];
            const int32_t *k = ax.k + (size_t)x * ax.ksize;
            const uint8_t *q = in + (size_t)xmin * c;
            if (c == 3) {
                int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                for (uint32_t j = 0; j < cnt; j++) {
                    s0 += q[3 * j] * k[j];
                    s1 += q[3 * j + 1] * k[j];
                    s2 += q[3 * j + 2] * k[j];
                }
                o[3 * x] = clip8(s0);
                o[3 * x + 1] = clip8(s1);
                o[3 * x + 2] = clip8(s2);
            } else {
                int32_t s0 = 1 << (PRECISION_BITS - 1);
                for (uint32_t j = 0; j < cnt; j++) {
                    s0 += q[j] * k[j];
                }
                o[x] = clip8(s0);
            }
        }
    }
    for (uint32_t y = 0; y < dh; y++) {
        const uint32_t ymin = ay.bounds[2 * y] - r0, cnt = ay.bounds[2 * y + 1];
        const int32_t *k = ay.k + (size_t)y * ay.ksize;
        for (size_t x = 0; x < stride; x++) {
            acc[x] = 1 << (PRECISION_BITS - 1);
        }
        for (uint32_t j = 0; j < cnt; j++) {
            const uint8_t *row = rows + (size_t)(ymin + j) * stride;
            const int32_t kj = k[j];
            for (size_t x = 0; x < stride; x++) {
                acc[x] += row[x] * kj;
            }
        }
        uint8_t *o = dst + (size_t)y * stride;
        for (size_t x = 0; x < stride; x++) {
            o[x] = clip8(acc[x]);
        }
    }
    return HDMLP_OK;
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
