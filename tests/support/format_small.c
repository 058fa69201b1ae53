/*
 * A small index built in memory (see format_small.h).
 */
#include "support/format_small.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

void small_init(small *sm, bool with_dict)
{
    memset(sm, 0, sizeof(*sm));
    size_t slen = 0;
    for (unsigned i = 0; i < SMALL_N; i++) {
        fmt_sample *s = &sm->samples[i];
        s->stored_len = (i * 7) % 11; /* sample 0 is empty */
        s->codec = with_dict ? i % 3 : i % 2;
        s->raw_len = s->codec == FMT_CODEC_NONE ? s->stored_len : s->stored_len * 3 + 1;
        s->checksum = 0xabc0u + i;
        s->label = i % SMALL_L;
        s->key_off = (uint32_t)slen;
        s->key_len = (uint32_t)sprintf((char *)sm->strings + slen, "k%u", i);
        slen += s->key_len;
    }
    for (unsigned l = 0; l < SMALL_L; l++) {
        sm->labels[l].name_off = (uint32_t)slen;
        sm->labels[l].name_len = (uint32_t)sprintf((char *)sm->strings + slen, "label-%u", l);
        slen += sm->labels[l].name_len;
    }
    slen += 3; /* so the strings section is followed by padding (gap) bytes */
    uint64_t seg_off = 0;
    for (unsigned c = 0; c < SMALL_C; c++) {
        const unsigned seg = c / 2;
        if (c % 2 == 0) {
            seg_off = 0;
        }
        uint64_t pos = FMT_CHUNK_HEADER_LEN;
        const unsigned n = c + 1 < SMALL_C ? SMALL_K : SMALL_N - c * SMALL_K;
        for (unsigned j = 0; j < n; j++) {
            fmt_sample *s = &sm->samples[c * SMALL_K + j];
            s->offset = pos;
            pos += s->stored_len;
        }
        fmt_chunk *ch = &sm->chunks[c];
        ch->offset = seg_off;
        ch->length = pos;
        ch->segment = seg;
        ch->n_samples = n;
        uint8_t hdr[FMT_CHUNK_HEADER_LEN];
        ch->header_checksum = fmt_chunk_header_encode(hdr, SMALL_ID, c, n, pos - 64);
        seg_off += fmt_align_up(pos);
        sm->segments[seg].size = seg_off;
        sm->segments[seg].n_chunks++;
    }
    memcpy(sm->dict, "a raw-content dictionary: hdmlp hdmlp!!", 40);
    fmt_index_build *b = &sm->b;
    b->h.dataset_id = SMALL_ID;
    b->h.chunk_size = SMALL_K;
    b->h.pack_seed = 42;
    b->h.created = 1700000000;
    b->samples = sm->samples;
    b->n_samples = SMALL_N;
    b->chunks = sm->chunks;
    b->n_chunks = SMALL_C;
    b->segments = sm->segments;
    b->n_segments = SMALL_S;
    b->labels = sm->labels;
    b->n_labels = SMALL_L;
    b->strings = sm->strings;
    b->strings_len = slen;
    b->dict = with_dict ? sm->dict : NULL;
    b->dict_len = with_dict ? sizeof(sm->dict) : 0;
}

uint8_t *small_encode(bool with_dict, size_t *len, fmt_index *ix)
{
    small sm;
    small_init(&sm, with_dict);
    uint8_t *buf = NULL;
    const int rc = fmt_index_encode(&sm.b, &buf, len);
    cr_assert_eq(rc, HDMLP_OK, "encode: %s", hdmlp_last_error());
    cr_assert_eq(fmt_index_decode(buf, *len, ix), HDMLP_OK, "%s", hdmlp_last_error());
    return buf;
}

void small2_init(small2 *v, bool with_dict)
{
    memset(v, 0, sizeof(*v));
    small_init(&v->sm, with_dict);
    small *const sm = &v->sm;
    fmt_index_build *const b = &sm->b;
    static const char *const names[2] = {"data", "label"};
    size_t slen = (size_t)b->strings_len;
    for (unsigned f = 0; f < 2; f++) {
        v->fields[f].name_off = (uint32_t)slen;
        v->fields[f].name_len = (uint32_t)strlen(names[f]);
        memcpy(sm->strings + slen, names[f], v->fields[f].name_len);
        slen += v->fields[f].name_len;
    }
    v->fields[0].type = FMT_FIELD_BYTES;
    v->fields[0].flags = FMT_FIELD_REQUIRED;
    v->fields[1].type = FMT_FIELD_INT64;
    v->fields[1].flags = FMT_FIELD_REQUIRED | FMT_FIELD_LABEL;
    fmt_file_header_encode(v->tables, FMT_TABLES_MAGIC, SMALL_ID);
    fmt_file_header_encode(v->keys, FMT_KEYS_MAGIC, SMALL_ID);
    v->keys_len = FMT_FILE_HEADER_LEN;
    uint8_t *t = v->tables + FMT_FILE_HEADER_LEN;
    for (unsigned c = 0; c < SMALL_C; c++) {
        fmt_chunk *ch = &sm->chunks[c];
        ch->table_offset = (uint64_t)(t - v->tables);
        ch->keys_offset = v->keys_len;
        for (unsigned j = 0; j < ch->n_samples; j++) {
            fmt_sample *s = &sm->samples[c * SMALL_K + j];
            s->checksum &= UINT32_MAX;
            const fmt_value data =
                fmt_value_stored(s->stored_len, s->raw_len, s->checksum, s->codec);
            const fmt_value label = fmt_value_int64(s->label);
            fmt_value_encode(t, &data);
            fmt_value_encode(t + FMT_VALUE_REC_LEN, &label);
            t += 2 * FMT_VALUE_REC_LEN;
            ch->raw_bytes += s->raw_len;
            ch->max_raw = s->raw_len > ch->max_raw ? s->raw_len : ch->max_raw;
            fmt_st32(v->keys + v->keys_len + 4 * j, s->key_len);
        }
        size_t at = v->keys_len + 4 * ch->n_samples;
        for (unsigned j = 0; j < ch->n_samples; j++) {
            const fmt_sample *s = &sm->samples[c * SMALL_K + j];
            memcpy(v->keys + at, sm->strings + s->key_off, s->key_len);
            at += s->key_len;
        }
        ch->keys_length = at - v->keys_len;
        ch->keys_checksum = fmt_checksum(v->keys + v->keys_len, (size_t)ch->keys_length);
        ch->table_checksum = fmt_checksum(v->tables + ch->table_offset,
                                          (size_t)ch->n_samples * 2 * FMT_VALUE_REC_LEN);
        v->keys_len = (at + 7) & ~(size_t)7;
    }
    b->version = 2;
    b->samples = NULL;
    b->fields = v->fields;
    b->n_fields = 2;
    b->h.label_field = 1;
    b->h.tables_bytes = (uint64_t)(t - v->tables);
    b->h.keys_bytes = v->keys_len;
    b->strings_len = slen;
}

uint8_t *small2_encode(small2 *v, size_t *len, fmt_index *ix)
{
    uint8_t *buf = NULL;
    const int rc = fmt_index_encode(&v->sm.b, &buf, len);
    cr_assert_eq(rc, HDMLP_OK, "encode: %s", hdmlp_last_error());
    cr_assert_eq(fmt_index_decode(buf, *len, ix), HDMLP_OK, "decode: %s", hdmlp_last_error());
    return buf;
}
