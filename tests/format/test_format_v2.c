/* format/: version 2 — fields, chunk records with tables and key blocks, value records
 * checked and expanded, raw_top_sum from the chunk records (the small index of
 * support/format_small.h in version 2). */
#include "format.h"
#include "support/format_small.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCRATCH (SMALL_K * (2 * FMT_VALUE_REC_LEN + FMT_SAMPLE_REC_LEN))

/* Expands chunk c of v's tables into rec; the code. */
static int expand(const fmt_index *ix, const small2 *v, uint64_t c, uint8_t *rec, fmt_table *t)
{
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    return fmt_table2_expand(ix, c, v->tables + ch.table_offset, rec, t);
}

Test(index2, roundtrip_and_tables_give_version_1s_records)
{
    small2 v;
    small2_init(&v, true);
    size_t len;
    fmt_index ix;
    uint8_t *buf = small2_encode(&v, &len, &ix);
    cr_assert_eq(ix.h.major, 2);
    cr_assert_eq(ix.h.n_fields, 2);
    cr_assert_eq(ix.h.label_field, 1);
    cr_assert_eq(ix.data_field, 0);
    cr_assert_null(ix.samples);
    cr_assert_eq(ix.chunk_rec_len, FMT_CHUNK_REC2_LEN);
    cr_assert_eq(fmt_table2_scratch(&ix), SMALL_K * (2 * FMT_VALUE_REC_LEN + sizeof(uint64_t)));
    fmt_field f;
    fmt_index_field(&ix, 1, &f);
    cr_assert_eq(f.type, FMT_FIELD_INT64);
    cr_assert_eq(memcmp(ix.strings + f.name_off, "label", 5), 0);
    uint64_t raw = 0;
    for (unsigned c = 0; c < SMALL_C; c++) {
        fmt_chunk ch;
        fmt_index_chunk(&ix, c, &ch);
        cr_assert_eq(ch.table_offset, v.sm.chunks[c].table_offset);
        cr_assert_eq(ch.max_raw, v.sm.chunks[c].max_raw);
        uint8_t rec[SCRATCH];
        fmt_table t;
        cr_assert_eq(expand(&ix, &v, c, rec, &t), HDMLP_OK, "%s", hdmlp_last_error());
        cr_assert_eq(t.first, c * SMALL_K);
        cr_assert_eq(t.n, ch.n_samples);
        for (uint32_t j = 0; j < t.n; j++) {
            fmt_sample got;
            fmt_table_sample(&t, j, &got);
            const fmt_sample *want = &v.sm.samples[c * SMALL_K + j];
            cr_assert_eq(got.offset, want->offset, "sample %u", c * SMALL_K + j);
            cr_assert_eq(got.stored_len, want->stored_len);
            cr_assert_eq(got.raw_len, want->raw_len);
            cr_assert_eq(got.checksum, want->checksum);
            cr_assert_eq(got.codec, want->codec);
            cr_assert_eq(got.label, want->label);
            cr_assert_eq(got.sum32, 1);
            raw += got.raw_len;
        }
        const uint8_t *kb = v.keys + ch.keys_offset;
        cr_assert_eq(fmt_keys_check(&ix, c, kb, ch.keys_length), HDMLP_OK, "%s",
                     hdmlp_last_error());
        for (uint32_t j = 0; j < t.n; j++) {
            const uint8_t *key;
            uint32_t klen;
            fmt_keys_at(kb, t.n, j, &key, &klen);
            char want[16];
            snprintf(want, sizeof(want), "k%u", c * SMALL_K + j);
            cr_assert_eq(klen, strlen(want));
            cr_assert_eq(memcmp(key, want, klen), 0);
        }
    }
    cr_assert_eq(raw, ix.h.raw_bytes);
    hd_free(buf);
}

