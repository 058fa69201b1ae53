/* Pack-time image preparation: probe, decode (libjpeg-turbo with DCT scaling, libspng),
 * area-average shrink, JPEG re-encode. See pack_image.h. */
#include "pack_image.h"

#include "format.h"

#include <math.h>
#include <spng.h>
#include <stdio.h>
#include <string.h>
#include <turbojpeg.h>

/* ---- header probe ---------------------------------------------------------------------- */

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Walks the markers up to the first SOFn (never past SOS). */
static void probe_jpeg(const uint8_t *p, size_t n, pack_image_info *info)
{
    size_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xff) {
            return;
        }
        while (i < n && p[i] == 0xff) { /* fill bytes */
            i++;
        }
        if (i >= n) {
            return;
        }
        const uint8_t m = p[i++];
        if (m == 0x01 || (m >= 0xd0 && m <= 0xd7)) { /* no length */
            continue;
        }
        if (m == 0xd9 || m == 0xda || i + 2 > n) { /* EOI or SOS before any frame */
            return;
        }
        const uint32_t len = be16(p + i);
        if (len < 2) {
            return;
        }
        const int sof = m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
        if (sof) {
            if (len < 7 || i + 7 > n) {
                return;
            }
            info->height = be16(p + i + 3);
            info->width = be16(p + i + 5);
            if (info->width == 0 || info->height == 0) {
                info->width = info->height = 0;
            }
            return;
        }
        i += len;
    }
}

pack_image_type pack_image_probe(const uint8_t *p, size_t n, pack_image_info *info)
{
    memset(info, 0, sizeof(*info));
    if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) {
        info->type = PACK_IMAGE_JPEG;
        probe_jpeg(p, n, info);
    } else if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0) {
        info->type = PACK_IMAGE_PNG;
        if (n >= 24 && memcmp(p + 12, "IHDR", 4) == 0 && be32(p + 8) == 13) {
            const uint32_t w = be32(p + 16), h = be32(p + 20);
            if (w > 0 && h > 0 && w <= INT32_MAX && h <= INT32_MAX) {
                info->width = w;
                info->height = h;
            }
        }
    }
    return info->type;
}

/* ---- context ----------------------------------------------------------------------------- */

struct pack_image_ctx {
    uint32_t max_side;
    int quality;
    tjhandle dec, enc;
    uint8_t *pix; /* decoded pixels */
    size_t pix_cap;
    uint8_t *dst; /* shrunk pixels */
    size_t dst_cap;
    float *tmp; /* horizontal pass */
    size_t tmp_cap;
    int32_t *xi, *yi; /* per output column/row: first source index, count */
    float *xw, *yw;   /* and weights, `span` per output */
    size_t xw_cap, yw_cap, xi_cap, yi_cap;
    unsigned char *jpeg;
    unsigned long jpeg_cap;
    char why[256];
};

int pack_image_ctx_create(uint32_t max_side, int quality, pack_image_ctx **out)
{
    *out = NULL;
    if (max_side == 0 || max_side > 65535) {
        return hd_err(HDMLP_E_INVAL, "image max side must be 1..65535");
    }
    if (quality < 1 || quality > 100) {
        return hd_err(HDMLP_E_INVAL, "image quality must be 1..100");
    }
    pack_image_ctx *const ic = hd_calloc(1, sizeof(*ic));
    if (!ic) {
        return hd_err(HDMLP_E_NOMEM, "out of memory");
    }
    ic->max_side = max_side;
    ic->quality = quality;
    ic->dec = tjInitDecompress();
    ic->enc = tjInitCompress();
    if (!ic->dec || !ic->enc) {
        pack_image_ctx_free(ic);
        return hd_err(HDMLP_E_NOMEM, "cannot create a JPEG codec: %s", tjGetErrorStr2(NULL));
    }
    *out = ic;
    return HDMLP_OK;
}

