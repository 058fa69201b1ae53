/* Version 2's sample tables and key blocks (FORMAT.md): a chunk's value records checked
 * against its fields and chunk record, and expanded into the sample records the loader
 * reads through fmt_table; key blocks checked and read in place. */
#include "fmt_index_private.h"

#include <stdlib.h>
#include <string.h>

void fmt_value_decode(const uint8_t r[FMT_VALUE_REC_LEN], fmt_value *out)
{
    memset(out, 0, sizeof(*out));
    out->state = r[13];
    out->codec = r[12];
    out->checksum = fmt_ld32(r + 8);
    if (out->state == FMT_VALUE_INLINE) {
        out->inline_bits = fmt_ld64(r);
    } else {
        out->stored_len = fmt_ld32(r);
        out->raw_len = fmt_ld32(r + 4);
    }
}

void fmt_value_encode(uint8_t r[FMT_VALUE_REC_LEN], const fmt_value *v)
{
    memset(r, 0, FMT_VALUE_REC_LEN);
    if (v->state == FMT_VALUE_INLINE) {
        fmt_st64(r, v->inline_bits);
    } else if (v->state == FMT_VALUE_STORED) {
        fmt_st32(r, (uint32_t)v->stored_len);
        fmt_st32(r + 4, (uint32_t)v->raw_len);
    }
    fmt_st32(r + 8, v->checksum);
    r[12] = v->codec;
    r[13] = v->state;
}

fmt_value fmt_value_int64(int64_t v)
{
    uint8_t bits[8];
    fmt_st64(bits, (uint64_t)v);
    return (fmt_value){.inline_bits = (uint64_t)v,
                       .checksum = (uint32_t)(fmt_checksum(bits, 8) & UINT32_MAX),
                       .state = FMT_VALUE_INLINE};
}

size_t fmt_table2_scratch(const fmt_index *ix)
{
    const uint64_t k = ix->h.chunk_size;
    return (size_t)(k * ix->h.n_fields * FMT_VALUE_REC_LEN + k * sizeof(uint64_t));
}

/* Checks value record v of sample i, field f (fd). */
static int check_value(const fmt_index *ix, uint64_t c, uint64_t i, uint32_t f,
                       const fmt_field *fd, const uint8_t *r, const fmt_value *v)
{
    const char *why = NULL;
    const bool scalar = fmt_field_scalar(fd->type);
    if (fmt_ld16(r + 14) != 0 || v->state > FMT_VALUE_INLINE) {
        why = "unknown state or reserved bytes not zero";
    } else if (v->state == FMT_VALUE_ABSENT) {
        if (fd->flags & FMT_FIELD_REQUIRED) {
            why = "absent from a required field";
        } else if (!fmt_all_zero(r, 13)) {
            why = "absent, with non-zero bytes";
        }
    } else if (v->state == FMT_VALUE_INLINE) {
        uint8_t bits[8];
        fmt_st64(bits, v->inline_bits);
        if (!scalar) {
            why = "inline value in a field that is not a scalar";
        } else if (v->codec != 0) {
            why = "inline value with a codec";
        } else if ((fmt_checksum(bits, 8) & UINT32_MAX) != v->checksum) {
            why = "inline value's checksum mismatch";
        } else if (fd->type == FMT_FIELD_FLOAT32 && (v->inline_bits >> 32) != 0) {
            why = "float32 value with non-zero bytes 4..7";
        } else if (f == ix->h.label_field && v->inline_bits >= ix->h.n_labels) {
            why = "label not below n_labels";
        }
    } else if (scalar) {
        why = "stored bytes in a scalar field";
    } else if (v->codec > FMT_CODEC_ZSTD_DICT) {
        why = "unknown codec";
    } else if (v->codec == FMT_CODEC_ZSTD_DICT && ix->dict_len == 0) {
        why = "codec 2 but the index has no dictionary";
    } else if (v->codec == FMT_CODEC_NONE && v->stored_len != v->raw_len) {
        why = "codec 0 with stored_length != raw_length";
    }
    if (why != NULL) {
        return hd_err(HDMLP_E_CORRUPT,
                      "sample table of chunk %llu: sample %llu, field %u (%.*s): %s", (ull)c,
                      (ull)i, f, (int)fd->name_len, (const char *)ix->strings + fd->name_off,
                      why);
    }
    return HDMLP_OK;
}