Test(index2, raw_top_sum_bounds_the_exact_sum_from_chunk_records)
{
    small2 v;
    small2_init(&v, false);
    size_t len;
    fmt_index ix;
    uint8_t *buf = small2_encode(&v, &len, &ix);
    uint64_t sizes[SMALL_N];
    for (unsigned i = 0; i < SMALL_N; i++) {
        sizes[i] = v.sm.samples[i].raw_len;
    }
    for (unsigned m = 1; m <= SMALL_N + 1; m++) {
        /* the exact sum of the m largest, by selection */
        uint64_t s[SMALL_N], exact = 0;
        memcpy(s, sizes, sizeof(s));
        for (unsigned a = 0; a < m && a < SMALL_N; a++) {
            unsigned best = a;
            for (unsigned b = a + 1; b < SMALL_N; b++) {
                best = s[b] > s[best] ? b : best;
            }
            const uint64_t tmp = s[a];
            s[a] = s[best];
            s[best] = tmp;
            exact += s[a];
        }
        const uint64_t got = fmt_index2_raw_top_sum(&ix, m);
        cr_assert_geq(got, exact, "m %u", m);
        if (m >= SMALL_N) {
            cr_assert_eq(got, ix.h.raw_bytes);
        }
        uint64_t bound = 0; /* m × the largest sample */
        for (unsigned i = 0; i < SMALL_N; i++) {
            bound = sizes[i] > bound ? sizes[i] : bound;
        }
        cr_assert_leq(got, bound * m);
    }
    hd_free(buf);
}

/* Re-encodes v after change() and expects the encoder's own decode to refuse it, naming
 * `needle`. */
static void refused(void (*change)(small2 *), const char *needle)
{
    small2 v;
    small2_init(&v, true);
    change(&v);
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_neq(fmt_index_encode(&v.sm.b, &buf, &len), HDMLP_OK, "encoded: %s", needle);
    cr_assert(strstr(hdmlp_last_error(), needle), "%s (wanted: %s)", hdmlp_last_error(),
              needle);
}

static void dup_names(small2 *v)
{
    v->fields[1].name_off = v->fields[0].name_off;
    v->fields[1].name_len = v->fields[0].name_len;
}
static void label_not_int(small2 *v) { v->fields[1].type = FMT_FIELD_TEXT; }
static void bad_type(small2 *v) { v->fields[0].type = FMT_FIELD_TYPES; }
static void dtype_on_bytes(small2 *v) { v->fields[0].dtype = FMT_DTYPE_F32; }
static void table_gap(small2 *v) { v->sm.chunks[2].table_offset += 16; }
static void keys_gap(small2 *v) { v->sm.chunks[1].keys_offset += 8; }
static void short_keys(small2 *v) { v->sm.chunks[0].keys_length = 4; }
static void tables_size(small2 *v) { v->sm.b.h.tables_bytes += 16; }
static void keys_size(small2 *v) { v->sm.b.h.keys_bytes -= 8; }
static void max_above(small2 *v) { v->sm.chunks[3].max_raw = v->sm.chunks[3].raw_bytes + 1; }
static void no_fields(small2 *v) { v->sm.b.n_fields = 0; }
static void label_field_out(small2 *v) { v->sm.b.h.label_field = 2; }

Test(index2, broken_records_are_refused_naming_the_rule)
{
    refused(dup_names, "both named data");
    refused(label_not_int, "label field is one int64 field");
    refused(bad_type, "unknown type 8");
    refused(dtype_on_bytes, "dtype 10");
    refused(table_gap, "tables lie back to back");
    refused(keys_gap, "key block at");
    refused(short_keys, "at least 4 per sample");
    refused(tables_size, "tables_bytes");
    refused(keys_size, "keys_bytes");
    refused(max_above, "max_raw");
    refused(no_fields, "n_fields 0");
    refused(label_field_out, "label_field 2");
}

/* Changes value record (sample j of chunk 1, field f) and re-seals the table's checksum in
 * the chunk record, so that only the record's own check can catch it. */
