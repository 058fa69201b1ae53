/* Version 2's parts of the index (FORMAT.md): the fields section, the chunk records' tables,
 * key blocks and sizes, and their encoding. The shared layout is fmt_index.c's. */
#include "fmt_index_private.h"

#include <string.h>

#define NAME_MAX_LEN 255u

static const char *const type_name[FMT_FIELD_TYPES] = {
    "bytes", "text", "json", "int64", "float32", "float64", "ndarray", "image"};
static const char *const dtype_name[FMT_DTYPES] = {"",      "uint8",   "int8",    "uint16",
                                                   "int16", "uint32",  "int32",   "uint64",
                                                   "int64", "float16", "float32", "float64"};

const char *fmt_field_type_name(uint32_t type)
{
    return type < FMT_FIELD_TYPES ? type_name[type] : "?";
}

const char *fmt_dtype_name(uint32_t dtype)
{
    return dtype < FMT_DTYPES ? dtype_name[dtype] : "?";
}

void fmt_index2_put_field(uint8_t r[FMT_FIELD_REC_LEN], const fmt_field *f)
{
    memset(r, 0, FMT_FIELD_REC_LEN);
    fmt_st32(r, f->name_off);
    fmt_st32(r + 4, f->name_len);
    r[8] = f->type;
    r[9] = f->dtype;
    r[10] = f->ndim;
    r[11] = f->flags;
    for (unsigned d = 0; d < FMT_MAX_NDIM; d++) {
        fmt_st32(r + 12 + 4 * d, f->shape[d]);
    }
}

static int check_field(const fmt_index *ix, bool strict, uint32_t f, const fmt_field *fd)
{
    if (fd->name_len == 0 || fd->name_len > NAME_MAX_LEN ||
        (uint64_t)fd->name_off + fd->name_len > ix->strings_len) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: field %u: name [%u, +%u) empty, above %u bytes or outside "
                      "strings (%llu bytes)",
                      f, fd->name_off, fd->name_len, NAME_MAX_LEN, (ull)ix->strings_len);
    }
    const int len = (int)fd->name_len;
    const char *name = (const char *)ix->strings + fd->name_off;
    if (fd->type >= FMT_FIELD_TYPES) {
        return hd_err(HDMLP_E_CORRUPT, "index: field %u (%.*s): unknown type %u", f, len, name,
                      fd->type);
    }
    const bool nd = fd->type == FMT_FIELD_NDARRAY;
    bool shape_ok = nd ? fd->ndim <= FMT_MAX_NDIM : fd->ndim == 0;
    for (unsigned d = fd->ndim < FMT_MAX_NDIM ? fd->ndim : FMT_MAX_NDIM; d < FMT_MAX_NDIM;
         d++) {
        shape_ok = shape_ok && fd->shape[d] == 0;
    }
    if (!shape_ok || (nd ? fd->dtype == FMT_DTYPE_NONE || fd->dtype >= FMT_DTYPES
                         : fd->dtype != FMT_DTYPE_NONE)) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: field %u (%.*s, %s): dtype %u, ndim %u or shape not allowed", f,
                      len, name, type_name[fd->type], fd->dtype, fd->ndim);
    }
    const bool label = (fd->flags & FMT_FIELD_LABEL) != 0;
    if (label != (f == ix->h.label_field) || (label && fd->type != FMT_FIELD_INT64)) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: field %u (%.*s, %s): label flag %u, but label_field is %d (the "
                      "label field is one int64 field)",
                      f, len, name, type_name[fd->type], (unsigned)label,
                      ix->h.label_field == FMT_NO_FIELD ? -1 : (int)ix->h.label_field);
    }
    const uint8_t *r = ix->fields + (uint64_t)f * FMT_FIELD_REC_LEN;
    if (strict &&
        ((fd->flags & ~(FMT_FIELD_REQUIRED | FMT_FIELD_LABEL)) != 0 || fmt_ld32(r + 28) != 0)) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: field %u (%.*s): unknown flags 0x%x or reserved "
                      "bytes not zero",
                      f, len, name, fd->flags);
    }
    for (uint32_t g = 0; g < f; g++) {
        fmt_field o;
        fmt_index_field(ix, g, &o);
        if (o.name_len == fd->name_len &&
            memcmp(ix->strings + o.name_off, name, fd->name_len) == 0) {
            return hd_err(HDMLP_E_CORRUPT, "index: fields %u and %u are both named %.*s", g, f,
                          len, name);
        }
    }
    return HDMLP_OK;
}