void fmt_table2_view_of(const fmt_index *ix, uint64_t c, const uint8_t *raw,
                        const uint64_t *off, fmt_table *out)
{
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    const uint32_t nf = ix->h.n_fields;
    *out = (fmt_table){.rec = NULL,
                       .chunk = c,
                       .first = c * ix->h.chunk_size,
                       .n = ch.n_samples,
                       .val = raw,
                       .off = off,
                       .stride = nf * FMT_VALUE_REC_LEN,
                       .data_at = ix->data_field * FMT_VALUE_REC_LEN,
                       .label_at = ix->h.label_field == FMT_NO_FIELD
                                       ? UINT32_MAX
                                       : ix->h.label_field * FMT_VALUE_REC_LEN,
                       .fields = ix->fielded ? nf : 0,
                       .max_raw = ix->fielded ? fmt_frec_bound(ch.max_raw, nf) : ch.max_raw};
}

int fmt_table2_view(const fmt_index *ix, uint64_t c, const uint8_t *raw, uint64_t *off,
                    int checked, fmt_table *out)
{
    if (c >= ix->h.n_chunks) {
        return hd_err(HDMLP_E_RANGE, "sample table of chunk %llu: out of range (%llu chunks)",
                      (ull)c, (ull)ix->h.n_chunks);
    }
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    const uint32_t nf = ix->h.n_fields;
    const uint64_t first = c * ix->h.chunk_size;
    if (!checked) {
        const uint64_t sum = fmt_checksum(raw, (size_t)fmt_table2_len(ix, &ch));
        if (sum != ch.table_checksum) {
            return hd_err(HDMLP_E_CORRUPT,
                          "sample table of chunk %llu: checksum mismatch (read %016llx, the "
                          "index says %016llx)",
                          (ull)c, (ull)sum, (ull)ch.table_checksum);
        }
        fmt_field fd[FMT_MAX_FIELDS];
        for (uint32_t f = 0; f < nf; f++) {
            fmt_index_field(ix, f, &fd[f]);
        }
        const uint8_t *r = raw;
        for (uint32_t t = 0; t < ch.n_samples; t++) {
            for (uint32_t f = 0; f < nf; f++, r += FMT_VALUE_REC_LEN) {
                fmt_value v;
                fmt_value_decode(r, &v);
                const int rc = check_value(ix, c, first + t, f, &fd[f], r, &v);
                if (rc != HDMLP_OK) {
                    return rc;
                }
            }
        }
    }
    /* The offsets, and the sizes the chunk record states, every time: what bounds every
     * sample's range inside its chunk. The data field is the one field whose values can be
     * stored (fmt_index2: data_field); the others are scalars, inline or absent (checked
     * above the first time), so only its records are summed: one load, no branch, a
     * sample. An absent value's length bytes are 0. */
    uint64_t pos = FMT_CHUNK_HEADER_LEN, raw_sum = 0, max_raw = 0;
    const uint32_t stride = nf * FMT_VALUE_REC_LEN;
    if (ix->fielded) { /* every field's values may be stored */
        const uint8_t *r = raw;
        for (uint32_t t = 0; t < ch.n_samples; t++) {
            off[t] = pos;
            uint64_t sample_raw = 0;
            for (uint32_t f = 0; f < nf; f++, r += FMT_VALUE_REC_LEN) {
                const uint64_t stored = r[13] == FMT_VALUE_STORED;
                pos += stored * fmt_ld32(r);
                sample_raw += stored * fmt_ld32(r + 4);
            }
            raw_sum += sample_raw;
            max_raw = sample_raw > max_raw ? sample_raw : max_raw;
        }
    }
    const uint8_t *r = raw + (size_t)ix->data_field * FMT_VALUE_REC_LEN;
    for (uint32_t t = 0; !ix->fielded && t < ch.n_samples; t++, r += stride) {
        const uint64_t stored = r[13] == FMT_VALUE_STORED;
        off[t] = pos;
        pos += stored * fmt_ld32(r);
        const uint64_t sample_raw = stored * fmt_ld32(r + 4);
        raw_sum += sample_raw;
        max_raw = sample_raw > max_raw ? sample_raw : max_raw;
    }
    if (pos != ch.length || raw_sum != ch.raw_bytes || max_raw != ch.max_raw) {
        return hd_err(HDMLP_E_CORRUPT,
                      "sample table of chunk %llu: its values give length %llu, raw %llu, "
                      "largest %llu; the chunk record says %llu, %llu, %llu",
                      (ull)c, (ull)pos, (ull)raw_sum, (ull)max_raw, (ull)ch.length,
                      (ull)ch.raw_bytes, (ull)ch.max_raw);
    }
    fmt_table2_view_of(ix, c, raw, off, out);
    return HDMLP_OK;
}