static void expand_refused(unsigned j, unsigned f, void (*poke)(uint8_t *r), const char *needle)
{
    small2 v;
    small2_init(&v, true);
    uint8_t *r = v.tables + v.sm.chunks[1].table_offset + (j * 2 + f) * FMT_VALUE_REC_LEN;
    poke(r);
    v.sm.chunks[1].table_checksum =
        fmt_checksum(v.tables + v.sm.chunks[1].table_offset, SMALL_K * 2 * FMT_VALUE_REC_LEN);
    size_t len;
    fmt_index ix;
    uint8_t *buf = small2_encode(&v, &len, &ix);
    uint8_t rec[SCRATCH];
    fmt_table t;
    cr_assert_eq(expand(&ix, &v, 1, rec, &t), HDMLP_E_CORRUPT, "%s", needle);
    cr_assert(strstr(hdmlp_last_error(), "chunk 1"), "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), needle), "%s (wanted: %s)", hdmlp_last_error(),
              needle);
    cr_assert_eq(expand(&ix, &v, 0, rec, &t), HDMLP_OK, "other chunks still read");
    hd_free(buf);
}

static void state_3(uint8_t *r) { r[13] = 3; }
static void absent(uint8_t *r) { memset(r, 0, FMT_VALUE_REC_LEN); }
static void codec_7(uint8_t *r) { r[12] = 7; }
static void label_big(uint8_t *r) { fmt_st64(r, SMALL_L); }
static void reserved(uint8_t *r) { r[15] = 1; }
static void longer(uint8_t *r) { fmt_st32(r, fmt_ld32(r) + 1); }
static void stored_label(uint8_t *r) { r[13] = FMT_VALUE_STORED; }

Test(index2, every_value_record_is_checked_when_its_table_is_read)
{
    expand_refused(0, 0, state_3, "unknown state");
    expand_refused(1, 0, absent, "absent from a required field");
    expand_refused(2, 0, codec_7, "unknown codec");
    expand_refused(0, 1, label_big, "checksum mismatch"); /* the inline checksum */
    expand_refused(0, 0, reserved, "reserved");
    expand_refused(1, 0, longer, "the chunk record says");
    expand_refused(1, 1, stored_label, "stored bytes in a scalar field");
}

Test(index2, a_table_or_key_block_that_does_not_match_its_checksum_is_refused)
{
    small2 v;
    small2_init(&v, true);
    size_t len;
    fmt_index ix;
    uint8_t *buf = small2_encode(&v, &len, &ix);
    v.tables[v.sm.chunks[2].table_offset + 5] ^= 1;
    uint8_t rec[SCRATCH];
    fmt_table t;
    cr_assert_eq(expand(&ix, &v, 2, rec, &t), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "sample table of chunk 2: checksum mismatch"), "%s",
              hdmlp_last_error());
    cr_assert_eq(expand(&ix, &v, SMALL_C, rec, &t), HDMLP_E_RANGE);
    fmt_chunk ch;
    fmt_index_chunk(&ix, 1, &ch);
    v.keys[ch.keys_offset + ch.keys_length - 1] ^= 1;
    cr_assert_eq(fmt_keys_check(&ix, 1, v.keys + ch.keys_offset, ch.keys_length),
                 HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "key block of chunk 1: checksum"), "%s",
              hdmlp_last_error());
    cr_assert_eq(fmt_keys_check(&ix, 1, v.keys + ch.keys_offset, ch.keys_length - 1),
                 HDMLP_E_CORRUPT);
    hd_free(buf);
}

