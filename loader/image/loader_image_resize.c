/*
 * PIL's antialiased bilinear resampling (Imaging/Resample.c), bit for bit: the triangle
 * filter of support 1 stretched by the scale factor when reducing, coefficients normalised
 * then held in 22-bit fixed point, the horizontal pass first (only over the rows the
 * vertical one reads), 8-bit results rounded and clipped after each pass.
 *
 * Where the compiler has the AVX2 intrinsics (HDMLP_HAVE_AVX2_INTRINSICS) and the CPU the
 * instructions (checked at run time), both passes run 16-bit multiply-adds (vpmaddwd) on
 * coefficients split in two exact halves: the same integers as the plain loops, which run
 * otherwise (and the horizontal one on a source's last rows, which the vector loads could
 * read past). The horizontal pass, whose taps start at a different column for each output
 * pixel, takes two output pixels of 3 channels and two taps a step, four pixels a store, the
 * step count fixed per image; the vertical pass sums 16 bytes of a row over all its taps in
 * registers. A transposed 8-row horizontal pass was measured slower here, and 32-bit
 * products (vpmulld, one tap a step) twice as slow. A flip is free: the horizontal pass
 * writes its columns right to left. The coefficients depend on the crop's fractional
 * position as well as on its size, so they are computed per image (a few hundred values),
 * not cached.
 */
#include "loader_image.h"

#include "format.h"

#include <math.h>
#include <string.h>

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
/* The AVX2 horizontal pass's plan for one image. Each coefficient is split as
 * k = hi × 2^11 + lo with lo in [0, 2^11), so that both halves fit 16 bits and
 * p × k = (p × hi) << 11 + p × lo exactly. Output pixels go in pairs (x, x + 1), each pair
 * nt steps of two taps (2t, 2t + 1): per step two vectors of 16 int16 lanes, hi then lo,
 * per 128-bit half (pixel x, then x + 1) that pixel's (k[2t], k[2t + 1]) four times (0 past
 * its own taps). Pairs come two at a time (four output pixels a store): the pixels past dw
 * up to a multiple of four have zero coefficients and read where the last pixel does. */
typedef struct hplan {
    uint32_t nt;   /* steps a pair: the most taps any output pixel has, halved, rounded up */
    uint32_t *off; /* per output pixel (to a multiple of 4): byte offset of its first tap */
    int16_t *kk;   /* per pair: nt × 2 vectors; 32-byte aligned */
} hplan;

static uint32_t hplan_pixels(uint32_t dw) { return (dw + 3) / 4 * 4; }

/* Bytes hplan_init may use for an axis of kx taps and dw outputs (alignment included). */
static size_t hplan_bytes(uint32_t kx, uint32_t dw)
{
    const size_t px = hplan_pixels(dw);
    return px * 4 + px / 2 * ((kx + 1) / 2) * 64 + 32;
}

/* Lays out the plan in p (hplan_bytes(ax->ksize, dw) bytes). */
static void hplan_init(const axis *ax, uint32_t dw, uint8_t *p, hplan *pl)
{
    const uint32_t ks = ax->ksize, npx = hplan_pixels(dw);
    uint32_t most = 1;
    for (uint32_t x = 0; x < dw; x++) {
        most = ax->bounds[2 * x + 1] > most ? ax->bounds[2 * x + 1] : most;
    }
    pl->nt = (most + 1) / 2;
    pl->off = (uint32_t *)p;
    pl->kk = (int16_t *)(((uintptr_t)(p + (size_t)npx * 4) + 31) & ~(uintptr_t)31);
    for (uint32_t x = 0; x < npx; x++) {
        pl->off[x] = ax->bounds[2 * (x < dw ? x : dw - 1)] * 3;
    }
    for (uint32_t x = 0; x < npx; x += 2) {
        for (uint32_t t = 0; t < pl->nt; t++) {
            int16_t *v = pl->kk + ((size_t)(x / 2) * pl->nt + t) * 32;
            for (uint32_t half = 0; half < 2; half++) {
                for (uint32_t i = 0; i < 2; i++) {
                    const uint32_t j = 2 * t + i, px = x + half;
                    const int32_t k = px < dw && j < ks ? ax->k[(size_t)px * ks + j] : 0;
                    for (uint32_t l = 0; l < 4; l++) {
                        v[half * 8 + 2 * l + i] = (int16_t)(k >> 11);
                        v[16 + half * 8 + 2 * l + i] = (int16_t)(k & 2047);
                    }
                }
            }
        }
    }
}

