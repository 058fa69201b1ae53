/*
 * The image pipeline's parts below the loader: the image config (loader_image_config.c),
 * decoding JPEG / PNG / raw arrays into RGB or gray pixels (loader_image_decode.c), and
 * the deterministic crop, resize, flip and output conversion (loader_image_aug.c). None of
 * them knows the loader; loader_image_pipe.c runs them on decode threads.
 */
#ifndef HDMLP_LOADER_IMAGE_H
#define HDMLP_LOADER_IMAGE_H

#include "hdmlp.h"

#include <stddef.h>
#include <stdint.h>

struct hdmlp_image_config {
    uint32_t height, width;
    hdmlp_image_mode mode;
    double scale_min, scale_max;
    double ratio_min, ratio_max;
    double crop_fraction;
    double flip; /* < 0: the mode's default */
    hdmlp_image_layout layout;
    hdmlp_image_dtype dtype;
    float mean[3], std[3];
    uint32_t channels;
    uint32_t decode_threads; /* 0 = automatic balance */
    uint32_t prefetch;
    int dct_scaling;
    int fast_decode; /* JPEG: fast IDCT and upsampling (not PIL's pixels) */
    /* output buffers: the user's allocator, or NULL for the library's */
    void *(*alloc)(void *arg, size_t bytes);
    void (*free)(void *arg, void *ptr, size_t bytes);
    void *alloc_arg;
    char field[256]; /* samples with fields: the field to decode; "" = the one image field */
};

/* The flip probability in effect (the mode's default unless set). */
double image_flip_prob(const struct hdmlp_image_config *ic);
/* Bytes of one output image and of one element. */
uint64_t image_out_bytes(const struct hdmlp_image_config *ic);
size_t image_elem_size(const struct hdmlp_image_config *ic);

/* Largest accepted image: per side and in pixels. */
#define IMAGE_MAX_SIDE 32768u
#define IMAGE_MAX_PIXELS (1u << 28)

/* A decoded image: h × w × c bytes (c = 1 or 3), row-major, owned by the caller; or, with
 * lent set, in the decoder's own buffer (image_decode_box), valid until its next decode. */
typedef struct image_buf {
    uint8_t *px;
    uint32_t h, w, c;
    int lent;
} image_buf;

typedef enum image_kind { IMAGE_JPEG = 1, IMAGE_PNG = 2, IMAGE_RAW = 3 } image_kind;

/* A crop of the source image in whole source pixels, and a flip. */
typedef struct image_crop {
    uint32_t top, left, height, width;
    int flip;
} image_crop;

/* Per-thread decoder state (libjpeg-turbo handle); create/free. */
typedef struct image_decoder image_decoder;
int image_decoder_create(image_decoder **out);
void image_decoder_free(image_decoder *d);
/* JPEG decodes through d from now on use the fast IDCT and upsampling (on = 1) or the
 * accurate ones that match PIL (on = 0, the default). */
void image_decoder_set_fast(image_decoder *d, int on);

/* PIL's convert("L"): ITU-R 601-2 luma with its fixed-point rounding. */
static inline uint8_t image_luma(uint8_t r, uint8_t g, uint8_t b)
{
    return (
        uint8_t)(((uint32_t)r * 19595 + (uint32_t)g * 38470 + (uint32_t)b * 7471 + 0x8000) >>
                 16);
}

/* Reads the header of an encoded image: its kind and size. HDMLP_E_CORRUPT (detail: the
 * reason) for anything unrecognised, damaged or too large. */
int image_probe(image_decoder *d, const uint8_t *data, size_t size, image_kind *kind,
                uint32_t *h, uint32_t *w);
/* Decodes into *out (allocated here, channels c_out = 1 or 3). `denom` (1, 2, 4 or 8)
 * asks JPEG decoding for a 1/denom DCT-scaled image (ignored by other kinds): out->h and
 * out->w are then the scaled size, ceil(h / denom). HDMLP_E_CORRUPT on damaged data. */
int image_decode(image_decoder *d, const uint8_t *data, size_t size, uint32_t c_out,
                 uint32_t denom, image_buf *out);
void image_buf_free(image_buf *b);
/* Decodes the image (probed: kind, h × w) for the box {top, left, height, width} of source
 * pixels: a JPEG at 1/denom scale and, with region set, only the box's pixels
 * (image_decode_jpeg_region); box comes back in out's pixel coordinates, ready for
 * image_resize_region. The result equals a full decode's at the box. A JPEG is decoded into
 * the decoder's buffer (out->lent; no allocation once it has grown to the largest image),
 * other kinds into their own. */
int image_decode_box(image_decoder *d, const uint8_t *data, size_t size, image_kind kind,
                     uint32_t h, uint32_t w, uint32_t c_out, uint32_t denom, int region,
                     double box[4], image_buf *out);