Test(index2, a_label_that_is_not_below_n_labels_is_refused)
{
    small2 v;
    small2_init(&v, true);
    /* a valid inline checksum over an out-of-range label */
    uint8_t *r = v.tables + v.sm.chunks[0].table_offset + FMT_VALUE_REC_LEN;
    uint8_t bits[8];
    fmt_st64(bits, SMALL_L);
    fmt_value_encode(r, &(fmt_value){.inline_bits = SMALL_L,
                                     .checksum = (uint32_t)fmt_checksum(bits, 8),
                                     .state = FMT_VALUE_INLINE});
    v.sm.chunks[0].table_checksum =
        fmt_checksum(v.tables + FMT_FILE_HEADER_LEN, SMALL_K * 2 * FMT_VALUE_REC_LEN);
    size_t len;
    fmt_index ix;
    uint8_t *buf = small2_encode(&v, &len, &ix);
    uint8_t rec[SCRATCH];
    fmt_table t;
    cr_assert_eq(expand(&ix, &v, 0, rec, &t), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "field 1 (label): label not below n_labels"), "%s",
              hdmlp_last_error());
    hd_free(buf);
}

/* Two stored fields (no label): the dataset has fields, its samples' records span both
 * values (stored lengths summed) and stand for field records (codec FMT_CODEC_FIELDS, the raw
 * length the field record's). */
Test(index2, a_dataset_of_two_stored_fields_has_field_records)
{
    small2 v;
    small2_init(&v, true);
    v.fields[1].type = FMT_FIELD_TEXT; /* two stored fields, no label */
    v.fields[1].flags = FMT_FIELD_REQUIRED;
    v.sm.b.h.label_field = FMT_NO_FIELD;
    size_t len;
    fmt_index ix;
    uint8_t *buf = small2_encode(&v, &len, &ix);
    cr_assert_eq(ix.data_field, FMT_NO_FIELD);
    cr_assert(ix.fielded);
    uint8_t rec[SCRATCH];
    fmt_table t;
    /* The label's inline values are not a text field's: refused by sample and field. */
    cr_assert_eq(expand(&ix, &v, 0, rec, &t), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "inline value in a field that is not a scalar"), "%s",
              hdmlp_last_error());
    hd_free(buf);
}

/* A view gives what the expansion gives, slot by slot; once a table passed (checked), a view
 * skips its checksum and value checks but still refuses sums that do not match the chunk. */
Test(index2, views_give_the_expanded_records_and_checked_skips_only_the_checksum)
{
    small2 v;
    small2_init(&v, true);
    size_t len;
    fmt_index ix;
    uint8_t *buf = small2_encode(&v, &len, &ix);
    for (unsigned c = 0; c < SMALL_C; c++) {
        fmt_chunk ch;
        fmt_index_chunk(&ix, c, &ch);
        uint8_t rec[SCRATCH];
        uint64_t off[SMALL_K];
        fmt_table e, w;
        cr_assert_eq(expand(&ix, &v, c, rec, &e), HDMLP_OK);
        cr_assert_eq(fmt_table2_view(&ix, c, v.tables + ch.table_offset, off, 0, &w), HDMLP_OK,
                     "%s", hdmlp_last_error());
        cr_assert_null(w.rec);
        cr_assert_eq(w.n, e.n);
        for (uint32_t t = 0; t < w.n; t++) {
            uint8_t one[FMT_SAMPLE_REC_LEN];
            cr_assert_eq(memcmp(fmt_table_record(&w, t, one), fmt_table_record(&e, t, NULL),
                                FMT_SAMPLE_REC_LEN),
                         0, "chunk %u slot %u", c, t);
            cr_assert_eq(fmt_table_raw_len(&w, t), fmt_table_raw_len(&e, t));
            cr_assert_eq(fmt_table_offset(&w, t), fmt_table_offset(&e, t));
            cr_assert_eq(fmt_table_stored_len(&w, t), fmt_table_stored_len(&e, t));
        }
    }
    fmt_chunk ch;
    fmt_index_chunk(&ix, 1, &ch);
    uint64_t off[SMALL_K];
    fmt_table w;
    v.tables[ch.table_offset + 8] ^= 1; /* a checksum byte of a value: only the table's sum */
    cr_assert_eq(fmt_table2_view(&ix, 1, v.tables + ch.table_offset, off, 0, &w),
                 HDMLP_E_CORRUPT);
    cr_assert_eq(fmt_table2_view(&ix, 1, v.tables + ch.table_offset, off, 1, &w), HDMLP_OK);
    fmt_st32(v.tables + ch.table_offset, fmt_ld32(v.tables + ch.table_offset) + 1); /* length */
    cr_assert_eq(fmt_table2_view(&ix, 1, v.tables + ch.table_offset, off, 1, &w),
                 HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "the chunk record says"), "%s", hdmlp_last_error());
    hd_free(buf);
}