void pack_image_ctx_free(pack_image_ctx *ic)
{
    if (!ic) {
        return;
    }
    if (ic->dec) {
        tjDestroy(ic->dec);
    }
    if (ic->enc) {
        tjDestroy(ic->enc);
    }
    tjFree(ic->jpeg);
    hd_free(ic->pix);
    hd_free(ic->dst);
    hd_free(ic->tmp);
    hd_free(ic->xi);
    hd_free(ic->yi);
    hd_free(ic->xw);
    hd_free(ic->yw);
    hd_free(ic);
}

const char *pack_image_why(const pack_image_ctx *ic) { return ic->why; }

static int why(pack_image_ctx *ic, const char *fmt, const char *detail)
{
    snprintf(ic->why, sizeof(ic->why), fmt, detail);
    return -1;
}

/* Grows *p to at least n bytes (contents not kept). */
static int grow(void **p, size_t *cap, size_t n)
{
    if (*cap >= n) {
        return 0;
    }
    hd_free(*p);
    *p = hd_malloc(n);
    *cap = *p ? n : 0;
    return *p ? 0 : -1;
}

/* ---- area-average shrink ------------------------------------------------------------------
 */

/* Weights of the source pixels covering output pixel i when src pixels map onto dst:
 * output i covers [i*s, (i+1)*s) with s = src/dst ≥ 1; each weight is the overlap / s. */
static int area_weights(pack_image_ctx *ic, uint32_t src, uint32_t dst, int32_t **idx,
                        size_t *idx_cap, float **w, size_t *w_cap, uint32_t *span)
{
    const double s = (double)src / (double)dst;
    *span = (uint32_t)ceil(s) + 1;
    if (grow((void **)idx, idx_cap, (size_t)dst * 2 * sizeof(int32_t)) != 0 ||
        grow((void **)w, w_cap, (size_t)dst * *span * sizeof(float)) != 0) {
        return why(ic, "%s", "out of memory for resampling weights");
    }
    for (uint32_t i = 0; i < dst; i++) {
        const double a = i * s, b = (i + 1) * s;
        uint32_t first = (uint32_t)floor(a);
        uint32_t last = (uint32_t)ceil(b); /* exclusive */
        if (last > src) {
            last = src;
        }
        if (first >= last) {
            first = last - 1;
        }
        uint32_t cnt = 0;
        for (uint32_t j = first; j < last && cnt < *span; j++) {
            const double lo = j > a ? j : a, hi = j + 1 < b ? j + 1 : b;
            (*w)[(size_t)i * *span + cnt++] = hi > lo ? (float)((hi - lo) / s) : 0.0f;
        }
        (*idx)[2 * i] = (int32_t)first;
        (*idx)[2 * i + 1] = (int32_t)cnt;
    }
    return 0;
}

static int shrink(pack_image_ctx *ic, const uint8_t *src, uint32_t sw, uint32_t sh, int c,
                  uint32_t dw, uint32_t dh)
{
    uint32_t xs, ys;
    if (area_weights(ic, sw, dw, &ic->xi, &ic->xi_cap, &ic->xw, &ic->xw_cap, &xs) != 0 ||
        area_weights(ic, sh, dh, &ic->yi, &ic->yi_cap, &ic->yw, &ic->yw_cap, &ys) != 0) {
        return -1;
    }
    const size_t row = (size_t)dw * (size_t)c;
    if (grow((void **)&ic->tmp, &ic->tmp_cap, (size_t)sh * row * sizeof(float)) != 0 ||
        grow((void **)&ic->dst, &ic->dst_cap, (size_t)dh * row) != 0) {
        return why(ic, "%s", "out of memory for resampling");
    }
    for (uint32_t y = 0; y < sh; y++) { /* horizontal: sh × dw */
        const uint8_t *const in = src + (size_t)y * sw * (size_t)c;
        float *const out = ic->tmp + (size_t)y * row;
        for (uint32_t x = 0; x < dw; x++) {
            const int32_t first = ic->xi[2 * x], cnt = ic->xi[2 * x + 1];
            const float *const w = ic->xw + (size_t)x * xs;
            for (int k = 0; k < c; k++) {
                float acc = 0.0f;
                for (int32_t j = 0; j < cnt; j++) {
                    acc += w[j] * in[(size_t)(first + j) * (size_t)c + (size_t)k];
                }
                out[(size_t)x * (size_t)c + (size_t)k] = acc;
            }
        }
    }
    for (uint32_t y = 0; y < dh; y++) { /* vertical: dh × dw */
        const int32_t first = ic->yi[2 * y], cnt = ic->yi[2 * y + 1];
        const float *const w = ic->yw + (size_t)y * ys;
        uint8_t *const out = ic->dst + (size_t)y * row;
        for (size_t x = 0; x < row; x++) {
            float acc = 0.0f;
            for (int32_t j = 0; j < cnt; j++) {
                acc += w[j] * ic->tmp[(size_t)(first + j) * row + x];
            }
            const float v = acc + 0.5f;
            out[x] = v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
        }
    }
    return 0;
}

