/* Test images (see testimg.h). */
#include "testimg.h"

#include "packer.h"
#include "support/testds.h"

#include <errno.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>

uint8_t *testimg_pattern(uint32_t w, uint32_t h, uint32_t c, uint64_t seed)
{
    uint8_t *px = malloc((size_t)w * h * c);
    if (px == NULL) {
        return NULL;
    }
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint32_t y = 0; y < h; y++) {
        for (uint32_t i = 0; i < w; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for (uint32_t ch = 0; ch < c; ch++) {
                int v = (int)((i * (97 + 31 * ch) / (w ? w : 1)) +
                              (y * (151 - 40 * ch)) / (h ? h : 1));
                v += ((i / 7 + y / 5 + (uint32_t)seed) % 3 == 0) ? 60 : 0; /* edges */
                v += (int)((x >> (8 * ch)) & 15);                          /* noise */
                px[((size_t)y * w + i) * c + ch] = (uint8_t)(v % 256);
            }
        }
    }
    return px;
}

int testimg_jpeg(const uint8_t *px, uint32_t w, uint32_t h, uint32_t c, int q, uint8_t **out,
                 size_t *len)
{
    tjhandle t = tjInitCompress();
    if (t == NULL) {
        return -1;
    }
    unsigned char *buf = NULL;
    unsigned long n = 0;
    const int rc = tjCompress2(t, px, (int)w, 0, (int)h, c == 1 ? TJPF_GRAY : TJPF_RGB, &buf,
                               &n, c == 1 ? TJSAMP_GRAY : TJSAMP_420, q, 0);
    tjDestroy(t);
    if (rc != 0) {
        tjFree(buf);
        return -1;
    }
    *out = malloc(n);
    if (*out != NULL) {
        memcpy(*out, buf, n);
    }
    *len = n;
    tjFree(buf);
    return *out != NULL ? 0 : -1;
}

int testimg_png(const uint8_t *px, uint32_t w, uint32_t h, uint32_t c, uint8_t **out,
                size_t *len)
{
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    if (ctx == NULL) {
        return -1;
    }
    spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
    struct spng_ihdr ihdr = {
        w, h, 8, c == 1 ? SPNG_COLOR_TYPE_GRAYSCALE : SPNG_COLOR_TYPE_TRUECOLOR, 0, 0, 0};
    int e = spng_set_ihdr(ctx, &ihdr);
    if (e == 0) {
        e = spng_encode_image(ctx, px, (size_t)w * h * c, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    }
    if (e == 0) {
        *out = spng_get_png_buffer(ctx, len, &e);
    }
    spng_ctx_free(ctx);
    return e == 0 && *out != NULL ? 0 : -1;
}

int testimg_ref_jpeg(const uint8_t *buf, size_t len, uint32_t c, uint32_t denom, uint8_t **px,
                     uint32_t *w, uint32_t *h)
{
    tjhandle t = tjInitDecompress();
    int iw = 0, ih = 0, sub = 0, cs = 0;
    int rc = t == NULL || tjDecompressHeader3(t, buf, len, &iw, &ih, &sub, &cs) != 0;
    if (!rc) {
        const tjscalingfactor sf = {1, (int)denom};
        *w = (uint32_t)TJSCALED(iw, sf);
        *h = (uint32_t)TJSCALED(ih, sf);
        *px = malloc((size_t)*w * *h * c);
        rc = *px == NULL ||
             tjDecompress2(t, buf, len, *px, (int)*w, 0, (int)*h, c == 1 ? TJPF_GRAY : TJPF_RGB,
                           TJFLAG_ACCURATEDCT) != 0;
    }
    if (t != NULL) {
        tjDestroy(t);
    }
    return rc ? -1 : 0;
}

int testimg_ref_png(const uint8_t *buf, size_t len, uint8_t **px, uint32_t *w, uint32_t *h)
{
    spng_ctx *ctx = spng_ctx_new(0);
    struct spng_ihdr ihdr;
    size_t n = 0;
    int e = ctx == NULL ? -1 : spng_set_png_buffer(ctx, buf, len);
    if (e == 0) {
        e = spng_get_ihdr(ctx, &ihdr);
    }
    if (e == 0) {
        e = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &n);
    }
    if (e == 0) {
        *px = malloc(n);
        e = *px == NULL ? -1 : spng_decode_image(ctx, *px, n, SPNG_FMT_RGB8, 0);
        *w = ihdr.width;
        *h = ihdr.height;
    }
    spng_ctx_free(ctx);
    return e == 0 ? 0 : -1;
}

int testimg_pack(const char *dir, const char *out, uint32_t n, uint32_t labels, uint32_t w,
                 uint32_t h, int exact, uint32_t k)
{
    char path[1024];
    for (uint32_t l = 0; l < labels; l++) {
        snprintf(path, sizeof(path), "%s/class-%u", dir, l);
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "testimg: mkdir %s: %s\n", path, strerror(errno));
            return -1;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t iw = exact ? w : w + (i * 7) % (w / 2 + 1);
        const uint32_t ih = exact ? h : h + (i * 13) % (h / 2 + 1);
        uint8_t *px = testimg_pattern(iw, ih, 3, i);
        uint8_t *enc = NULL;
        size_t len = 0;
        const int jpeg = i % 2 == 0;
        int rc = px == NULL ? -1
                 : jpeg     ? testimg_jpeg(px, iw, ih, 3, 90, &enc, &len)
                            : testimg_png(px, iw, ih, 3, &enc, &len);
        free(px);
        snprintf(path, sizeof(path), "%s/class-%u/img-%04u.%s", dir, i % labels, i,
                 jpeg ? "jpg" : "png");
        if (rc == 0) {
            rc = testds_write_file(path, enc, len);
        }
        free(enc);
        if (rc != 0) {
            fprintf(stderr, "testimg: cannot write %s\n", path);
            return -1;
        }
    }
    pack_opts o;
    pack_opts_init(&o);
    o.chunk_size = k;
    o.seed = 7;
    o.compress = PACK_COMPRESS_NONE;
    o.force = 1;
    const pack_input in = {PACK_INPUT_PATH, dir};
    if (pack_run(&o, &in, 1, out, NULL) != 0) {
        fprintf(stderr, "testimg: pack_run: %s\n", hdmlp_last_error());
        return -1;
    }
    return 0;
}
