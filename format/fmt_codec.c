/* Sample checksums (XXH3-64) and compression: zstd contexts, per-sample decode with checks,
 * dictionary training. */
#include "format.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>
#include <zdict.h>
#include <zstd.h>
#include <zstd_errors.h>

typedef unsigned long long ull;

uint64_t fmt_checksum(const void *data, size_t len)
{
    static const uint8_t empty[1] = {0};
    return (uint64_t)XXH3_64bits(len ? data : empty, len);
}

struct fmt_decoder {
    ZSTD_DCtx *dctx;
    ZSTD_DDict *ddict;   /* NULL when the index has no dictionary */
    uint32_t chunk_size; /* to name the chunk in messages; 0 if unknown */
    uint32_t n_fields;   /* version 2: the fields' count and types (a field record's) */
    uint8_t types[FMT_MAX_FIELDS];
};

struct fmt_encoder {
    ZSTD_CCtx *cctx;
    ZSTD_CDict *cdict; /* NULL without a dictionary */
    int level;
};

int fmt_decoder_create(const fmt_index *ix, fmt_decoder **out)
{
    *out = NULL;
    fmt_decoder *d = hd_calloc(1, sizeof(*d));
    if (d == NULL) {
        return hd_err(HDMLP_E_NOMEM, "decoder: out of memory");
    }
    d->dctx = ZSTD_createDCtx();
    if (d->dctx == NULL) {
        hd_free(d);
        return hd_err(HDMLP_E_NOMEM, "decoder: cannot create a zstd context");
    }
    if (ix != NULL) {
        d->chunk_size = ix->h.chunk_size;
        d->n_fields = ix->h.major == 2 ? ix->h.n_fields : 0;
        for (uint32_t f = 0; f < d->n_fields; f++) {
            fmt_field fd;
            fmt_index_field(ix, f, &fd);
            d->types[f] = (uint8_t)fd.type;
        }
        if (ix->dict_len > 0) {
            d->ddict = ZSTD_createDDict(ix->dict, (size_t)ix->dict_len);
            if (d->ddict == NULL) {
                fmt_decoder_free(d);
                return hd_err(HDMLP_E_CORRUPT,
                              "index: dict: not a usable zstd dictionary (%llu bytes)",
                              (ull)ix->dict_len);
            }
        }
    }
    *out = d;
    return HDMLP_OK;
}

void fmt_decoder_free(fmt_decoder *d)
{
    if (d == NULL) {
        return;
    }
    ZSTD_freeDDict(d->ddict);
    ZSTD_freeDCtx(d->dctx);
    hd_free(d);
}

