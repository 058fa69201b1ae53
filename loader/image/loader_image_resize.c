/*
 * PIL's antialiased bilinear resampling (Imaging/Resample.c), bit for bit: the triangle
 * filter of support 1 stretched by the scale factor when reducing, coefficients normalised
 * then held in 22-bit fixed point, the horizontal pass first (only over the rows the
 * vertical one reads), 8-bit results rounded and clipped after each pass.
 *
 * The vertical pass, a loop along rows the compiler vectorises, is also built for AVX2 where
 * the compiler has target_clones (HDMLP_HAVE_TARGET_CLONES, CMake's check) and chosen at load
 * time: 8 lanes of 32-bit products instead of SSE2's emulated ones, the same integers on
 * every path. The horizontal pass, whose taps start at a different column for each output
 * pixel, takes two output pixels of 3 channels and two taps per AVX2 step (16-bit
 * multiply-adds on coefficients split in two exact halves) where the compiler has the
 * intrinsics (HDMLP_HAVE_AVX2_INTRINSICS) and the CPU the instructions, scalar otherwise
 * (and on a source's last rows, which it could read past); a transposed 8-row version was
 * measured slower here, and 32-bit products (vpmulld, one tap a step) twice as slow. A flip is
 * free: the horizontal pass writes its columns right to left. The coefficients depend on the
 * crop's fractional position as well as on its size, so they are computed per image (a few
 * hundred values), not cached.
 */
#include "loader_image.h"

#include "format.h"

#include <math.h>
#include <string.h>

#ifdef HDMLP_HAVE_TARGET_CLONES
#define RESIZE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define RESIZE_CLONES
#endif
#ifdef HDMLP_HAVE_AVX2_INTRINSICS
#include <immintrin.h>
#endif

#define PRECISION_BITS (32 - 8 - 2)
#define HALF (1 << (PRECISION_BITS - 1))
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

static inline uint8_t clip8(int32_t v)
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

#ifdef HDMLP_HAVE_AVX2_INTRINSICS
/* The coefficients as the AVX2 pass multiplies them: k = hi × 2^11 + lo with lo in
 * [0, 2^11), so that both halves fit 16 bits and p × k = (p × hi) << 11 + p × lo exactly.
 * For output pixels x, x + 1 (pair x / 2; a lone last pixel pairs with zeros) and taps 2t,
 * 2t + 1 (past ksize: 0), two vectors of 16 int16 lanes, hi then lo: per 128-bit half (pixel
 * x, then x + 1) the pair (k[2t], k[2t + 1]) four times. kk: (dw + 1) / 2 × ceil(ksize / 2)
 * × 2 vectors, 32-byte aligned; made once per image, read for every row. */
static void pairs_init(const axis *ax, uint32_t dw, int16_t *restrict kk)
{
    const uint32_t ks = ax->ksize, kt = (ks + 1) / 2;
    for (uint32_t x = 0; x < dw; x += 2) {
        for (uint32_t t = 0; t < kt; t++) {
            int16_t *v = kk + ((size_t)(x / 2) * kt + t) * 32;
            for (uint32_t half = 0; half < 2; half++) {
                for (uint32_t i = 0; i < 2; i++) {
                    const uint32_t j = 2 * t + i;
                    const int32_t k =
                        x + half < dw && j < ks ? ax->k[(size_t)(x + half) * ks + j] : 0;
                    for (uint32_t l = 0; l < 4; l++) {
                        v[half * 8 + 2 * l + i] = (int16_t)(k >> 11);
                        v[16 + half * 8 + 2 * l + i] = (int16_t)(k & 2047);
                    }
                }
            }
        }
    }
}

