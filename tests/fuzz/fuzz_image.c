/*
 * libFuzzer target: the image pipeline's decode entry on hostile bytes (loader/image/
 * loader_image_decode.c: JPEG through TurboJPEG, PNG through libspng, raw HDRI arrays), then
 * the augmentation of whatever decoded (loader_image_aug.c: RandomResizedCrop or the
 * validation crop, PIL bilinear resampling, the store in every layout and dtype), with the
 * training crop decoded again as a region (loader_image_jpeg.c).
 *
 * Input: byte 0 selects output channels (bit 0: 1 or 3), DCT scale (bits 1-2: 1/1..1/8), mode
 * (bit 3), layout (bit 4), dtype (bit 5) and flip (bit 6); byte 1 the output side (4..35);
 * the rest is the encoded image. Beyond "no crash, no sanitizer report": a decode succeeds
 * only with the probed size (JPEG: ceil(side / scale)), within the limits, with the asked
 * channels, and a raw array decodes to its own bytes.
 *
 * Built with -DFUZZ_GEN_CORPUS instead of -fsanitize=fuzzer, main() writes the seed corpus
 * (tiny JPEG, PNG and raw images) into the directory given as argv[1].
 */
#include "fmt_rng.h"
#include "format.h"
#include "loader_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_image: invariant violated: %s (last error: %s)\n", what,
                hdmlp_last_error());
        abort();
    }
}

static image_decoder *fx_dec;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) {
        return 0;
    }
    if (fx_dec == NULL) {
        check(image_decoder_create(&fx_dec) == HDMLP_OK, "decoder");
    }
    const uint8_t sel = data[0];
    const uint32_t side = 4 + data[1] % 32;
    const uint8_t *img = data + 2;
    const size_t len = size - 2;
    const uint32_t c = sel & 1 ? 3 : 1;
    const uint32_t denom = 1u << ((sel >> 1) & 3);

    image_kind kind;
    uint32_t h = 0, w = 0;
    const int prc = image_probe(fx_dec, img, len, &kind, &h, &w);
    image_buf b;
    const int rc = image_decode(fx_dec, img, len, c, denom, &b);
    check(rc == HDMLP_OK || rc == HDMLP_E_CORRUPT || rc == HDMLP_E_NOMEM, "decode result");
    if (rc != HDMLP_OK) {
        return 0;
    }
    check(prc == HDMLP_OK, "decoded what the probe refused");
    check(b.c == c, "channels");
    const uint32_t d = kind == IMAGE_JPEG ? denom : 1;
    check(b.h == (h + d - 1) / d && b.w == (w + d - 1) / d, "decoded size");
    check(h <= IMAGE_MAX_SIDE && w <= IMAGE_MAX_SIDE, "size limit");
    if (kind == IMAGE_RAW && c == (uint32_t)img[12]) {
        check(memcmp(b.px, img + 16, (size_t)h * w * c) == 0, "raw bytes");
    }

    /* augment as the pipeline does, into an exactly sized output */
    hdmlp_image_config *ic = NULL;
    check(hdmlp_image_config_create(&ic) == HDMLP_OK, "config");
    hdmlp_image_config_set_size(ic, side, side + 3);
    hdmlp_image_config_set_channels(ic, c);
    hdmlp_image_config_set_mode(ic, sel & 8 ? HDMLP_IMAGE_VAL : HDMLP_IMAGE_TRAIN);
    hdmlp_image_config_set_layout(ic, sel & 16 ? HDMLP_LAYOUT_NCHW : HDMLP_LAYOUT_NHWC);
    hdmlp_image_config_set_dtype(ic, sel & 32 ? HDMLP_DTYPE_FLOAT32 : HDMLP_DTYPE_UINT8);
    double y0 = 0, x0 = 0, bh = h, bw = w;
    uint32_t rh = ic->height, rw = ic->width, top = 0, left = 0;
    if (ic->mode == HDMLP_IMAGE_TRAIN) {
        fmt_rng rng;
        image_rng_seed(&rng, size, sel, data[1]);
        image_crop cr;
        image_crop_train(ic, &rng, h, w, &cr);
        check(cr.top + cr.height <= h && cr.left + cr.width <= w && cr.height && cr.width,
              "crop inside the image");
        y0 = cr.top;
        x0 = cr.left;
        bh = cr.height;
        bw = cr.width;
    } else {
        image_crop_val(ic, h, w, &rh, &rw, &top, &left);
        check(top + ic->height <= rh && left + ic->width <= rw, "centre crop inside");
    }
    /* the training path decodes the crop's region only (JPEG) */
    image_buf_free(&b);
    double box[4] = {y0, x0, bh, bw};
    if (image_decode_box(fx_dec, img, len, kind, h, w, c, denom, ic->mode == HDMLP_IMAGE_TRAIN,
                         box, &b) != HDMLP_OK) {
        hdmlp_image_config_free(ic);
        return 0; /* the region decode may still find damage the probe did not */
    }
    uint8_t *scratch = malloc(image_resize_scratch(&b, ic->height, ic->width));
    uint8_t *px = malloc((size_t)ic->height * ic->width * c);
    void *out = malloc(image_out_bytes(ic));
    check(scratch && px && out, "memory");
    if (image_resize_region(&b, box[0], box[1], box[2], box[3], rh, rw, top, left, px,
                            ic->height, ic->width, 0, scratch) == HDMLP_OK) {
        image_store(ic, px, (sel & 64) != 0, out);
    }
    free(scratch);
    free(px);
    free(out);
    hdmlp_image_config_free(ic);
    image_buf_free(&b);
    return 0;
}