/* HDMLP_E_CORRUPT with "sample I (chunk C): " + message. */
static int sample_err(const fmt_decoder *d, uint64_t index, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int sample_err(const fmt_decoder *d, uint64_t index, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (d->chunk_size) {
        return hd_err(HDMLP_E_CORRUPT, "sample %llu (chunk %llu): %s", (ull)index,
                      (ull)(index / d->chunk_size), msg);
    }
    return hd_err(HDMLP_E_CORRUPT, "sample %llu: %s", (ull)index, msg);
}

static int fields_decode(fmt_decoder *d, uint64_t index, const fmt_sample *s,
                         const uint8_t *stored, void *dst, size_t dst_cap);

int fmt_sample_decode(fmt_decoder *d, uint64_t index, const fmt_sample *s,
                      const uint8_t *stored, void *dst, size_t dst_cap)
{
    if (s->codec == FMT_CODEC_FIELDS) {
        return fields_decode(d, index, s, stored, dst, dst_cap);
    }
    if (stored == NULL && s->stored_len != 0) {
        return hd_err(HDMLP_E_INVAL, "sample %llu: NULL stored bytes", (ull)index);
    }
    const uint64_t sum = fmt_checksum(stored, (size_t)s->stored_len);
    if (!fmt_sample_sum_ok(s, sum)) {
        return sample_err(d, index,
                          "checksum mismatch (stored bytes hash to %016llx, the index says "
                          "%016llx)",
                          (ull)sum, (ull)s->checksum);
    }
    if (s->raw_len > dst_cap) {
        return hd_err(HDMLP_E_RANGE, "sample %llu: needs %llu bytes, the buffer holds %zu",
                      (ull)index, (ull)s->raw_len, dst_cap);
    }
    if (dst == NULL && s->raw_len != 0) {
        return hd_err(HDMLP_E_INVAL, "sample %llu: NULL destination", (ull)index);
    }
    const size_t raw_len = (size_t)s->raw_len;
    const size_t stored_len = (size_t)s->stored_len;
    uint8_t dummy;
    void *out = raw_len ? dst : &dummy;
    switch (s->codec) {
    case FMT_CODEC_NONE:
        if (stored_len != raw_len) {
            return sample_err(d, index, "codec 0 with stored_length %zu != raw_length %zu",
                              stored_len, raw_len);
        }
        if (raw_len) {
            memcpy(dst, stored, raw_len);
        }
        return HDMLP_OK;
    case FMT_CODEC_ZSTD:
    case FMT_CODEC_ZSTD_DICT:
        break;
    default:
        return sample_err(d, index, "unknown codec %u", s->codec);
    }
    if (s->codec == FMT_CODEC_ZSTD_DICT && d->ddict == NULL) {
        return sample_err(d, index, "codec 2 but the decoder has no dictionary");
    }
    const void *src = stored_len ? (const void *)stored : (const void *)&dummy;
    const size_t frame = ZSTD_findFrameCompressedSize(src, stored_len);
    if (ZSTD_isError(frame)) {
        return sample_err(d, index, "not a zstd frame: %s", ZSTD_getErrorName(frame));
    }
    if (frame != stored_len) {
        return sample_err(d, index, "zstd frame of %zu bytes, stored_length is %zu", frame,
                          stored_len);
    }
    const unsigned long long content = ZSTD_getFrameContentSize(src, stored_len);
    if (content == ZSTD_CONTENTSIZE_ERROR) {
        return sample_err(d, index, "unreadable zstd frame header");
    }
    if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != raw_len) {
        return sample_err(d, index, "zstd frame content size %llu != raw_length %zu", content,
                          raw_len);
    }
    size_t n;
    if (s->codec == FMT_CODEC_ZSTD_DICT) {
        n = ZSTD_decompress_usingDDict(d->dctx, out, raw_len, src, stored_len, d->ddict);
    } else {
        n = ZSTD_decompress_usingDict(d->dctx, out, raw_len, src, stored_len, NULL, 0);
    }
    if (ZSTD_isError(n)) {
        return sample_err(d, index, "zstd decode failed: %s", ZSTD_getErrorName(n));
    }
    if (n != raw_len) {
        return sample_err(d, index, "decoded %zu bytes, raw_length is %zu", n, raw_len);
    }
    return HDMLP_OK;
}

int fmt_encoder_create(int level, const void *dict, size_t dict_len, fmt_encoder **out)
{
    *out = NULL;
    if (level < 1 || level > ZSTD_maxCLevel()) {
        return hd_err(HDMLP_E_INVAL, "encoder: zstd level %d outside 1..%d", level,
                      ZSTD_maxCLevel());
    }
    if (dict == NULL && dict_len != 0) {
        return hd_err(HDMLP_E_INVAL, "encoder: NULL dictionary");
    }
    fmt_encoder *e = hd_calloc(1, sizeof(*e));
    if (e == NULL) {
        return hd_err(HDMLP_E_NOMEM, "encoder: out of memory");
    }
    e->level = level;
    e->cctx = ZSTD_createCCtx();
    if (e->cctx == NULL) {
        hd_free(e);
        return hd_err(HDMLP_E_NOMEM, "encoder: cannot create a zstd context");
    }
    if (dict_len > 0) {
        e->cdict = ZSTD_createCDict(dict, dict_len, level);
        if (e->cdict == NULL) {
            fmt_encoder_free(e);
            return hd_err(HDMLP_E_INVAL, "encoder: not a usable zstd dictionary (%zu bytes)",
                          dict_len);
        }
    }
    *out = e;
    return HDMLP_OK;
}

