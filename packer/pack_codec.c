/* Compression decisions: recognising already-compressed media, training the dictionary. */
#include "pack_internal.h"

#include <string.h>

/* An MPEG audio / ADTS frame header (needs 3 bytes): sync, valid version, layer, bitrate
 * and sampling rate, so that runs of 0xff are not taken for audio. */
static int is_mpeg_audio(const uint8_t *p)
{
    if (p[0] != 0xff || (p[1] & 0xe0) != 0xe0) {
        return 0;
    }
    const unsigned version = (p[1] >> 3) & 3u, layer = (p[1] >> 1) & 3u;
    const unsigned rate = p[2] >> 4, freq = (p[2] >> 2) & 3u;
    if (version == 1) {
        return 0;
    }
    if (layer == 0) { /* ADTS (AAC) */
        return ((p[2] >> 2) & 0xfu) < 13;
    }
    return rate != 15 && freq != 3;
}

typedef struct magic {
    uint8_t at;
    uint8_t len;
    const char *bytes;
} magic;

static const magic media[] = {
    {0, 3, "\xff\xd8\xff"},       /* JPEG */
    {0, 8, "\x89PNG\r\n\x1a\n"},  /* PNG */
    {0, 6, "GIF87a"},             /* GIF */
    {0, 6, "GIF89a"},             /* GIF */
    {8, 4, "WEBP"},               /* WebP (RIFF container) */
    {8, 4, "AVI "},               /* AVI (RIFF container) */
    {0, 2, "\x1f\x8b"},           /* gzip */
    {0, 4, "\x28\xb5\x2f\xfd"},   /* zstd */
    {0, 4, "PK\x03\x04"},         /* zip, npz, docx, jar */
    {0, 4, "PK\x05\x06"},         /* empty zip */
    {0, 4, "PK\x07\x08"},         /* spanned zip */
    {0, 6, "\3757zXZ\0"},         /* xz */
    {0, 3, "BZh"},                /* bzip2 */
    {0, 6, "7z\xbc\xaf\x27\x1c"}, /* 7z */
    {0, 4, "\x04\x22\x4d\x18"},   /* lz4 */
    {0, 6, "Rar!\x1a\x07"},       /* rar */
    {4, 4, "ftyp"},               /* mp4, mov, heic, avif, 3gp */
    {0, 4, "\x1a\x45\xdf\xa3"},   /* webm, mkv */
    {0, 4, "OggS"},               /* ogg */
    {0, 4, "fLaC"},               /* flac */
    {0, 3, "ID3"},                /* mp3 with a tag */
    {0, 8, "\0\0\0\x0cjP  "},     /* jpeg 2000 */
    {0, 4, "\xff\x4f\xff\x51"},   /* jpeg 2000 codestream */
    {0, 2, "\xff\x0a"},           /* jpeg xl codestream */
    {0, 8, "\0\0\0\x0cJXL "},     /* jpeg xl container */
};

int pack_is_compressed_media(const uint8_t *p, size_t n)
{
    if (n < 4) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(media) / sizeof(media[0]); i++) {
        const magic *const m = &media[i];
        if (n >= (size_t)m->at + m->len && memcmp(p + m->at, m->bytes, m->len) == 0) {
            if (m->at == 8 && memcmp(p, "RIFF", 4) != 0) {
                continue;
            }
            return 1;
        }
    }
    return is_mpeg_audio(p);
}

#define DICT_MAX_SAMPLES 1000u
#define DICT_MAX_BYTES (8u << 20)
#define DICT_SAMPLE_PREFIX (128u << 10) /* bytes taken from each sample at most */
#define DICT_CAP (110u << 10)
#define DICT_MIN_SAMPLES 8u

int pack_train_dict(pack_ctx *ctx, uint8_t **dict, size_t *dict_len)
{
    *dict = NULL;
    *dict_len = 0;
    uint8_t *const buf = hd_malloc(DICT_MAX_BYTES);
    size_t *const sizes = hd_malloc(DICT_MAX_SAMPLES * sizeof(size_t));
    uint8_t *const out = hd_malloc(DICT_CAP);
    if (!buf || !sizes || !out) {
        hd_free(buf);
        hd_free(sizes);
        hd_free(out);
        return hd_err(HDMLP_E_NOMEM, "out of memory training the dictionary");
    }
    pack_reader r;
    pack_reader_init(&r, ctx);
    pack_packed_reader pr;
    pack_packed_reader_init(&pr, ctx);
    unsigned n = 0;
    size_t used = 0;
    int rc = HDMLP_OK;
    for (uint64_t i = 0; i < ctx->n_items && n < DICT_MAX_SAMPLES && used < DICT_MAX_BYTES;
         i++) {
        pack_item item;
        const uint8_t *key = NULL;
        rc = pack_packed_at(&pr, i, &item, &key);
        if (rc != HDMLP_OK) {
            break;
        }
        const pack_item *const it = &item;
        uint64_t len = it->size < DICT_SAMPLE_PREFIX ? it->size : DICT_SAMPLE_PREFIX;
        if (len > DICT_MAX_BYTES - used) {
            len = DICT_MAX_BYTES - used;
        }
        if (len < 8) {
            continue;
        }
        rc = pack_read_item(&r, it, key, buf + used, len);
        if (rc != HDMLP_OK) {
            break;
        }
        if (ctx->o->compress == PACK_COMPRESS_AUTO &&
            pack_is_compressed_media(buf + used, len)) {
            continue;
        }
        sizes[n++] = (size_t)len;
        used += (size_t)len;
        pack_report(ctx->o, PACK_PHASE_DICT, n, 0, used, 0);
        if (pack_cancelled(ctx->o)) {
            rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
            break;
        }
    }
    pack_reader_free(&r);
    pack_packed_reader_free(&pr);
    if (rc == HDMLP_OK && n < DICT_MIN_SAMPLES) {
        pack_warn(ctx->o,
                  "too few compressible samples (%u) to train a dictionary; "
                  "packing without one",
                  n);
    } else if (rc == HDMLP_OK) {
        size_t len = 0;
        if (fmt_dict_train(buf, sizes, n, out, DICT_CAP, &len) == HDMLP_OK && len > 0) {
            *dict = out;
            *dict_len = len;
        } else {
            pack_warn(ctx->o, "dictionary training failed (%s); packing without one",
                      hdmlp_last_error());
        }
    }
    hd_free(buf);
    hd_free(sizes);
    if (!*dict) {
        hd_free(out);
    }
    return rc;
}