/* ---- decode ------------------------------------------------------------------------------ */

/* Records a decoder error and replaces the decompressor: after a failed decode, a
 * libjpeg-turbo 2.1 handle can report the next image's header wrongly. */
static int jpeg_failed(pack_image_ctx *ic)
{
    why(ic, "invalid JPEG: %s", tjGetErrorStr2(ic->dec));
    tjDestroy(ic->dec);
    ic->dec = tjInitDecompress(); /* NULL: made again by the next decode_jpeg */
    return -1;
}

/* Decodes a JPEG at the smallest DCT scale that still covers dw × dh. */
static int decode_jpeg(pack_image_ctx *ic, const uint8_t *in, size_t n, uint32_t dw,
                       uint32_t dh, uint32_t *w, uint32_t *h, int *c)
{
    int iw = 0, ih = 0, sub, cs;
    if (!ic->dec && !(ic->dec = tjInitDecompress())) {
        return why(ic, "%s", "cannot create a JPEG decoder");
    }
    if (tjDecompressHeader3(ic->dec, in, (unsigned long)n, &iw, &ih, &sub, &cs) != 0) {
        return jpeg_failed(ic);
    }
    if (iw < 1 || ih < 1) {
        return why(ic, "%s", "invalid JPEG: no image size");
    }
    if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
        return why(ic, "%s", "CMYK JPEG (not re-encoded)");
    }
    int nf = 0;
    const tjscalingfactor *const sf = tjGetScalingFactors(&nf);
    tjscalingfactor best = {1, 1};
    for (int i = 0; sf && i < nf; i++) {
        const int sw = TJSCALED(iw, sf[i]), sh = TJSCALED(ih, sf[i]);
        if (sf[i].num <= sf[i].denom && sw >= (int)dw && sh >= (int)dh &&
            (long long)sw * sh < (long long)TJSCALED(iw, best) * TJSCALED(ih, best)) {
            best = sf[i];
        }
    }
    const int sw = TJSCALED(iw, best), sh = TJSCALED(ih, best);
    *c = cs == TJCS_GRAY ? 1 : 3;
    if ((uint64_t)sw * (uint64_t)sh > PACK_IMAGE_MAX_PIXELS) {
        return why(ic, "%s", "too many pixels to decode");
    }
    if (grow((void **)&ic->pix, &ic->pix_cap, (size_t)sw * (size_t)sh * (size_t)*c) != 0) {
        return why(ic, "%s", "out of memory for the decoded image");
    }
    if (tjDecompress2(ic->dec, in, (unsigned long)n, ic->pix, sw, 0, sh,
                      *c == 1 ? TJPF_GRAY : TJPF_RGB, TJFLAG_STOPONWARNING) != 0) {
        return jpeg_failed(ic);
    }
    *w = (uint32_t)sw;
    *h = (uint32_t)sh;
    return 0;
}