/* One pair of output pixels (one per 128-bit half): 16 bytes from each one's first tap hold
 * the 12 of four taps, and a shuffle makes two of them, 6 bytes, the 16-bit pairs (R, R'),
 * (G, G'), (B, B') to multiply and pairwise sum with the two taps' coefficient halves
 * (vpmaddwd), giving exactly hpass's 32-bit sums; returned shifted down (the fourth lane of
 * each half is 0). */
__attribute__((target("avx2"), always_inline)) static inline __m256i
hpair_avx2(const uint8_t *q0, const uint8_t *q1, const __m256i *k, uint32_t nt)
{
    const __m256i even =
        _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1,
                         1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m256i odd =
        _mm256_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1, 6, -1, 9,
                         -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
    __m256i hi = _mm256_setzero_si256(), lo = _mm256_set1_epi32(HALF);
    for (uint32_t t = 0; t < nt; t += 2) {
        const __m256i b = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(q0 + 6 * t))),
            _mm_loadu_si128((const __m128i *)(q1 + 6 * t)), 1);
        const __m256i p0 = _mm256_shuffle_epi8(b, even);
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(p0, _mm256_load_si256(k + 2 * t)));
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(p0, _mm256_load_si256(k + 2 * t + 1)));
        if (t + 1 < nt) {
            const __m256i p1 = _mm256_shuffle_epi8(b, odd);
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(p1, _mm256_load_si256(k + 2 * t + 2)));
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(p1, _mm256_load_si256(k + 2 * t + 3)));
        }
    }
    return _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo), PRECISION_BITS);
}

/* Bytes past a pixel's first tap that hpair_avx2 reads for nt steps. */
static size_t hpair_reach(uint32_t nt) { return (size_t)(nt - 1) / 2 * 12 + 16; }

/* The horizontal pass over one row of 3 channels with AVX2, four output pixels a step (two
 * pairs), their 12 bytes stored at once (in reverse order when flipped). nt: the plan's, a
 * constant where the caller specialises it. Reads up to hpair_reach(nt) bytes past the row's
 * end: only for rows with that many bytes of the source after them. */
__attribute__((target("avx2"), always_inline)) static inline void
hrow_avx2(const uint8_t *in, const hplan *pl, uint32_t nt, uint32_t dw, int flip,
          uint8_t *restrict o)
{
    const __m128i order =
        flip ? _mm_setr_epi8(12, 13, 14, 8, 9, 10, 4, 5, 6, 0, 1, 2, -1, -1, -1, -1)
             : _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    const uint32_t *off = pl->off;
    const __m256i *k = (const __m256i *)pl->kk;
    const ptrdiff_t step = flip ? -12 : 12;
    uint8_t *d = o + (flip ? (ptrdiff_t)dw * 3 - 12 : 0);
    uint32_t x = 0;
    for (; x < dw; x += 4, off += 4, k += 4 * nt, d += step) {
        const __m256i a = hpair_avx2(in + off[0], in + off[1], k, nt);
        const __m256i b = hpair_avx2(in + off[2], in + off[3], k + 2 * nt, nt);
        /* 16-bit lanes: [x, x + 2] in the low half, [x + 1, x + 3] in the high one; bytes,
         * then the four pixels' words in order, then their 12 bytes */
        __m256i v = _mm256_packus_epi32(a, b);
        v = _mm256_packus_epi16(v, v);
        __m128i w =
            _mm_unpacklo_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        w = _mm_shuffle_epi8(w, order);
        if (x + 4 > dw) { /* the last 1-3 pixels: the first ones in order, the last flipped */
            uint8_t t[16];
            const uint32_t n = dw - x;
            _mm_storeu_si128((__m128i *)t, w);
            memcpy(flip ? o : d, flip ? t + (4 - n) * 3 : t, (size_t)n * 3);
            break;
        }
        const uint32_t last = (uint32_t)_mm_extract_epi32(w, 2);
        _mm_storel_epi64((__m128i *)d, w);
        memcpy(d + 8, &last, 4);
    }
}

