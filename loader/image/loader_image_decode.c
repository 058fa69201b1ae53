/*
 * Decoding encoded images into 8-bit RGB or gray pixels: JPEG through libjpeg-turbo's
 * TurboJPEG API (optionally DCT-scaled), PNG through libspng, and the raw "HDRI" arrays
 * that hdmlp.h defines. Every input is untrusted: sizes are checked before any allocation
 * and every failure is HDMLP_E_CORRUPT with the reason (the caller names the sample).
 */
#include "loader_image.h"

#include "format.h"

#include <math.h>
#include <spng.h>
#include <string.h>
#include <turbojpeg.h>

struct image_decoder {
    tjhandle tj;
    uint8_t *buf; /* the pixels image_decode_box lends out */
    size_t cap;
    int fast; /* TJFLAG_FASTDCT | TJFLAG_FASTUPSAMPLE instead of TJFLAG_ACCURATEDCT */
};

int image_decoder_create(image_decoder **out)
{
    *out = NULL;
    image_decoder *d = hd_calloc(1, sizeof(*d));
    if (d == NULL) {
        return hd_err(HDMLP_E_NOMEM, "image: out of memory for a decoder");
    }
    d->tj = tjInitDecompress();
    if (d->tj == NULL) {
        hd_free(d);
        return hd_err(HDMLP_E_NOMEM, "image: cannot create a JPEG decoder (%s)",
                      tjGetErrorStr2(NULL));
    }
    *out = d;
    return HDMLP_OK;
}

void image_decoder_free(image_decoder *d)
{
    if (d != NULL) {
        tjDestroy(d->tj);
        hd_free(d->buf);
        hd_free(d);
    }
}

void image_decoder_set_fast(image_decoder *d, int on) { d->fast = on != 0; }

void image_buf_free(image_buf *b)
{
    if (!b->lent) {
        hd_free(b->px);
    }
    b->px = NULL;
}

#define RAW_HEADER 16

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int check_size(uint32_t h, uint32_t w)
{
    if (h == 0 || w == 0) {
        return hd_err(HDMLP_E_CORRUPT, "image has no pixels (%u x %u)", w, h);
    }
    if (h > IMAGE_MAX_SIDE || w > IMAGE_MAX_SIDE || (uint64_t)h * w > IMAGE_MAX_PIXELS) {
        return hd_err(HDMLP_E_CORRUPT, "image of %u x %u pixels is above the limit", w, h);
    }
    return HDMLP_OK;
}

static int is_png(const uint8_t *data, size_t size)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    return size >= 8 && memcmp(data, sig, 8) == 0;
}