/* Decodes a PNG to RGB (alpha dropped, 16-bit reduced to 8, palette expanded). */
static int decode_png(pack_image_ctx *ic, const uint8_t *in, size_t n, uint32_t *w, uint32_t *h,
                      int *c)
{
    spng_ctx *const sc = spng_ctx_new(0);
    if (!sc) {
        return why(ic, "%s", "out of memory for a PNG decoder");
    }
    struct spng_ihdr ihdr;
    size_t len = 0;
    int rc = spng_set_png_buffer(sc, in, n);
    if (rc == 0) {
        rc = spng_set_chunk_limits(sc, 64u << 20, 64u << 20);
    }
    if (rc == 0) {
        rc = spng_get_ihdr(sc, &ihdr);
    }
    if (rc == 0 && (uint64_t)ihdr.width * ihdr.height > PACK_IMAGE_MAX_PIXELS) {
        spng_ctx_free(sc);
        return why(ic, "%s", "too many pixels to decode");
    }
    if (rc == 0) {
        rc = spng_decoded_image_size(sc, SPNG_FMT_RGB8, &len);
    }
    if (rc == 0 && grow((void **)&ic->pix, &ic->pix_cap, len) != 0) {
        spng_ctx_free(sc);
        return why(ic, "%s", "out of memory for the decoded image");
    }
    if (rc == 0) {
        rc = spng_decode_image(sc, ic->pix, len, SPNG_FMT_RGB8, 0);
    }
    spng_ctx_free(sc);
    if (rc != 0) {
        return why(ic, "invalid PNG: %s", spng_strerror(rc));
    }
    *w = ihdr.width;
    *h = ihdr.height;
    *c = 3;
    return 0;
}

/* ---- prepare ----------------------------------------------------------------------------- */

int pack_image_prepare(pack_image_ctx *ic, const uint8_t *in, size_t n, const uint8_t **out,
                       size_t *out_len)
{
    ic->why[0] = '\0';
    pack_image_info info;
    if (pack_image_probe(in, n, &info) == PACK_IMAGE_OTHER) {
        return 0;
    }
    if (info.width == 0) {
        return why(ic, "cannot read the %s header",
                   info.type == PACK_IMAGE_JPEG ? "JPEG" : "PNG");
    }
    const uint32_t longer = info.width > info.height ? info.width : info.height;
    if (longer <= ic->max_side) {
        return 0;
    }
    /* Target: the longer side becomes max_side, the other keeps the aspect (≥ 1). */
    const double f = (double)ic->max_side / (double)longer;
    uint32_t dw = (uint32_t)lround(info.width * f), dh = (uint32_t)lround(info.height * f);
    dw = dw < 1 ? 1 : dw > ic->max_side ? ic->max_side : dw;
    dh = dh < 1 ? 1 : dh > ic->max_side ? ic->max_side : dh;
    uint32_t sw = 0, sh = 0;
    int c = 3;
    const int rc = info.type == PACK_IMAGE_JPEG ? decode_jpeg(ic, in, n, dw, dh, &sw, &sh, &c)
                                                : decode_png(ic, in, n, &sw, &sh, &c);
    if (rc != 0) {
        return -1;
    }
    dw = dw > sw ? sw : dw; /* the chosen DCT scale covers the target; keep it so */
    dh = dh > sh ? sh : dh;
    const uint8_t *pixels = ic->pix;
    if (sw != dw || sh != dh) {
        if (shrink(ic, ic->pix, sw, sh, c, dw, dh) != 0) {
            return -1;
        }
        pixels = ic->dst;
    }
    const int samp = c == 1 ? TJSAMP_GRAY : TJSAMP_420;
    const unsigned long need = tjBufSize((int)dw, (int)dh, samp);
    if (ic->jpeg_cap < need) {
        tjFree(ic->jpeg);
        ic->jpeg = tjAlloc((int)need);
        ic->jpeg_cap = ic->jpeg ? need : 0;
        if (!ic->jpeg) {
            return why(ic, "%s", "out of memory for the JPEG encoder");
        }
    }
    unsigned long size = ic->jpeg_cap;
    if (tjCompress2(ic->enc, pixels, (int)dw, 0, (int)dh, c == 1 ? TJPF_GRAY : TJPF_RGB,
                    &ic->jpeg, &size, samp, ic->quality, TJFLAG_NOREALLOC) != 0) {
        return why(ic, "cannot encode JPEG: %s", tjGetErrorStr2(ic->enc));
    }
    *out = ic->jpeg;
    *out_len = size;
    return 1;
}