/* hrow_avx2 with the step count known at compile time for the common small kernels. */
__attribute__((target("avx2"))) static void
hpass3_avx2(const uint8_t *in, const hplan *pl, uint32_t dw, int flip, uint8_t *restrict o)
{
    switch (pl->nt) {
    case 1:
        hrow_avx2(in, pl, 1, dw, flip, o);
        break;
    case 2:
        hrow_avx2(in, pl, 2, dw, flip, o);
        break;
    case 3:
        hrow_avx2(in, pl, 3, dw, flip, o);
        break;
    default:
        hrow_avx2(in, pl, pl->nt, dw, flip, o);
        break;
    }
}

/* The vertical pass with AVX2: 16 bytes of the row a step, the same byte of two rows side
 * by side as 16-bit pairs multiplied by the two rows' coefficient halves (vpmaddwd), summed
 * in registers over all the rows; then shifted, clipped (saturating packs) and stored. kw:
 * per pair of rows (2t, 2t + 1; the row past an odd count weighs 0), the two rows' hi
 * halves as one 32-bit word, then their lo halves. Exactly vpass's sums. */
__attribute__((target("avx2"), always_inline)) static inline void
vrow_avx2(const uint8_t *rows, size_t stride, uint32_t cnt, uint32_t np, const uint32_t *kw,
          uint8_t *restrict o)
{
    size_t x = 0;
    for (; x + 16 <= stride; x += 16) {
        __m256i h0 = _mm256_setzero_si256(), h1 = h0;
        __m256i l0 = _mm256_set1_epi32(HALF), l1 = l0;
        const uint8_t *r = rows + x;
        for (uint32_t t = 0; t < np; t++, r += 2 * stride) {
            const uint8_t *s = 2 * t + 1 < cnt ? r + stride : r;
            const __m256i a = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)r));
            const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)s));
            const __m256i kh = _mm256_set1_epi32((int32_t)kw[2 * t]);
            const __m256i kl = _mm256_set1_epi32((int32_t)kw[2 * t + 1]);
            const __m256i p0 = _mm256_unpacklo_epi16(a, b), p1 = _mm256_unpackhi_epi16(a, b);
            h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(p0, kh));
            l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(p0, kl));
            h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(p1, kh));
            l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(p1, kl));
        }
        /* 32-bit lanes: bytes 0-3 and 8-11 in the first, 4-7 and 12-15 in the second */
        const __m256i s0 =
            _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(h0, 11), l0), PRECISION_BITS);
        const __m256i s1 =
            _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(h1, 11), l1), PRECISION_BITS);
        __m256i v = _mm256_packus_epi32(s0, s1);
        v = _mm256_packus_epi16(v, v);
        v = _mm256_permute4x64_epi64(v, 0x08);
        _mm_storeu_si128((__m128i *)(o + x), _mm256_castsi256_si128(v));
    }
    for (; x < stride; x++) {
        int32_t s = HALF;
        for (uint32_t t = 0; t < np; t++) {
            const uint8_t *r = rows + (size_t)2 * t * stride + x;
            const uint32_t hi = kw[2 * t], lo = kw[2 * t + 1];
            s += (r[0] * (int32_t)(hi & 0xffff) << 11) + r[0] * (int32_t)(lo & 0xffff);
            if (2 * t + 1 < cnt) {
                s += (r[stride] * (int32_t)(hi >> 16) << 11) + r[stride] * (int32_t)(lo >> 16);
            }
        }
        o[x] = clip8(s);
    }
}

/* vrow_avx2 with the pair count known at compile time for the common small kernels. */
__attribute__((target("avx2"))) static void vpass_avx2(const uint8_t *rows, size_t stride,
                                                       uint32_t cnt, const uint32_t *kw,
                                                       uint8_t *restrict o)
{
    const uint32_t np = (cnt + 1) / 2;
    switch (np) {
    case 1:
        vrow_avx2(rows, stride, cnt, 1, kw, o);
        break;
    case 2:
        vrow_avx2(rows, stride, cnt, 2, kw, o);
        break;
    case 3:
        vrow_avx2(rows, stride, cnt, 3, kw, o);
        break;
    default:
        vrow_avx2(rows, stride, cnt, np, kw, o);
        break;
    }
}