#ifdef FUZZ_GEN_CORPUS
#include <spng.h>
#include <turbojpeg.h>

static void write_seed(const char *dir, const char *name, uint8_t sel, const void *body,
                       size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *const f = fopen(path, "wb");
    const uint8_t head[2] = {sel, 12};
    check(f != NULL && fwrite(head, 1, 2, f) == 2 && fwrite(body, 1, len, f) == len &&
              fclose(f) == 0,
          "write seed");
}

static void pattern(uint8_t *px, uint32_t w, uint32_t h, uint32_t c)
{
    for (uint32_t i = 0; i < w * h * c; i++) {
        px[i] = (uint8_t)(i * 7 + (i / (w * c)) * 13);
    }
}

static void jpeg_seed(const char *dir, const char *name, uint32_t w, uint32_t h, uint32_t c,
                      int samp, int flags, uint8_t sel)
{
    uint8_t px[64 * 64 * 3];
    pattern(px, w, h, c);
    tjhandle t = tjInitCompress();
    unsigned char *buf = NULL;
    unsigned long n = 0;
    check(tjCompress2(t, px, (int)w, 0, (int)h, c == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &n, samp,
                      75, flags) == 0,
          "jpeg encode");
    write_seed(dir, name, sel, buf, n);
    tjFree(buf);
    tjDestroy(t);
}

static void png_seed(const char *dir, const char *name, uint32_t w, uint32_t h, uint8_t type,
                     uint8_t depth, uint32_t bytes_per_px, uint8_t sel)
{
    uint8_t px[32 * 32 * 8];
    pattern(px, w * bytes_per_px, h, 1);
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
    struct spng_ihdr ihdr = {w, h, depth, type, 0, 0, 0};
    check(spng_set_ihdr(ctx, &ihdr) == 0, "png ihdr");
    if (type == SPNG_COLOR_TYPE_INDEXED) {
        struct spng_plte plte = {16, {{0}}};
        for (uint32_t i = 0; i < 16; i++) {
            plte.entries[i] = (struct spng_plte_entry){
                (uint8_t)(i * 16), (uint8_t)(255 - i * 16), (uint8_t)(i * 5), 255};
        }
        check(spng_set_plte(ctx, &plte) == 0, "png plte");
        for (uint32_t i = 0; i < w * h; i++) {
            px[i] &= 15;
        }
    }
    int e = spng_encode_image(ctx, px, (size_t)w * h * bytes_per_px, SPNG_FMT_PNG,
                              SPNG_ENCODE_FINALIZE);
    check(e == 0, "png encode");
    size_t n = 0;
    void *buf = spng_get_png_buffer(ctx, &n, &e);
    write_seed(dir, name, sel, buf, n);
    free(buf);
    spng_ctx_free(ctx);
}

int main(int argc, char **argv)
{
    check(argc == 2, "usage: gen DIR");
    jpeg_seed(argv[1], "jpeg-420", 24, 16, 3, TJSAMP_420, 0, 0x01);
    jpeg_seed(argv[1], "jpeg-444-scaled", 40, 32, 3, TJSAMP_444, 0, 0x05);
    jpeg_seed(argv[1], "jpeg-gray-val", 17, 23, 1, TJSAMP_GRAY, 0, 0x08);
    jpeg_seed(argv[1], "jpeg-progressive", 20, 20, 3, TJSAMP_422, TJFLAG_PROGRESSIVE, 0x31);
    png_seed(argv[1], "png-rgb", 12, 9, SPNG_COLOR_TYPE_TRUECOLOR, 8, 3, 0x01);
    png_seed(argv[1], "png-gray-nchw", 9, 7, SPNG_COLOR_TYPE_GRAYSCALE, 8, 1, 0x10);
    png_seed(argv[1], "png-rgba16-float", 6, 5, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, 16, 8, 0x21);
    png_seed(argv[1], "png-palette-flip", 8, 8, SPNG_COLOR_TYPE_INDEXED, 8, 1, 0x41);
    uint8_t raw[16 + 5 * 4 * 3] = {'H', 'D', 'R', 'I', 4, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0};
    pattern(raw + 16, 5, 4, 3);
    write_seed(argv[1], "raw-rgb", 0x01, raw, sizeof(raw));
    return 0;
}
#endif
