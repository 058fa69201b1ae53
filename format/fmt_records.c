/* The index's record accessors (both versions) and a byte check, below the decoder
 * (fmt_index.c, fmt_index2.c) and the tables (fmt_table*.c) that all read records. */
#include "fmt_index_private.h"

#include <string.h>

bool fmt_all_zero(const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

void fmt_index_sample(const fmt_index *ix, uint64_t i, fmt_sample *out)
{
    fmt_sample_record(ix->samples + i * FMT_SAMPLE_REC_LEN, out);
}

void fmt_sample_record(const uint8_t *r, fmt_sample *out)
{
    out->offset = fmt_ld64(r);
    out->stored_len = fmt_ld64(r + 8);
    out->raw_len = fmt_ld64(r + 16);
    out->checksum = fmt_ld64(r + 24);
    out->key_off = fmt_ld32(r + 32);
    out->key_len = fmt_ld16(r + 36);
    out->codec = r[38];
    out->label = fmt_ld32(r + 40);
    out->sum32 = r[39] & 1u; /* 0 in version 1's section; 1 in version 2's expansions */
    out->vals = NULL;
    out->n_fields = 0;
}

void fmt_index_chunk(const fmt_index *ix, uint64_t c, fmt_chunk *out)
{
    const uint8_t *r = ix->chunks + c * ix->chunk_rec_len;
    memset(out, 0, sizeof(*out));
    out->offset = fmt_ld64(r);
    out->length = fmt_ld64(r + 8);
    out->segment = fmt_ld32(r + 16);
    out->n_samples = fmt_ld32(r + 20);
    out->header_checksum = fmt_ld64(r + 24);
    if (ix->chunk_rec_len == FMT_CHUNK_REC2_LEN) {
        out->table_offset = fmt_ld64(r + 32);
        out->table_checksum = fmt_ld64(r + 40);
        out->keys_offset = fmt_ld64(r + 48);
        out->keys_length = fmt_ld64(r + 56);
        out->keys_checksum = fmt_ld64(r + 64);
        out->raw_bytes = fmt_ld64(r + 72);
        out->max_raw = fmt_ld64(r + 80);
    }
}

void fmt_index_segment(const fmt_index *ix, uint32_t s, fmt_segment *out)
{
    const uint8_t *r = ix->segments + (uint64_t)s * FMT_SEGMENT_REC_LEN;
    out->size = fmt_ld64(r);
    out->n_chunks = fmt_ld64(r + 8);
}

void fmt_index_label(const fmt_index *ix, uint32_t l, fmt_label *out)
{
    const uint8_t *r = ix->labels + (uint64_t)l * FMT_LABEL_REC_LEN;
    out->name_off = fmt_ld32(r);
    out->name_len = fmt_ld32(r + 4);
}

void fmt_index_field(const fmt_index *ix, uint32_t f, fmt_field *out)
{
    const uint8_t *r = ix->fields + (uint64_t)f * FMT_FIELD_REC_LEN;
    out->name_off = fmt_ld32(r);
    out->name_len = fmt_ld32(r + 4);
    out->type = r[8];
    out->dtype = r[9];
    out->ndim = r[10];
    out->flags = r[11];
    for (unsigned d = 0; d < FMT_MAX_NDIM; d++) {
        out->shape[d] = fmt_ld32(r + 12 + 4 * d);
    }
}