/* Records summed from block offsets (fmt_table2_blocks of a checked view) equal the view's,
 * for any set of slots in any order; once the table changes, a record whose block sums past
 * the chunk, or whose value record breaks its field's rule, is refused by chunk and sample,
 * and a slot past the chunk by range. */
Test(index2, records_from_block_offsets_equal_the_views)
{
    small2 v;
    small2_init(&v, true);
    size_t len;
    fmt_index ix;
    uint8_t *buf = small2_encode(&v, &len, &ix);
    for (unsigned c = 0; c < SMALL_C; c++) {
        fmt_chunk ch;
        fmt_index_chunk(&ix, c, &ch);
        uint64_t off[SMALL_K];
        fmt_table w;
        cr_assert_eq(fmt_table2_view(&ix, c, v.tables + ch.table_offset, off, 0, &w), HDMLP_OK);
        uint32_t blk[(SMALL_K + FMT_TABLE_BLOCK - 1) / FMT_TABLE_BLOCK];
        fmt_table2_blocks(&w, blk);
        uint32_t slots[SMALL_K];
        for (uint32_t t = 0; t < w.n; t++) {
            slots[t] = w.n - 1 - t; /* decreasing: any order */
        }
        uint8_t rec[SMALL_K * FMT_SAMPLE_REC_LEN];
        cr_assert_eq(
            fmt_table2_records(&ix, c, v.tables + ch.table_offset, blk, slots, w.n, rec),
            HDMLP_OK, "%s", hdmlp_last_error());
        for (uint32_t i = 0; i < w.n; i++) {
            uint8_t one[FMT_SAMPLE_REC_LEN];
            cr_assert_eq(memcmp(rec + i * FMT_SAMPLE_REC_LEN,
                                fmt_table_record(&w, slots[i], one), FMT_SAMPLE_REC_LEN),
                         0, "chunk %u slot %u", c, slots[i]);
        }
    }
    fmt_chunk ch;
    fmt_index_chunk(&ix, 1, &ch);
    uint8_t *raw = v.tables + ch.table_offset;
    uint64_t off[SMALL_K];
    fmt_table w;
    cr_assert_eq(fmt_table2_view(&ix, 1, raw, off, 0, &w), HDMLP_OK);
    cr_assert_geq(w.n, 2);
    uint32_t blk[(SMALL_K + FMT_TABLE_BLOCK - 1) / FMT_TABLE_BLOCK];
    fmt_table2_blocks(&w, blk);
    uint8_t rec[FMT_SAMPLE_REC_LEN];
    const uint32_t past = w.n;
    cr_assert_eq(fmt_table2_records(&ix, 1, raw, blk, &past, 1, rec), HDMLP_E_RANGE);
    /* Slot 0's stored length grows past the chunk: slot 1 lies outside it, and slot 0's own
     * record breaks codec 0's rule (stored = raw). */
    const uint32_t data = ix.data_field * FMT_VALUE_REC_LEN;
    fmt_st32(raw + data, fmt_ld32(raw + data) + (uint32_t)ch.length);
    const uint32_t one = 1, zero = 0;
    cr_assert_eq(fmt_table2_records(&ix, 1, raw, blk, &one, 1, rec), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "chunk 1") &&
                  strstr(hdmlp_last_error(), "is not inside the chunk"),
              "%s", hdmlp_last_error());
    cr_assert_eq(fmt_table2_records(&ix, 1, raw, blk, &zero, 1, rec), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "stored_length != raw_length"), "%s",
              hdmlp_last_error());
    hd_free(buf);
}