/* The horizontal pass over one row of 3 channels with AVX2: two output pixels a step (one
 * per 128-bit half), two taps at a time: the 6 bytes of two neighbouring source pixels
 * become the 16-bit pairs (R, R'), (G, G'), (B, B'), multiplied and pairwise summed with the
 * two taps' coefficient halves (vpmaddwd), giving exactly hpass's 32-bit sums. Each step
 * runs to the larger of the two tap counts, rounded up to even (coefficients past a pixel's
 * own count are 0), so it reads up to (ksize + 2) × 3 bytes past the row's end: only for
 * rows with at least that many bytes of the source after them. kk: pairs_init's. */
__attribute__((target("avx2"))) static void hpass3_avx2(const uint8_t *in, const axis *ax,
                                                        const int16_t *kk, uint32_t dw,
                                                        int flip, uint8_t *restrict o)
{
    const uint32_t *bd = ax->bounds;
    const uint32_t kt = (ax->ksize + 1) / 2;
    const __m256i spread =
        _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1,
                         1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    for (uint32_t x = 0; x < dw; x += 2) {
        const uint32_t x1 = x + 1 < dw ? x + 1 : x; /* a lone last pixel: itself again */
        const uint8_t *q0 = in + (size_t)bd[2 * x] * 3, *q1 = in + (size_t)bd[2 * x1] * 3;
        const uint32_t n0 = bd[2 * x + 1], n1 = bd[2 * x1 + 1];
        const uint32_t nt = ((n0 > n1 ? n0 : n1) + 1) / 2;
        const __m256i *k = (const __m256i *)(kk + (size_t)(x / 2) * kt * 32);
        __m256i hi = _mm256_setzero_si256(), lo = _mm256_setzero_si256();
        for (uint32_t t = 0; t < nt; t++) {
            const __m128i a = _mm_loadl_epi64((const __m128i *)(q0 + 6 * t));
            const __m128i b = _mm_loadl_epi64((const __m128i *)(q1 + 6 * t));
            const __m256i px = _mm256_shuffle_epi8(
                _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1), spread);
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(px, _mm256_load_si256(k + 2 * t)));
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(px, _mm256_load_si256(k + 2 * t + 1)));
        }
        __m256i acc = _mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo);
        acc = _mm256_add_epi32(acc, _mm256_set1_epi32(HALF));
        /* >> 22, then clipped to 0..255 by the two saturating packs (as clip8) */
        __m256i v = _mm256_srai_epi32(acc, PRECISION_BITS);
        v = _mm256_packus_epi32(v, v);
        v = _mm256_packus_epi16(v, v);
        const int32_t r0 = _mm256_extract_epi32(v, 0), r1 = _mm256_extract_epi32(v, 4);
        memcpy(o + (size_t)(flip ? dw - 1 - x : x) * 3, &r0, 3);
        if (x + 1 < dw) {
            memcpy(o + (size_t)(flip ? dw - 2 - x : x + 1) * 3, &r1, 3);
        }
    }
}
#endif

/* The horizontal pass over one row of c channels (c = 1 or 3, the loop specialised for
 * each): output pixel x goes to column dw - 1 - x when flipped. Sums fit in 32 bits: the
 * triangle's weights are >= 0 and add up to 2^22, and 255 × 2^22 + 2^21 < 2^31 (PIL's own
 * arithmetic). */
static void hpass(const uint8_t *in, uint32_t c, const axis *ax, uint32_t dw, int flip,
                  uint8_t *restrict o)
{
    const ptrdiff_t step = flip ? -(ptrdiff_t)c : (ptrdiff_t)c;
    uint8_t *d = o + (flip ? (size_t)(dw - 1) * c : 0);
    const uint32_t *bd = ax->bounds;
    const int32_t *k = ax->k;
    if (c == 3) {
        for (uint32_t x = 0; x < dw; x++, d += step, k += ax->ksize) {
            const uint8_t *q = in + (size_t)bd[2 * x] * 3;
            const uint32_t cnt = bd[2 * x + 1];
            int32_t s0 = HALF, s1 = HALF, s2 = HALF;
            for (uint32_t j = 0; j < cnt; j++, q += 3) {
                s0 += q[0] * k[j];
                s1 += q[1] * k[j];
                s2 += q[2] * k[j];
            }
            d[0] = clip8(s0);
            d[1] = clip8(s1);
            d[2] = clip8(s2);
        }
        return;
    }
    for (uint32_t x = 0; x < dw; x++, d += step, k += ax->ksize) {
        const uint8_t *q = in + bd[2 * x];
        const uint32_t cnt = bd[2 * x + 1];
        int32_t s0 = HALF;
        for (uint32_t j = 0; j < cnt; j++) {
            s0 += q[j] * k[j];
        }
        d[0] = clip8(s0);
    }
}