void fmt_encoder_free(fmt_encoder *e)
{
    if (e == NULL) {
        return;
    }
    ZSTD_freeCDict(e->cdict);
    ZSTD_freeCCtx(e->cctx);
    hd_free(e);
}

int fmt_encode(fmt_encoder *e, const void *src, size_t len, uint8_t **dst, size_t *dst_cap,
               size_t *out_len, uint32_t *codec)
{
    *out_len = 0;
    if (src == NULL && len != 0) {
        return hd_err(HDMLP_E_INVAL, "encode: NULL source");
    }
    const size_t bound = ZSTD_compressBound(len);
    if (bound == 0 || ZSTD_isError(bound)) {
        return hd_err(HDMLP_E_RANGE, "encode: %zu bytes is too large for one zstd frame", len);
    }
    if (*dst == NULL || *dst_cap < bound) {
        uint8_t *p = hd_realloc(*dst, bound);
        if (p == NULL) {
            return hd_err(HDMLP_E_NOMEM, "encode: cannot allocate %zu bytes", bound);
        }
        *dst = p;
        *dst_cap = bound;
    }
    static const uint8_t empty[1] = {0};
    const void *in = len ? src : (const void *)empty;
    size_t n;
    if (e->cdict != NULL) {
        n = ZSTD_compress_usingCDict(e->cctx, *dst, *dst_cap, in, len, e->cdict);
    } else {
        n = ZSTD_compressCCtx(e->cctx, *dst, *dst_cap, in, len, e->level);
    }
    if (ZSTD_isError(n)) {
        const int code = ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ? HDMLP_E_NOMEM
                                                                              : HDMLP_E_INVAL;
        return hd_err(code, "encode: zstd: %s", ZSTD_getErrorName(n));
    }
    *out_len = n;
    *codec = e->cdict != NULL ? FMT_CODEC_ZSTD_DICT : FMT_CODEC_ZSTD;
    return HDMLP_OK;
}

int fmt_dict_train(const void *samples, const size_t *sizes, unsigned n, void *dict,
                   size_t dict_cap, size_t *dict_len)
{
    *dict_len = 0;
    if (samples == NULL || sizes == NULL || dict == NULL || n == 0) {
        return hd_err(HDMLP_E_INVAL, "dictionary training: no samples or no output buffer");
    }
    const size_t r = ZDICT_trainFromBuffer(dict, dict_cap, samples, sizes, n);
    if (ZDICT_isError(r)) {
        return hd_err(HDMLP_E_INVAL, "dictionary training failed (%u samples): %s", n,
                      ZDICT_getErrorName(r));
    }
    *dict_len = r;
    return HDMLP_OK;
}

/* A sample with fields: its field record (FORMAT.md) at dst, each stored value decoded (and
 * checked) as a sample of its own from its part of the sample's stored bytes. */
