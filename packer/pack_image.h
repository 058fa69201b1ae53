/*
 * Pack-time image preparation (hdmlp-pack --image-max-side N --image-quality Q): JPEG and
 * PNG samples whose longer side exceeds N are decoded (JPEG with DCT scaling), shrunk
 * keeping their aspect ratio (area average) and re-encoded as JPEG at quality Q, so that
 * epochs read and decode fewer bytes. Everything else is left as it is.
 *
 * Also the header probe that hdmlp-pack --info uses for its image statistics.
 */
#ifndef HDMLP_PACK_IMAGE_H
#define HDMLP_PACK_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef enum pack_image_type {
    PACK_IMAGE_OTHER = 0, /* not an image this probe knows */
    PACK_IMAGE_JPEG = 1,
    PACK_IMAGE_PNG = 2
} pack_image_type;

typedef struct pack_image_info {
    pack_image_type type;
    uint32_t width, height; /* 0 when the header could not be read */
} pack_image_info;

/* Reads the type and dimensions from the first bytes of a sample (JPEG: the first SOFn
 * marker; PNG: IHDR). Never reads past p + n. Returns the type; width/height are 0 if the
 * header is missing, truncated or malformed (the sample is then not touched). */
pack_image_type pack_image_probe(const uint8_t *p, size_t n, pack_image_info *info);

#define PACK_IMAGE_DEFAULT_QUALITY 90
/* A decoded image larger than this is not re-encoded (a warning says so). */
#define PACK_IMAGE_MAX_PIXELS (1ull << 26)

/* One worker thread's decoder/encoder state and scratch buffers. */
typedef struct pack_image_ctx pack_image_ctx;

/* Counts of what preparation did, per worker; summed by the writer. */
typedef struct pack_image_totals {
    uint64_t resized;   /* images re-encoded */
    uint64_t bytes_in;  /* their bytes before */
    uint64_t bytes_out; /* and after */
    uint64_t kept;      /* images over the limit kept as they were (corrupt, unsupported) */
} pack_image_totals;

int pack_image_ctx_create(uint32_t max_side, int quality, pack_image_ctx **out);
void pack_image_ctx_free(pack_image_ctx *ic);

/* Prepares one sample. Returns 1 and sets *out and *out_len (owned by ic, valid until the next
 * call) when the sample was re-encoded; 0 when it stays as it is (not an image, or not
 * larger than max_side); -1 when it is an image over the limit that cannot be decoded or
 * encoded (why in ic's message, pack_image_why()); it then stays as it is too. Thread-safe
 * for distinct contexts. */
int pack_image_prepare(pack_image_ctx *ic, const uint8_t *in, size_t n, const uint8_t **out,
                       size_t *out_len);
const char *pack_image_why(const pack_image_ctx *ic);

#endif /* HDMLP_PACK_IMAGE_H */