int fmt_index2_check_fields(const fmt_index *ix, bool strict, uint32_t *data_field)
{
    uint32_t data = FMT_NO_FIELD, stored = 0;
    for (uint32_t f = 0; f < ix->h.n_fields; f++) {
        fmt_field fd;
        fmt_index_field(ix, f, &fd);
        const int rc = check_field(ix, strict, f, &fd);
        if (rc != HDMLP_OK) {
            return rc;
        }
        if (!fmt_field_scalar(fd.type)) {
            data = f;
            stored++;
        }
    }
    *data_field = stored == 1 ? data : FMT_NO_FIELD;
    return HDMLP_OK;
}

void fmt_index2_put_chunk(uint8_t r[FMT_CHUNK_REC2_LEN], const fmt_chunk *ch)
{
    memset(r, 0, FMT_CHUNK_REC2_LEN);
    fmt_st64(r, ch->offset);
    fmt_st64(r + 8, ch->length);
    fmt_st32(r + 16, ch->segment);
    fmt_st32(r + 20, ch->n_samples);
    fmt_st64(r + 24, ch->header_checksum);
    fmt_st64(r + 32, ch->table_offset);
    fmt_st64(r + 40, ch->table_checksum);
    fmt_st64(r + 48, ch->keys_offset);
    fmt_st64(r + 56, ch->keys_length);
    fmt_st64(r + 64, ch->keys_checksum);
    fmt_st64(r + 72, ch->raw_bytes);
    fmt_st64(r + 80, ch->max_raw);
}

int fmt_index2_check_chunk(const fmt_index *ix, bool strict, uint64_t c, fmt_chunk2_sums *sums)
{
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    if (ch.table_offset != sums->table_end) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: chunk %llu: table at %llu, expected %llu (tables lie back to "
                      "back in chunk order)",
                      (ull)c, (ull)ch.table_offset, (ull)sums->table_end);
    }
    if (add_ovf(sums->table_end, fmt_table2_len(ix, &ch), &sums->table_end)) {
        return hd_err(HDMLP_E_CORRUPT, "index: chunk %llu: tables overflow", (ull)c);
    }
    if (ch.keys_offset != sums->keys_end) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: chunk %llu: key block at %llu, expected %llu (key blocks lie in "
                      "chunk order, each at a multiple of 8)",
                      (ull)c, (ull)ch.keys_offset, (ull)sums->keys_end);
    }
    uint64_t end;
    if (ch.keys_length < 4ull * ch.n_samples || add_ovf(ch.keys_offset, ch.keys_length, &end) ||
        align8_ovf(end, &sums->keys_end)) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: chunk %llu: key block of %llu bytes (at least 4 per sample: %u "
                      "samples)",
                      (ull)c, (ull)ch.keys_length, ch.n_samples);
    }
    uint64_t most;
    if (ch.max_raw > ch.raw_bytes || mul_ovf(ch.max_raw, ch.n_samples, &most) ||
        ch.raw_bytes > most) {
        return hd_err(
            HDMLP_E_CORRUPT,
            "index: chunk %llu: raw_bytes %llu and max_raw %llu do not fit %u samples", (ull)c,
            (ull)ch.raw_bytes, (ull)ch.max_raw, ch.n_samples);
    }
    if (add_ovf(sums->raw, ch.raw_bytes, &sums->raw)) {
        return hd_err(HDMLP_E_CORRUPT, "index: chunk %llu: raw bytes overflow", (ull)c);
    }
    if (strict && fmt_ld64(ix->chunks + c * FMT_CHUNK_REC2_LEN + 88) != 0) {
        return hd_err(HDMLP_E_CORRUPT, "index: chunk %llu: reserved bytes not zero", (ull)c);
    }
    return HDMLP_OK;
}

int fmt_index2_check_totals(const fmt_index *ix, const fmt_chunk2_sums *sums)
{
    if (sums->table_end != ix->h.tables_bytes) {
        return hd_err(HDMLP_E_CORRUPT, "index: tables_bytes %llu, the chunks' tables need %llu",
                      (ull)ix->h.tables_bytes, (ull)sums->table_end);
    }
    if (sums->keys_end != ix->h.keys_bytes) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: keys_bytes %llu, the chunks' key blocks end at %llu",
                      (ull)ix->h.keys_bytes, (ull)sums->keys_end);
    }
    return HDMLP_OK;
}