/* The sample record of a sample at `offset` in its chunk whose data value record is v and
 * label value record l (NULL without a label field). */
static void encode_record(const uint8_t *v, const uint8_t *l, uint64_t offset, uint8_t *out)
{
    memset(out, 0, FMT_SAMPLE_REC_LEN);
    const int stored = v[13] == FMT_VALUE_STORED;
    fmt_st64(out, offset);
    fmt_st64(out + 8, stored ? fmt_ld32(v) : 0);
    fmt_st64(out + 16, stored ? fmt_ld32(v + 4) : 0);
    fmt_st64(out + 24, stored ? fmt_ld32(v + 8) : (fmt_checksum(NULL, 0) & UINT32_MAX));
    out[38] = stored ? v[12] : 0;
    out[39] = 1; /* sum32 */
    if (l != NULL && l[13] == FMT_VALUE_INLINE) {
        fmt_st32(out + 40, fmt_ld32(l));
    }
}

/* The sample record of a sample with fields at `offset` whose nf value records are vals:
 * its stored range (all its stored values), its field record's length, codec
 * FMT_CODEC_FIELDS (its values carry their own codecs and checksums), its label. */
static void encode_fielded(const uint8_t *vals, uint32_t nf, uint32_t label_at, uint64_t offset,
                           uint8_t *out)
{
    memset(out, 0, FMT_SAMPLE_REC_LEN);
    fmt_st64(out, offset);
    fmt_st64(out + 8, fmt_vals_stored(vals, nf));
    fmt_st64(out + 16, fmt_frec_len(vals, nf));
    out[38] = (uint8_t)FMT_CODEC_FIELDS;
    out[39] = 1; /* sum32 */
    if (label_at != UINT32_MAX && vals[label_at + 13] == FMT_VALUE_INLINE) {
        fmt_st32(out + 40, fmt_ld32(vals + label_at));
    }
}

const uint8_t *fmt_table_record(const fmt_table *t, uint32_t slot, uint8_t *out)
{
    if (t->rec != NULL) {
        return t->rec + (size_t)slot * FMT_SAMPLE_REC_LEN;
    }
    const uint8_t *sample = t->val + (size_t)slot * t->stride;
    if (t->fields) {
        encode_fielded(sample, t->fields, t->label_at, t->off[slot], out);
        return out;
    }
    const uint8_t *l = t->label_at != UINT32_MAX ? sample + t->label_at : NULL;
    encode_record(fmt_table_val(t, slot), l, t->off[slot], out);
    return out;
}

void fmt_table2_blocks(const fmt_table *view, uint32_t *blk)
{
    for (uint32_t b = 0; (uint64_t)b * FMT_TABLE_BLOCK < view->n; b++) {
        blk[b] = (uint32_t)view->off[(size_t)b * FMT_TABLE_BLOCK];
    }
}