/* A PNG context reading from the buffer with limits; NULL on failure (detail set). */
static spng_ctx *png_open(const uint8_t *data, size_t size, struct spng_ihdr *ihdr)
{
    spng_ctx *ctx = spng_ctx_new(0);
    if (ctx == NULL) {
        hd_err(HDMLP_E_NOMEM, "image: out of memory for a PNG decoder");
        return NULL;
    }
    int e = spng_set_image_limits(ctx, IMAGE_MAX_SIDE, IMAGE_MAX_SIDE);
    if (e == 0) {
        e = spng_set_chunk_limits(ctx, 1u << 24, 1u << 26);
    }
    if (e == 0) {
        e = spng_set_png_buffer(ctx, data, size);
    }
    if (e == 0) {
        e = spng_get_ihdr(ctx, ihdr);
    }
    if (e != 0) {
        hd_err(HDMLP_E_CORRUPT, "PNG: %s", spng_strerror(e));
        spng_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

int image_probe(image_decoder *d, const uint8_t *data, size_t size, image_kind *kind,
                uint32_t *h, uint32_t *w)
{
    if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
        int iw = 0, ih = 0, sub = 0, cs = 0;
        if (size > (size_t)0xFFFFFFFFu ||
            tjDecompressHeader3(d->tj, data, (unsigned long)size, &iw, &ih, &sub, &cs) != 0) {
            return hd_err(HDMLP_E_CORRUPT, "JPEG header: %s", tjGetErrorStr2(d->tj));
        }
        *kind = IMAGE_JPEG;
        *w = (uint32_t)iw;
        *h = (uint32_t)ih;
        return check_size(*h, *w);
    }
    if (is_png(data, size)) {
        struct spng_ihdr ihdr;
        spng_ctx *ctx = png_open(data, size, &ihdr);
        if (ctx == NULL) {
            return HDMLP_E_CORRUPT;
        }
        spng_ctx_free(ctx);
        *kind = IMAGE_PNG;
        *w = ihdr.width;
        *h = ihdr.height;
        return check_size(*h, *w);
    }
    if (size >= RAW_HEADER && memcmp(data, "HDRI", 4) == 0) {
        *kind = IMAGE_RAW;
        *h = ld32(data + 4);
        *w = ld32(data + 8);
        const uint32_t c = ld32(data + 12);
        int rc = check_size(*h, *w);
        if (rc != HDMLP_OK) {
            return rc;
        }
        if (c != 1 && c != 3) {
            return hd_err(HDMLP_E_CORRUPT, "raw image: %u channels (1 or 3 expected)", c);
        }
        const uint64_t need = (uint64_t)*h * *w * c + RAW_HEADER;
        if (need != size) {
            return hd_err(HDMLP_E_CORRUPT, "raw image: %zu bytes where %u x %u x %u needs %llu",
                          size, *w, *h, c, (unsigned long long)need);
        }
        return HDMLP_OK;
    }
    return hd_err(HDMLP_E_CORRUPT, "not a JPEG, PNG or raw image (first bytes %02x %02x %02x)",
                  size > 0 ? data[0] : 0, size > 1 ? data[1] : 0, size > 2 ? data[2] : 0);
}

/* Converts n pixels of c_in channels at src into c_out channels at dst (may alias when
 * c_out <= c_in, converting front to back). */
static void convert(const uint8_t *src, uint32_t c_in, uint8_t *dst, uint32_t c_out, size_t n)
{
    if (c_in == c_out) {
        if (src != dst) {
            memmove(dst, src, n * c_in);
        }
    } else if (c_in == 3 && c_out == 1) {
        for (size_t i = 0; i < n; i++) {
            dst[i] = image_luma(src[3 * i], src[3 * i + 1], src[3 * i + 2]);
        }
    } else { /* 1 -> 3, back to front so src and dst may share a buffer */
        for (size_t i = n; i-- > 0;) {
            const uint8_t v = src[i];
            dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = v;
        }
    }
}

static int alloc_px(image_buf *out, uint32_t h, uint32_t w, uint32_t c)
{
    out->h = h;
    out->w = w;
    out->c = c;
    out->px = hd_malloc((size_t)h * w * c);
    if (out->px == NULL) {
        return hd_err(HDMLP_E_NOMEM, "image: out of memory for %u x %u x %u pixels", w, h, c);
    }
    return HDMLP_OK;
}

/* Decodes a JPEG into its own buffer, or with lend into the decoder's (out->lent). */
static int decode_jpeg(image_decoder *d, const uint8_t *data, size_t size, uint32_t c_out,
                       uint32_t denom, int lend, image_buf *out)
{
    int iw = 0, ih = 0, sub = 0, cs = 0;
    if (tjDecompressHeader3(d->tj, data, (unsigned long)size, &iw, &ih, &sub, &cs) != 0) {
        return hd_err(HDMLP_E_CORRUPT, "JPEG header: %s", tjGetErrorStr2(d->tj));
    }
    int rc = check_size((uint32_t)ih, (uint32_t)iw);
    if (rc != HDMLP_OK) {
        return rc;
    }
    const tjscalingfactor sf = {1, (int)denom};
    const int sw = TJSCALED(iw, sf), sh = TJSCALED(ih, sf);
    const int cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    const uint32_t c_dec = cmyk ? 4 : c_out;
    if (lend) {
        const size_t need = (size_t)sh * (size_t)sw * c_dec;
        if (need > d->cap) {
            hd_free(d->buf);
            d->cap = 0;
            d->buf = hd_malloc(need);
            if (d->buf == NULL) {
                return hd_err(HDMLP_E_NOMEM, "image: out of memory for %d x %d x %u pixels", sw,
                              sh, c_dec);
            }
            d->cap = need;
        }
        *out = (image_buf){d->buf, (uint32_t)sh, (uint32_t)sw, c_dec, 1};
    } else {
        rc = alloc_px(out, (uint32_t)sh, (uint32_t)sw, c_dec);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    const int pf = cmyk ? TJPF_CMYK : (c_out == 1 ? TJPF_GRAY : TJPF_RGB);
    /* Warnings (a truncated stream filled with grey, extra bytes) fail too: a sample is
     * delivered only as its file describes it. */
    const int flags = (d->fast ? TJFLAG_FASTDCT | TJFLAG_FASTUPSAMPLE : TJFLAG_ACCURATEDCT) |
                      TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;
    if (tjDecompress2(d->tj, data, (unsigned long)size, out->px, sw, 0, sh, pf, flags) != 0) {
        const int e = tjGetErrorCode(d->tj);
        image_buf_free(out);
        return hd_err(HDMLP_E_CORRUPT, "JPEG%s: %s", e == TJERR_WARNING ? " (damaged)" : "",
                      tjGetErrorStr2(d->tj));
    }
    if (cmyk) {
        image_from_cmyk(out, c_out);
    }
    return HDMLP_OK;
}

static int decode_png(const uint8_t *data, size_t size, uint32_t c_out, image_buf *out)
{
    struct spng_ihdr ihdr;
    spng_ctx *ctx = png_open(data, size, &ihdr);
    if (ctx == NULL) {
        return HDMLP_E_CORRUPT;
    }
    int rc = check_size(ihdr.height, ihdr.width);
    size_t need = 0;
    if (rc == HDMLP_OK) {
        const int e = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &need);
        if (e != 0 || need != (size_t)ihdr.height * ihdr.width * 3) {
            rc = hd_err(HDMLP_E_CORRUPT, "PNG: %s", e ? spng_strerror(e) : "odd image size");
        }
    }
    if (rc == HDMLP_OK) {
        rc = alloc_px(out, ihdr.height, ihdr.width, 3);
    }
    if (rc == HDMLP_OK) {
        const int e = spng_decode_image(ctx, out->px, need, SPNG_FMT_RGB8, 0);
        if (e != 0) {
            image_buf_free(out);
            rc = hd_err(HDMLP_E_CORRUPT, "PNG: %s", spng_strerror(e));
        }
    }
    spng_ctx_free(ctx);
    if (rc == HDMLP_OK && c_out == 1) {
        convert(out->px, 3, out->px, 1, (size_t)out->h * out->w);
        out->c = 1;
    }
    return rc;
}

int image_decode(image_decoder *d, const uint8_t *data, size_t size, uint32_t c_out,
                 uint32_t denom, image_buf *out)
{
    memset(out, 0, sizeof(*out));
    image_kind kind;
    uint32_t h = 0, w = 0;
    int rc = image_probe(d, data, size, &kind, &h, &w);
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (kind == IMAGE_JPEG) {
        return decode_jpeg(d, data, size, c_out, denom, 0, out);
    }
    if (kind == IMAGE_PNG) {
        return decode_png(data, size, c_out, out);
    }
    const uint32_t c = ld32(data + 12);
    rc = alloc_px(out, h, w, c_out);
    if (rc == HDMLP_OK) {
        convert(data + RAW_HEADER, c, out->px, c_out, (size_t)h * w);
    }
    return rc;
}

int image_decode_box(image_decoder *d, const uint8_t *data, size_t size, image_kind kind,
                     uint32_t h, uint32_t w, uint32_t c_out, uint32_t denom, int region,
                     double box[4], image_buf *out)
{
    if (kind != IMAGE_JPEG) {
        denom = 1;
    }
    /* the decoded (DCT-scaled) image's size: ceil(side / denom), as libjpeg computes it */
    const uint32_t sh = (h + denom - 1) / denom, sw = (w + denom - 1) / denom;
    const double sy = (double)sh / h, sx = (double)sw / w;
    double y0 = box[0] * sy, x0 = box[1] * sx;
    const double bh = box[2] * sy, bw = box[3] * sx;
    int rc;
    if (kind == IMAGE_JPEG && region) {
        /* the box's whole pixels, as the resampling cuts them */
        const uint32_t top = (uint32_t)floor(y0), left = (uint32_t)floor(x0);
        const double b = ceil(y0 + bh), r = ceil(x0 + bw);
        const uint32_t bottom = b >= sh ? sh : (uint32_t)b, right = r >= sw ? sw : (uint32_t)r;
        uint32_t oy = 0, ox = 0;
        rc = image_decode_jpeg_region_into(data, size, c_out, denom, d->fast, top, left,
                                           bottom - top, right - left, &d->buf, &d->cap, out,
                                           &oy, &ox);
        y0 -= oy;
        x0 -= ox;
    } else if (kind == IMAGE_JPEG) {
        memset(out, 0, sizeof(*out));
        rc = decode_jpeg(d, data, size, c_out, denom, 1, out);
    } else {
        rc = image_decode(d, data, size, c_out, denom, out);
    }
    box[0] = y0;
    box[1] = x0;
    box[2] = bh;
    box[3] = bw;
    return rc;
}