/* Converts a 4-channel inverted CMYK image in place to c_out (1 or 3) channels. */
void image_from_cmyk(image_buf *b, uint32_t c_out);
/* Decodes only rows [top, top + height) and columns [left, left + width) of a JPEG's
 * 1/denom-scaled image, each of their pixels as a full decode gives it (out may hold more
 * columns, to whole iMCUs, which may differ at its edges: use only the region); *oy, *ox:
 * where out's first row and column are in the scaled image. The whole stream is still read,
 * so damage anywhere fails (HDMLP_E_CORRUPT). loader_image_jpeg.c. */
int image_decode_jpeg_region(const uint8_t *data, size_t size, uint32_t c_out, uint32_t denom,
                             uint32_t top, uint32_t left, uint32_t height, uint32_t width,
                             image_buf *out, uint32_t *oy, uint32_t *ox);
/* The same into *buf (*cap bytes; grown with hd_malloc when short, the caller frees it):
 * out->lent is set. fast: the fast IDCT and upsampling (image_decoder_set_fast). */
int image_decode_jpeg_region_into(const uint8_t *data, size_t size, uint32_t c_out,
                                  uint32_t denom, int fast, uint32_t top, uint32_t left,
                                  uint32_t height, uint32_t width, uint8_t **buf, size_t *cap,
                                  image_buf *out, uint32_t *oy, uint32_t *ox);

/* torchvision's parameter rules on an h × w image (the RNG is the sample's). */
struct fmt_rng;
void image_crop_train(const struct hdmlp_image_config *ic, struct fmt_rng *rng, uint32_t h,
                      uint32_t w, image_crop *out);
/* Validation: the size rh × rw the whole image is resized to, and the window of it that
 * the centre crop keeps (top, left; the config's height × width). */
void image_crop_val(const struct hdmlp_image_config *ic, uint32_t h, uint32_t w, uint32_t *rh,
                    uint32_t *rw, uint32_t *top, uint32_t *left);
/* Seeds the sample's RNG: (seed, epoch, packed index). */
void image_rng_seed(struct fmt_rng *rng, uint64_t seed, uint64_t epoch, uint64_t index);

/* Resizes the box [x0, x0 + bw) × [y0, y0 + bh) of src (in src pixels; fractional after DCT
 * scaling; the source is cut to the box's whole pixels first, as torchvision crops before
 * resizing) to rh × rw with PIL's antialiased bilinear filter, and writes the window
 * [top, top + dh) × [left, left + dw) of that result into dst (dh × dw × src->c, row-major),
 * mirrored left to right if flip is set. scratch: at least image_resize_scratch(src, dh, dw)
 * bytes. loader_image_resize.c. */
size_t image_resize_scratch(const image_buf *src, uint32_t dh, uint32_t dw);
int image_resize_region(const image_buf *src, double y0, double x0, double bh, double bw,
                        uint32_t rh, uint32_t rw, uint32_t top, uint32_t left, uint8_t *dst,
                        uint32_t dh, uint32_t dw, int flip, uint8_t *scratch);
/* The instruction sets the resampling has loops for, in order: image_resize_region takes
 * the best that both the build and the CPU have (image_resize_isa); all give the same
 * bytes. image_resize_region_isa takes at most `isa` (tests run each one). */
typedef enum image_isa {
    IMAGE_ISA_PLAIN = 0,
    IMAGE_ISA_AVX2 = 1,
    IMAGE_ISA_AVX512 = 2
} image_isa;
image_isa image_resize_isa(void);
int image_resize_region_isa(image_isa isa, const image_buf *src, double y0, double x0,
                            double bh, double bw, uint32_t rh, uint32_t rw, uint32_t top,
                            uint32_t left, uint8_t *dst, uint32_t dh, uint32_t dw, int flip,
                            uint8_t *scratch);
/* Writes an h × w × c uint8 image (c == the config's channels) into out (one image of the
 * batch) in the config's layout and dtype, flipping horizontally if asked. */
void image_store(const struct hdmlp_image_config *ic, const uint8_t *px, int flip, void *out);

/* The split of threads between I/O and decoding (loader_image_split.c). */
typedef struct image_split {
    uint32_t io, decode;         /* threads allowed to run; their sum stays */
    uint32_t io_max, decode_max; /* threads there are */
    int verdict;                 /* the last window's direction, not yet acted on */
} image_split;
/* One window of span_ns: the active decode threads' summed time waiting for data while the
 * queue had room, and the consumer's time waiting on a full queue. Moves at most one thread
 * (at least one of each kind stays): returns -1 (one more I/O thread), +1 (one more decode
 * thread) or 0. */
int image_balance(image_split *s, uint64_t starved_ns, uint64_t full_ns, uint64_t span_ns);

#endif