int fmt_table2_records(const fmt_index *ix, uint64_t c, const uint8_t *raw, const uint32_t *blk,
                       const uint32_t *slots, uint32_t n, uint8_t *rec)
{
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    const uint32_t nf = ix->h.n_fields;
    const uint32_t stride = nf * FMT_VALUE_REC_LEN;
    const uint32_t data_at = ix->data_field * FMT_VALUE_REC_LEN;
    const uint32_t label_at =
        ix->h.label_field == FMT_NO_FIELD ? UINT32_MAX : ix->h.label_field * FMT_VALUE_REC_LEN;
    const uint64_t first = c * ix->h.chunk_size;
    fmt_field fd[FMT_MAX_FIELDS];
    for (uint32_t f = 0; f < nf; f++) {
        fmt_index_field(ix, f, &fd[f]);
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t t = slots[i];
        if (t >= ch.n_samples) {
            return hd_err(HDMLP_E_RANGE, "sample table of chunk %llu: slot %u of %u", (ull)c, t,
                          ch.n_samples);
        }
        /* The offset: the block's start, then the stored lengths before t in its block (a
         * sample's: its stored values', or its one stored field's). */
        uint64_t pos = blk[t / FMT_TABLE_BLOCK];
        const uint32_t j0 = t / FMT_TABLE_BLOCK * FMT_TABLE_BLOCK;
        const uint8_t *r = raw + (size_t)j0 * stride;
        for (uint32_t j = j0; j < t; j++, r += stride) {
            pos += ix->fielded ? fmt_vals_stored(r, nf)
                               : (uint64_t)(r[data_at + 13] == FMT_VALUE_STORED) *
                                     fmt_ld32(r + data_at);
        }
        const uint8_t *const sample = raw + (size_t)t * stride;
        for (uint32_t f = 0; f < nf; f++) {
            fmt_value v;
            fmt_value_decode(sample + f * FMT_VALUE_REC_LEN, &v);
            const int rc =
                check_value(ix, c, first + t, f, &fd[f], sample + f * FMT_VALUE_REC_LEN, &v);
            if (rc != HDMLP_OK) {
                return rc;
            }
        }
        const uint8_t *const v = sample + data_at;
        const uint64_t len = ix->fielded                 ? fmt_vals_stored(sample, nf)
                             : v[13] == FMT_VALUE_STORED ? fmt_ld32(v)
                                                         : 0;
        if (pos < FMT_CHUNK_HEADER_LEN || pos > ch.length || len > ch.length - pos) {
            return hd_err(HDMLP_E_CORRUPT,
                          "sample table of chunk %llu: sample %llu at %llu, %llu bytes, is not "
                          "inside the chunk's %llu (the table changed since it was checked)",
                          (ull)c, (ull)(first + t), (ull)pos, (ull)len, (ull)ch.length);
        }
        uint8_t *const out = rec + (size_t)i * FMT_SAMPLE_REC_LEN;
        if (ix->fielded) {
            encode_fielded(sample, nf, label_at, pos, out);
        } else {
            encode_record(v, label_at == UINT32_MAX ? NULL : sample + label_at, pos, out);
        }
    }
    return HDMLP_OK;
}

int fmt_table2_expand(const fmt_index *ix, uint64_t c, const uint8_t *raw, uint8_t *rec,
                      fmt_table *out)
{
    const uint32_t k = ix->h.chunk_size;
    uint64_t *off = hd_malloc((size_t)k * sizeof(uint64_t));
    if (off == NULL) {
        return hd_err(HDMLP_E_NOMEM, "sample table of chunk %llu: out of memory", (ull)c);
    }
    fmt_table view;
    const int rc = fmt_table2_view(ix, c, raw, off, 0, &view);
    for (uint32_t t = 0; rc == HDMLP_OK && t < view.n; t++) {
        uint8_t *o = rec + (size_t)t * FMT_SAMPLE_REC_LEN;
        fmt_table_record(&view, t, o);
    }
    hd_free(off);
    if (rc == HDMLP_OK) {
        *out = (fmt_table){.rec = rec, .chunk = c, .first = view.first, .n = view.n};
    }
    return rc;
}

static int by_max_raw_desc(const void *a, const void *b)
{
    const uint64_t x = ((const uint64_t *)a)[0], y = ((const uint64_t *)b)[0];
    return x < y ? 1 : x > y ? -1 : 0;
}