static int fields_decode(fmt_decoder *d, uint64_t index, const fmt_sample *s,
                         const uint8_t *stored, void *dst, size_t dst_cap)
{
    const uint32_t nf = s->n_fields;
    if (s->vals == NULL || nf == 0 || nf != d->n_fields) {
        return hd_err(HDMLP_E_INVAL,
                      "sample %llu: a sample with fields needs its %u value records",
                      (ull)index, d->n_fields);
    }
    const uint64_t len = fmt_frec_len(s->vals, nf);
    if (len != s->raw_len || len > dst_cap || dst == NULL) {
        return hd_err(HDMLP_E_RANGE, "sample %llu: its field record needs %llu bytes, %s %zu",
                      (ull)index, (ull)len,
                      len != s->raw_len ? "the record planned" : "the buffer holds",
                      len != s->raw_len ? (size_t)s->raw_len : dst_cap);
    }
    if (fmt_vals_stored(s->vals, nf) != s->stored_len || (stored == NULL && s->stored_len)) {
        return sample_err(d, index, "its values' stored lengths do not add up to %llu",
                          (ull)s->stored_len);
    }
    uint8_t *out = dst;
    memset(out, 0, FMT_FREC_HEAD + (size_t)nf * FMT_FREC_ENTRY);
    fmt_st32(out, FMT_FREC_MAGIC);
    fmt_st32(out + 4, nf);
    uint64_t pos = FMT_FREC_HEAD + (uint64_t)nf * FMT_FREC_ENTRY, from = 0;
    for (uint32_t f = 0; f < nf; f++) {
        const uint8_t *r = s->vals + (size_t)f * FMT_VALUE_REC_LEN;
        uint8_t *e = out + FMT_FREC_HEAD + (size_t)f * FMT_FREC_ENTRY;
        e[12] = r[13];
        e[13] = d->types[f];
        if (r[13] == FMT_VALUE_INLINE) {
            memcpy(e, r, 8);
            fmt_st32(e + 8, 8);
        } else if (r[13] == FMT_VALUE_STORED) {
            const fmt_sample v = {.stored_len = fmt_ld32(r),
                                  .raw_len = fmt_ld32(r + 4),
                                  .checksum = fmt_ld32(r + 8),
                                  .codec = r[12],
                                  .sum32 = 1};
            const int rc =
                fmt_sample_decode(d, index, &v, stored + from, out + pos, (size_t)(len - pos));
            if (rc != HDMLP_OK) {
                return hd_err_wrap(rc, "field %u: ", f);
            }
            fmt_st64(e, pos);
            fmt_st32(e + 8, (uint32_t)v.raw_len);
            const uint64_t padded = (v.raw_len + 7u) & ~7ull;
            memset(out + pos + v.raw_len, 0, (size_t)(padded - v.raw_len));
            pos += padded;
            from += v.stored_len;
        }
    }
    return HDMLP_OK;
}

int fmt_frec_field(const void *rec, uint64_t len, uint32_t f, fmt_frec_value *out)
{
    const uint8_t *r = rec;
    memset(out, 0, sizeof(*out));
    if (r == NULL || len < FMT_FREC_HEAD || fmt_ld32(r) != FMT_FREC_MAGIC) {
        return hd_err(HDMLP_E_INVAL, "not a field record (%llu bytes)", (ull)len);
    }
    const uint32_t nf = fmt_ld32(r + 4);
    if (f >= nf || len < FMT_FREC_HEAD + (uint64_t)nf * FMT_FREC_ENTRY) {
        return hd_err(f >= nf ? HDMLP_E_RANGE : HDMLP_E_INVAL,
                      "field %u of a field record of %u fields (%llu bytes)", f, nf, (ull)len);
    }
    const uint8_t *e = r + FMT_FREC_HEAD + (size_t)f * FMT_FREC_ENTRY;
    out->state = e[12];
    out->type = e[13];
    if (e[12] == FMT_VALUE_INLINE) {
        out->bits = fmt_ld64(e);
        out->data = e;
        out->size = 8;
    } else if (e[12] == FMT_VALUE_STORED) {
        const uint64_t at = fmt_ld64(e), size = fmt_ld32(e + 8);
        if (at > len || size > len - at) {
            return hd_err(HDMLP_E_INVAL, "field %u: %llu bytes at %llu, past the record's %llu",
                          f, (ull)size, (ull)at, (ull)len);
        }
        out->data = r + at;
        out->size = size;
    }
    return HDMLP_OK;
}
