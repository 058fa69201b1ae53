/*
 * Region decoding of JPEG through libjpeg-turbo's libjpeg API: only the rows and the
 * iMCU columns a crop covers go through the IDCT, upsampling and colour conversion
 * (jpeg_skip_scanlines, jpeg_crop_scanline); the rest of the stream is still entropy-decoded
 * (and the last row decoded), so damage anywhere in the file is found as with a full
 * decode. The pixels are those of a full decode (TurboJPEG, accurate DCT, fancy
 * upsampling) at the same places; with fast set, the fast IDCT and plain upsampling are used
 * instead (TJFLAG_FASTDCT | TJFLAG_FASTUPSAMPLE), which PIL does not give.
 */
#include "loader_image.h"

#include "format.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

/* Progressive JPEGs with more scans than this are refused (TurboJPEG's TJFLAG_LIMITSCANS). */
#define MAX_SCANS 500

typedef struct jerr {
    struct jpeg_error_mgr pub;
    struct jpeg_progress_mgr progress;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jerr;

static void on_error(j_common_ptr c)
{
    jerr *e = (jerr *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings (a truncated stream, bad Huffman codes, extra bytes) fail the decode, as
 * TJFLAG_STOPONWARNING does for full decodes; trace messages are ignored. */
static void on_message(j_common_ptr c, int level)
{
    if (level < 0) {
        on_error(c);
    }
}

static void on_progress(j_common_ptr c)
{
    const j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->is_decompressor && d->input_scan_number > MAX_SCANS) {
        jerr *e = (jerr *)c->err;
        snprintf(e->msg, sizeof(e->msg), "more than %d progressive scans", MAX_SCANS);
        longjmp(e->jb, 1);
    }
}

void image_from_cmyk(image_buf *b, uint32_t c_out)
{
    /* Inverted (Adobe) CMYK, as libjpeg returns it: R = C × K / 255, and so on (what PIL's
     * convert("RGB") gives). */
    const size_t n = (size_t)b->w * b->h;
    uint8_t *p = b->px;
    for (size_t i = 0; i < n; i++) {
        const uint32_t k = p[4 * i + 3];
        uint8_t rgb[3];
        for (int j = 0; j < 3; j++) {
            rgb[j] = (uint8_t)((p[4 * i + j] * k + 127) / 255);
        }
        if (c_out == 1) {
            p[i] = image_luma(rgb[0], rgb[1], rgb[2]);
        } else {
            memcpy(p + 3 * i, rgb, 3);
        }
    }
    b->c = c_out;
}

int image_decode_jpeg_region(const uint8_t *data, size_t size, uint32_t c_out, uint32_t denom,
                             uint32_t top, uint32_t left, uint32_t height, uint32_t width,
                             image_buf *out, uint32_t *oy, uint32_t *ox)
{
    uint8_t *buf = NULL;
    size_t cap = 0;
    const int rc = image_decode_jpeg_region_into(data, size, c_out, denom, 0, top, left, height,
                                                 width, &buf, &cap, out, oy, ox);
    if (rc != HDMLP_OK) {
        hd_free(buf);
    }
    out->lent = 0; /* the buffer is the caller's now */
    return rc;
}

int image_decode_jpeg_region_into(const uint8_t *data, size_t size, uint32_t c_out,
                                  uint32_t denom, int fast, uint32_t top, uint32_t left,
                                  uint32_t height, uint32_t width, uint8_t **buf, size_t *cap,
                                  image_buf *out, uint32_t *oy, uint32_t *ox)
{
    struct jpeg_decompress_struct ci;
    jerr e;
    uint8_t *volatile px = NULL;
    memset(out, 0, sizeof(*out));
    memset(&ci, 0, sizeof(ci));
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = on_error;
    e.pub.emit_message = on_message;
    e.msg[0] = '\0';
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&ci);
        return hd_err(HDMLP_E_CORRUPT, "JPEG: %s", e.msg);
    }
    jpeg_create_decompress(&ci);
    e.progress.progress_monitor = on_progress;
    ci.progress = &e.progress;
    jpeg_mem_src(&ci, data, (unsigned long)size);
    jpeg_read_header(&ci, TRUE);
    if (ci.image_width == 0 || ci.image_height == 0 || ci.image_width > IMAGE_MAX_SIDE ||
        ci.image_height > IMAGE_MAX_SIDE ||
        (uint64_t)ci.image_width * ci.image_height > IMAGE_MAX_PIXELS) {
        snprintf(e.msg, sizeof(e.msg), "image of %u x %u pixels is above the limit",
                 (unsigned)ci.image_width, (unsigned)ci.image_height);
        longjmp(e.jb, 1);
    }
    const int cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
    ci.out_color_space = cmyk ? JCS_CMYK : c_out == 1 ? JCS_GRAYSCALE : JCS_RGB;
    ci.scale_num = 1;
    ci.scale_denom = denom;
    ci.dct_method = fast ? JDCT_IFAST : JDCT_ISLOW;
    ci.do_fancy_upsampling = fast ? FALSE : TRUE;
    jpeg_start_decompress(&ci);
    const uint32_t w = ci.output_width, h = ci.output_height;
    if (top >= h || left >= w || height == 0 || width == 0 || height > h - top ||
        width > w - left) {
        snprintf(e.msg, sizeof(e.msg), "region %u x %u at (%u, %u) outside %u x %u", width,
                 height, left, top, w, h);
        longjmp(e.jb, 1);
    }
    /* Cropped at an iMCU boundary, the first and last columns miss the chroma beyond it that
     * fancy upsampling blends in: two columns more on each side keep them out of the
     * region (at the image's own edges a full decode has the same edge). */
    JDIMENSION x0 = left >= 2 ? left - 2 : 0;
    JDIMENSION cw = (left + width + 2 <= w ? left + width + 2 : w) - x0;
    if (cw < w) {
        jpeg_crop_scanline(&ci, &x0, &cw); /* widened to whole iMCU columns */
    } else {
        x0 = 0;
    }
    const uint32_t nc = (uint32_t)ci.output_components;
    const size_t need = (size_t)(height + 1) * cw * nc; /* + a row to read the last one into */
    if (need > *cap) {
        hd_free(*buf);
        *cap = 0;
        *buf = hd_malloc(need);
        if (*buf == NULL) {
            jpeg_destroy_decompress(&ci);
            return hd_err(HDMLP_E_NOMEM, "image: out of memory for %u x %u pixels",
                          (unsigned)cw, height);
        }
        *cap = need;
    }
    px = *buf;
    if (top > 0 && jpeg_skip_scanlines(&ci, top) != top) {
        snprintf(e.msg, sizeof(e.msg), "cannot skip to row %u", top);
        longjmp(e.jb, 1);
    }
    for (uint32_t r = 0; r < height; r++) {
        JSAMPROW row = px + (size_t)r * cw * nc;
        if (jpeg_read_scanlines(&ci, &row, 1) != 1) {
            snprintf(e.msg, sizeof(e.msg), "row %u missing", top + r);
            longjmp(e.jb, 1);
        }
    }
    /* Entropy-decode the rest, so damage there fails too: skipping to the very end would
     * not read it (libjpeg-turbo marks the end reached), so skip to the last row and read
     * that one. */
    if (ci.output_scanline + 1 < h) {
        jpeg_skip_scanlines(&ci, h - 1 - ci.output_scanline);
    }
    if (ci.output_scanline < h) {
        JSAMPROW row = px + (size_t)height * cw * nc;
        if (jpeg_read_scanlines(&ci, &row, 1) != 1) {
            snprintf(e.msg, sizeof(e.msg), "last row missing");
            longjmp(e.jb, 1);
        }
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    out->px = px;
    out->h = height;
    out->w = (uint32_t)cw;
    out->c = nc;
    out->lent = 1;
    if (cmyk) {
        image_from_cmyk(out, c_out);
    }
    *oy = top;
    *ox = (uint32_t)x0;
    return HDMLP_OK;
}