uint64_t fmt_index2_raw_top_sum(const fmt_index *ix, uint64_t m)
{
    const uint64_t nc = ix->h.n_chunks;
    const uint64_t m0 = m < ix->h.n_samples ? m : ix->h.n_samples;
    if (m >= ix->h.n_samples) {
        return ix->h.raw_bytes + (ix->fielded ? fmt_frec_bound(0, ix->h.n_fields) : 0) * m0;
    }
    uint64_t *v = hd_malloc((size_t)nc * 2 * sizeof(uint64_t)); /* (max_raw, n) pairs */
    if (v == NULL) {
        return UINT64_MAX;
    }
    for (uint64_t c = 0; c < nc; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        v[2 * c] = ch.max_raw;
        v[2 * c + 1] = ch.n_samples;
    }
    qsort(v, (size_t)nc, 2 * sizeof(uint64_t), by_max_raw_desc);
    uint64_t sum = 0;
    for (uint64_t c = 0; c < nc && m > 0; c++) {
        const uint64_t take = v[2 * c + 1] < m ? v[2 * c + 1] : m;
        if (v[2 * c] != 0 && take > (UINT64_MAX - sum) / v[2 * c]) {
            sum = ix->h.raw_bytes; /* the bound overflows: the m largest are at most all */
            break;
        }
        sum += take * v[2 * c];
        m -= take;
    }
    hd_free(v);
    /* A sample with fields is delivered as its field record: at most this much longer. */
    return sum + (ix->fielded ? fmt_frec_bound(0, ix->h.n_fields) : 0) * m0;
}

int fmt_keys_check(const fmt_index *ix, uint64_t c, const uint8_t *blk, uint64_t len)
{
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    if (len != ch.keys_length) {
        return hd_err(HDMLP_E_CORRUPT,
                      "key block of chunk %llu: %llu bytes, the index says %llu", (ull)c,
                      (ull)len, (ull)ch.keys_length);
    }
    const uint64_t sum = fmt_checksum(blk, (size_t)len);
    if (sum != ch.keys_checksum) {
        return hd_err(HDMLP_E_CORRUPT,
                      "key block of chunk %llu: checksum mismatch (read %016llx, the index "
                      "says %016llx)",
                      (ull)c, (ull)sum, (ull)ch.keys_checksum);
    }
    uint64_t total = 4ull * ch.n_samples;
    for (uint32_t t = 0; t < ch.n_samples; t++) {
        const uint32_t k = fmt_ld32(blk + 4ull * t);
        if (k > FMT_MAX_KEY_LEN) {
            return hd_err(HDMLP_E_CORRUPT,
                          "key block of chunk %llu: key %u of %u bytes (at "
                          "most %u)",
                          (ull)c, t, k, FMT_MAX_KEY_LEN);
        }
        total += k;
    }
    if (total != len) {
        return hd_err(HDMLP_E_CORRUPT,
                      "key block of chunk %llu: lengths add up to %llu bytes, the block has "
                      "%llu",
                      (ull)c, (ull)total, (ull)len);
    }
    return HDMLP_OK;
}

void fmt_keys_at(const uint8_t *blk, uint32_t n, uint32_t t, const uint8_t **key, uint32_t *len)
{
    uint64_t off = 4ull * n;
    for (uint32_t j = 0; j < t; j++) {
        off += fmt_ld32(blk + 4ull * j);
    }
    *key = blk + off;
    *len = fmt_ld32(blk + 4ull * t);
}

void fmt_file_header_encode(uint8_t hdr[FMT_FILE_HEADER_LEN], const char *magic,
                            uint64_t dataset_id)
{
    memcpy(hdr, magic, 8);
    fmt_st64(hdr + 8, dataset_id);
}

int fmt_file_header_check(const fmt_index *ix, const char *name, const char *magic,
                          const uint8_t *hdr, size_t len)
{
    if (len < FMT_FILE_HEADER_LEN || memcmp(hdr, magic, 8) != 0) {
        return hd_err(HDMLP_E_CORRUPT, "%s: no %.8s header (not this dataset's %s file)", name,
                      magic, memcmp(magic, FMT_TABLES_MAGIC, 8) == 0 ? "tables" : "keys");
    }
    const uint64_t id = fmt_ld64(hdr + 8);
    if (id != ix->h.dataset_id) {
        return hd_err(HDMLP_E_CORRUPT,
                      "%s: dataset_id %016llx, the index says %016llx (a file of another "
                      "dataset?)",
                      name, (ull)id, (ull)ix->h.dataset_id);
    }
    return HDMLP_OK;
}