/* The vertical pass: output row o = the cnt rows from `rows` weighted by k, summed in acc
 * (a loop the compiler vectorises: 8 lanes of 32-bit products with AVX2). */
RESIZE_CLONES
static void vpass(const uint8_t *rows, size_t stride, uint32_t cnt, const int32_t *k,
                  int32_t *restrict acc, uint8_t *restrict o)
{
    for (size_t x = 0; x < stride; x++) {
        acc[x] = HALF;
    }
    for (uint32_t j = 0; j < cnt; j++) {
        const uint8_t *row = rows + j * stride;
        const int32_t kj = k[j];
        for (size_t x = 0; x < stride; x++) {
            acc[x] += row[x] * kj;
        }
    }
    for (size_t x = 0; x < stride; x++) {
        o[x] = clip8(acc[x]);
    }
}

size_t image_resize_scratch(const image_buf *src, uint32_t dh, uint32_t dw)
{
    const uint32_t kx = axis_ksize(src->w, dw);
    const uint32_t ky = axis_ksize(src->h, dh);
    const size_t coeffs = (size_t)dw * (kx * 4 + 8) + (size_t)dh * (ky * 4 + 8);
    const size_t tmp = (size_t)(kx > ky ? kx : ky) * sizeof(double);
    const size_t rows = (size_t)src->h * dw * src->c; /* the horizontal pass's rows */
    const size_t acc = (size_t)dw * src->c * sizeof(int32_t);
    const size_t pairs = (size_t)(dw + 1) / 2 * ((kx + 1) / 2) * 64; /* pairs_init's */
    return coeffs + tmp + rows + acc + pairs + 128;
}

int image_resize_region(const image_buf *src, double y0, double x0, double bh, double bw,
                        uint32_t rh, uint32_t rw, uint32_t top, uint32_t left, uint8_t *dst,
                        uint32_t dh, uint32_t dw, int flip, uint8_t *scratch)
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
#ifdef HDMLP_HAVE_AVX2_INTRINSICS
    const int avx2 = c == 3 && __builtin_cpu_supports("avx2");
    int16_t *kk = (int16_t *)(((uintptr_t)(acc + stride) + 31) & ~(uintptr_t)31);
    if (avx2) {
        pairs_init(&ax, dw, kk);
    }
#endif
    for (uint32_t y = r0; y < r1; y++) {
        const uint8_t *in = src->px + (size_t)y * src->w * c;
        uint8_t *o = rows + (size_t)(y - r0) * stride;
#ifdef HDMLP_HAVE_AVX2_INTRINSICS
        /* the vector loads read up to (ksize + 2) × 3 bytes past the row's end: in the rows
         * after it, when there are enough of them */
        if (avx2 && (size_t)(src->h - 1 - y) * src->w * 3 >= ((size_t)ax.ksize + 2) * 3) {
            hpass3_avx2(in, &ax, kk, dw, flip, o);
            continue;
        }
#endif
        hpass(in, c, &ax, dw, flip, o);
    }
    for (uint32_t y = 0; y < dh; y++) {
        const uint32_t ymin = ay.bounds[2 * y] - r0, cnt = ay.bounds[2 * y + 1];
        vpass(rows + (size_t)ymin * stride, stride, cnt, ay.k + (size_t)y * ay.ksize, acc,
              dst + (size_t)y * stride);
    }
    return HDMLP_OK;
}