/* vpass_avx2's coefficient words for the cnt taps k. */
static void vwords(const int32_t *k, uint32_t cnt, uint32_t *kw)
{
    for (uint32_t t = 0; t < (cnt + 1) / 2; t++) {
        const int32_t a = k[2 * t], b = 2 * t + 1 < cnt ? k[2 * t + 1] : 0;
        kw[2 * t] = (uint32_t)(a >> 11) | (uint32_t)(b >> 11) << 16;
        kw[2 * t + 1] = (uint32_t)(a & 2047) | (uint32_t)(b & 2047) << 16;
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
 * (a loop the compiler vectorises). */
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
    size_t plans = 0;
#ifdef HDMLP_HAVE_AVX2_INTRINSICS
    plans = hplan_bytes(kx, dw) + (size_t)(ky + 1) * 4;
#endif
    return coeffs + tmp + rows + acc + plans + 128;
}

image_isa image_resize_isa(void)
{
#ifdef HDMLP_HAVE_AVX2_INTRINSICS
    if (__builtin_cpu_supports("avx2")) {
        return IMAGE_ISA_AVX2;
    }
#endif
    return IMAGE_ISA_PLAIN;
}

int image_resize_region(const image_buf *src, double y0, double x0, double bh, double bw,
                        uint32_t rh, uint32_t rw, uint32_t top, uint32_t left, uint8_t *dst,
                        uint32_t dh, uint32_t dw, int flip, uint8_t *scratch)
{
    return image_resize_region_isa(image_resize_isa(), src, y0, x0, bh, bw, rh, rw, top, left,
                                   dst, dh, dw, flip, scratch);
}

int image_resize_region_isa(image_isa isa, const image_buf *src, double y0, double x0,
                            double bh, double bw, uint32_t rh, uint32_t rw, uint32_t top,
                            uint32_t left, uint8_t *dst, uint32_t dh, uint32_t dw, int flip,
                            uint8_t *scratch)
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
    /* never more than the build and the CPU have */
    isa = isa < image_resize_isa() ? isa : image_resize_isa();
#ifdef HDMLP_HAVE_AVX2_INTRINSICS
    uint32_t *kw = (uint32_t *)(acc + stride); /* vwords' (ay.ksize + 1 words) */
    hplan pl = {0, NULL, NULL};
    if (isa >= IMAGE_ISA_AVX2 && c == 3) {
        hplan_init(&ax, dw, (uint8_t *)(kw + ay.ksize + 1), &pl);
    }
#endif
    for (uint32_t y = r0; y < r1; y++) {
        const uint8_t *in = src->px + (size_t)y * src->w * c;
        uint8_t *o = rows + (size_t)(y - r0) * stride;
#ifdef HDMLP_HAVE_AVX2_INTRINSICS
        /* the vector loads read up to hpair_reach bytes past the row's end: in the rows after
         * it, when there are enough of them */
        if (pl.kk != NULL && (size_t)(src->h - 1 - y) * src->w * 3 >= hpair_reach(pl.nt)) {
            hpass3_avx2(in, &pl, dw, flip, o);
            continue;
        }
#endif
        hpass(in, c, &ax, dw, flip, o);
    }
    for (uint32_t y = 0; y < dh; y++) {
        const uint32_t ymin = ay.bounds[2 * y] - r0, cnt = ay.bounds[2 * y + 1];
        const int32_t *k = ay.k + (size_t)y * ay.ksize;
        const uint8_t *in = rows + (size_t)ymin * stride;
        uint8_t *o = dst + (size_t)y * stride;
#ifdef HDMLP_HAVE_AVX2_INTRINSICS
        if (isa >= IMAGE_ISA_AVX2) {
            vwords(k, cnt, kw);
            vpass_avx2(in, stride, cnt, kw, o);
            continue;
        }
#endif
        vpass(in, stride, cnt, k, acc, o);
    }
    return HDMLP_OK;
}
