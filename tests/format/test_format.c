/* format/: index encode/decode and validation. The rest of the test_format binary: chunk
 * headers (test_format_chunk.c), sample codecs (test_format_codec.c), errors
 * (test_format_errors.c); the small index in support/format_small.h. */
#include "format.h"
#include "support/format_small.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

Test(index, roundtrip)
{
    small sm;
    small_init(&sm, true);
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    cr_assert_eq(len % 8, 0);
    cr_assert_eq(ix.h.major, 1);
    cr_assert_eq(ix.h.minor, 0);
    cr_assert_eq(ix.h.dataset_id, SMALL_ID);
    cr_assert_eq(ix.h.n_samples, SMALL_N);
    cr_assert_eq(ix.h.n_chunks, SMALL_C);
    cr_assert_eq(ix.h.chunk_size, SMALL_K);
    cr_assert_eq(ix.h.n_labels, SMALL_L);
    cr_assert_eq(ix.h.n_segments, SMALL_S);
    cr_assert_eq(ix.h.pack_seed, 42);
    cr_assert_eq(ix.h.created, 1700000000);
    uint64_t raw = 0, stored = 0;
    for (unsigned i = 0; i < SMALL_N; i++) {
        fmt_sample s;
        fmt_index_sample(&ix, i, &s);
        cr_assert_eq(memcmp(&s, &sm.samples[i], sizeof(s)), 0, "sample %u", i);
        raw += s.raw_len;
        stored += s.stored_len;
    }
    cr_assert_eq(ix.h.raw_bytes, raw);
    cr_assert_eq(ix.h.stored_bytes, stored);
    for (unsigned c = 0; c < SMALL_C; c++) {
        fmt_chunk ch;
        fmt_index_chunk(&ix, c, &ch);
        cr_assert_eq(memcmp(&ch, &sm.chunks[c], sizeof(ch)), 0, "chunk %u", c);
    }
    for (unsigned s = 0; s < SMALL_S; s++) {
        fmt_segment seg;
        fmt_index_segment(&ix, s, &seg);
        cr_assert_eq(seg.size, sm.segments[s].size);
        cr_assert_eq(seg.n_chunks, sm.segments[s].n_chunks);
    }
    for (unsigned l = 0; l < SMALL_L; l++) {
        fmt_label lab;
        fmt_index_label(&ix, l, &lab);
        cr_assert_eq(lab.name_off, sm.labels[l].name_off);
        cr_assert_eq(lab.name_len, sm.labels[l].name_len);
    }
    cr_assert_eq(ix.strings_len, sm.b.strings_len);
    cr_assert_eq(memcmp(ix.strings, sm.strings, sm.b.strings_len), 0);
    cr_assert_eq(ix.dict_len, sizeof(sm.dict));
    cr_assert_eq(memcmp(ix.dict, sm.dict, sizeof(sm.dict)), 0);
    hd_free(buf);
}

Test(index, encode_rejects_invalid_input)
{
    small sm;
    small_init(&sm, true);
    sm.chunks[1].n_samples = 2;
    uint8_t *buf = (uint8_t *)1;
    size_t len = 1;
    cr_assert_eq(fmt_index_encode(&sm.b, &buf, &len), HDMLP_E_INVAL);
    cr_assert_null(buf);
    cr_assert_eq(len, 0);
    cr_assert(strstr(hdmlp_last_error(), "chunk 1: n_samples"), "%s", hdmlp_last_error());

    small_init(&sm, true);
    sm.samples[2].key_len = 70000;
    cr_assert_eq(fmt_index_encode(&sm.b, &buf, &len), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "key_length"), "%s", hdmlp_last_error());
}

Test(index, decode_rejects_bad_magic)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    buf[0] = 'X';
    testds_reseal_index(buf, len);
    cr_assert_eq(fmt_index_decode(buf, len, &ix), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "magic"), "%s", hdmlp_last_error());
    hd_free(buf);
}

Test(index, decode_rejects_checksum_mismatch)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    buf[len - 1] ^= 0x01;
    cr_assert_eq(fmt_index_decode(buf, len, &ix), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "checksum mismatch"), "%s", hdmlp_last_error());
    hd_free(buf);
}

Test(index, decode_rejects_every_truncation)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees any overread */
        memcpy(copy, buf, n);
        cr_assert_eq(fmt_index_decode(copy, n, &ix), HDMLP_E_CORRUPT, "length %zu", n);
        free(copy);
    }
    hd_free(buf);
}

Test(index, decode_rejects_every_byte_flip)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    for (size_t i = 0; i < len; i++) {
        for (size_t m = 0; m < sizeof(masks); m++) {
            buf[i] ^= masks[m];
            const int rc = fmt_index_decode(buf, len, &ix);
            cr_assert(rc == HDMLP_E_CORRUPT || rc == HDMLP_E_VERSION,
                      "byte %zu ^ 0x%02x: rc %d", i, masks[m], rc);
            buf[i] ^= masks[m];
        }
    }
    cr_assert_eq(fmt_index_decode(buf, len, &ix), HDMLP_OK);
    hd_free(buf);
}

Test(index, version_other_major_refused)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    for (unsigned major = 0; major < 4; major++) {
        fmt_st16(buf + 8, (uint16_t)major);
        testds_reseal_index(buf, len);
        /* Major 2 is read, but a version-1 layout is not a valid version-2 index. */
        const int want = major == 1 ? HDMLP_OK : major == 2 ? HDMLP_E_CORRUPT : HDMLP_E_VERSION;
        cr_assert_eq(fmt_index_decode(buf, len, &ix), want, "major %u: %s", major,
                     hdmlp_last_error());
    }
    fmt_st16(buf + 8, 3);
    testds_reseal_index(buf, len);
    cr_assert_eq(fmt_index_decode(buf, len, &ix), HDMLP_E_VERSION);
    cr_assert(strstr(hdmlp_last_error(), "version 3.0"), "%s", hdmlp_last_error());
    hd_free(buf);
}

Test(index, version_newer_minor_accepted_with_reserved_bytes)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    const size_t rec = (size_t)(ix.samples - ix.base);
    buf[200] = 7;      /* reserved header byte */
    buf[rec + 39] = 1; /* reserved sample byte */
    buf[rec + 44] = 1; /* reserved sample word */
    testds_reseal_index(buf, len);
    cr_assert_eq(fmt_index_decode(buf, len, &ix), HDMLP_E_CORRUPT, "minor 0 checks reserved");
    fmt_st16(buf + 10, 3);
    testds_reseal_index(buf, len);
    cr_assert_eq(fmt_index_decode(buf, len, &ix), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(ix.h.minor, 3);
    hd_free(buf);
}

/* ---- every validation rule, on a resealed (checksum-valid) index -------------------- */

typedef struct mut_ctx {
    uint8_t *buf;
    size_t len;
    const fmt_index *ix;
} mut_ctx;

static size_t at(const mut_ctx *m, const uint8_t *sec, uint64_t rec, size_t rec_len,
                 size_t field)
{
    return (size_t)(sec - m->ix->base) + (size_t)rec * rec_len + field;
}
#define SAMPLE_AT(i, f) at(m, m->ix->samples, (i), FMT_SAMPLE_REC_LEN, (f))
#define CHUNK_AT(c, f) at(m, m->ix->chunks, (c), FMT_CHUNK_REC_LEN, (f))
#define SEGMENT_AT(s, f) at(m, m->ix->segments, (s), FMT_SEGMENT_REC_LEN, (f))
#define LABEL_AT(l, f) at(m, m->ix->labels, (l), FMT_LABEL_REC_LEN, (f))
#define SECTION_AT(j, f) (88u + 16u * (j) + (f))

typedef struct rule_case {
    const char *name;
    void (*mutate)(mut_ctx *m);
    const char *expect; /* substring of the error detail */
} rule_case;

#define MUT(fn_name, body)                                                                     \
    static void fn_name(mut_ctx *m) { body; }

MUT(m_header_len, fmt_st32(m->buf + 12, 255))
MUT(m_flags, fmt_st32(m->buf + 52, 1))
MUT(m_reserved, m->buf[255] = 1)
MUT(m_n_samples0, fmt_st64(m->buf + 24, 0))
MUT(m_k0, fmt_st32(m->buf + 40, 0))
MUT(m_k_big, fmt_st32(m->buf + 40, FMT_MAX_CHUNK_SIZE + 1))
MUT(m_n_chunks, fmt_st64(m->buf + 32, SMALL_C + 1))
MUT(m_n_labels0, fmt_st32(m->buf + 44, 0))
MUT(m_n_segments0, fmt_st32(m->buf + 48, 0))
MUT(m_n_labels_more, fmt_st32(m->buf + 44, SMALL_L + 1))
MUT(m_sec_unaligned,
    fmt_st64(m->buf + SECTION_AT(0, 0), fmt_ld64(m->buf + SECTION_AT(0, 0)) + 4))
MUT(m_sec_len, fmt_st64(m->buf + SECTION_AT(0, 8), fmt_ld64(m->buf + SECTION_AT(0, 8)) + 48))
MUT(m_sec_oob, fmt_st64(m->buf + SECTION_AT(4, 0), m->len))
MUT(m_sec_huge_len, fmt_st64(m->buf + SECTION_AT(5, 8), UINT64_MAX - 3))
MUT(m_sec_below_header, fmt_st64(m->buf + SECTION_AT(5, 0), 128))
MUT(m_sec_overlap, fmt_st64(m->buf + SECTION_AT(1, 0), fmt_ld64(m->buf + SECTION_AT(0, 0)) + 8))
MUT(m_gap_nonzero, m->buf[(m->ix->strings - m->ix->base) + m->ix->strings_len] = 1)
MUT(m_sample_offset, fmt_st64(m->buf + SAMPLE_AT(1, 0), fmt_ld64(m->buf + SAMPLE_AT(1, 0)) + 1))
MUT(m_sample_first_offset, fmt_st64(m->buf + SAMPLE_AT(3, 0), 0))
MUT(m_sample_stored_ovf, fmt_st64(m->buf + SAMPLE_AT(0, 8), UINT64_MAX - 10))
MUT(m_sample_key, fmt_st32(m->buf + SAMPLE_AT(2, 32), (uint32_t)m->ix->strings_len))
MUT(m_sample_key_len, fmt_st16(m->buf + SAMPLE_AT(2, 36), 0xffff))
MUT(m_sample_codec, m->buf[SAMPLE_AT(4, 38)] = 3)
MUT(m_sample_codec0_raw,
    fmt_st64(m->buf + SAMPLE_AT(3, 16), fmt_ld64(m->buf + SAMPLE_AT(3, 16)) + 1))
MUT(m_sample_label, fmt_st32(m->buf + SAMPLE_AT(5, 40), SMALL_L))
MUT(m_sample_res1, m->buf[SAMPLE_AT(6, 39)] = 1)
MUT(m_sample_res2, m->buf[SAMPLE_AT(6, 47)] = 1)
MUT(m_sample_raw_ovf, fmt_st64(m->buf + SAMPLE_AT(4, 16), UINT64_MAX))
MUT(m_chunk_n, fmt_st32(m->buf + CHUNK_AT(3, 20), 2))
MUT(m_chunk_segment, fmt_st32(m->buf + CHUNK_AT(2, 16), 0))
MUT(m_chunk_segment_oob, fmt_st32(m->buf + CHUNK_AT(3, 16), SMALL_S))
MUT(m_chunk_unaligned, fmt_st64(m->buf + CHUNK_AT(1, 0), fmt_ld64(m->buf + CHUNK_AT(1, 0)) + 8))
MUT(m_chunk_overlap, fmt_st64(m->buf + CHUNK_AT(1, 0), 0))
MUT(m_chunk_beyond, fmt_st64(m->buf + CHUNK_AT(1, 0), fmt_ld64(m->buf + SEGMENT_AT(0, 0))))
MUT(m_chunk_huge_off, fmt_st64(m->buf + CHUNK_AT(3, 0), UINT64_MAX & ~(uint64_t)4095))
MUT(m_chunk_len, fmt_st64(m->buf + CHUNK_AT(0, 8), fmt_ld64(m->buf + CHUNK_AT(0, 8)) + 1))
MUT(m_seg_size, fmt_st64(m->buf + SEGMENT_AT(1, 0), fmt_ld64(m->buf + SEGMENT_AT(1, 0)) + 1))
MUT(m_seg_small, fmt_st64(m->buf + SEGMENT_AT(0, 0), 4096))
MUT(m_seg_sum, fmt_st64(m->buf + SEGMENT_AT(1, 8), 3))
MUT(m_seg_sum_ovf, fmt_st64(m->buf + SEGMENT_AT(1, 8), UINT64_MAX))
MUT(m_seg_split, fmt_st64(m->buf + SEGMENT_AT(0, 8), 1); fmt_st64(m->buf + SEGMENT_AT(1, 8), 3))
MUT(m_label_name, fmt_st32(m->buf + LABEL_AT(2, 4), (uint32_t)m->ix->strings_len))
MUT(m_raw_bytes, fmt_st64(m->buf + 72, fmt_ld64(m->buf + 72) + 1))
MUT(m_stored_bytes, fmt_st64(m->buf + 80, fmt_ld64(m->buf + 80) - 1))

static const rule_case rule_cases[] = {
    {"header_length", m_header_len, "header_length 255"},
    {"flags", m_flags, "flags"},
    {"reserved header", m_reserved, "reserved header"},
    {"n_samples 0", m_n_samples0, "n_samples 0"},
    {"chunk_size 0", m_k0, "chunk_size 0"},
    {"chunk_size too big", m_k_big, "chunk_size 1048577"},
    {"n_chunks", m_n_chunks, "n_chunks 5"},
    {"n_labels 0", m_n_labels0, "n_labels 0"},
    {"n_segments 0", m_n_segments0, "n_segments 0"},
    {"labels length vs n_labels", m_n_labels_more, "section labels"},
    {"section unaligned", m_sec_unaligned, "section samples: offset"},
    {"section length", m_sec_len, "section samples"},
    {"section out of bounds", m_sec_oob, "section strings"},
    {"section length overflow", m_sec_huge_len, "section dict"},
    {"section inside header", m_sec_below_header, "section dict"},
    {"sections overlap", m_sec_overlap, "overlaps"},
    {"gap not zero", m_gap_nonzero, "padding"},
    {"sample offset", m_sample_offset, "sample 1: offset"},
    {"first sample offset", m_sample_first_offset, "sample 3: offset 0"},
    {"stored_length overflow", m_sample_stored_ovf, "sample 0: stored_length"},
    {"key outside strings", m_sample_key, "sample 2: key"},
    {"key length outside strings", m_sample_key_len, "sample 2: key"},
    {"codec", m_sample_codec, "sample 4: unknown codec 3"},
    {"codec 0 raw != stored", m_sample_codec0_raw, "sample 3: codec 0"},
    {"label", m_sample_label, "sample 5: label 3"},
    {"sample reserved byte", m_sample_res1, "sample 6: reserved"},
    {"sample reserved word", m_sample_res2, "sample 6: reserved"},
    {"raw_bytes overflow", m_sample_raw_ovf, "overflow"},
    {"chunk n_samples", m_chunk_n, "chunk 3: n_samples 2"},
    {"chunk segment order", m_chunk_segment, "chunk 2: segment 0"},
    {"chunk segment out of range", m_chunk_segment_oob, "chunk 3: segment 2"},
    {"chunk offset unaligned", m_chunk_unaligned, "not a multiple of 4096"},
    {"chunks overlap", m_chunk_overlap, "chunk 1: offset 0 overlaps"},
    {"chunk beyond segment", m_chunk_beyond, "chunk 1:"},
    {"chunk offset overflow", m_chunk_huge_off, "chunk 3:"},
    {"chunk length", m_chunk_len, "chunk 0: length"},
    {"segment size alignment", m_seg_size, "segment 1: size"},
    {"segment too small", m_seg_small, "exceeds segment 0"},
    {"segment n_chunks sum", m_seg_sum, "segment 1: n_chunks"},
    {"segment n_chunks overflow", m_seg_sum_ovf, "segment 1: n_chunks"},
    {"segment n_chunks vs chunks", m_seg_split, "chunk 1: segment 0"},
    {"label name", m_label_name, "label 2: name"},
    {"raw_bytes", m_raw_bytes, "raw_bytes"},
    {"stored_bytes", m_stored_bytes, "stored_bytes"},
};

Test(index, every_rule_detected_with_valid_checksum)
{
    size_t len;
    fmt_index good;
    uint8_t *orig = small_encode(true, &len, &good);
    for (size_t k = 0; k < sizeof(rule_cases) / sizeof(rule_cases[0]); k++) {
        uint8_t *buf = malloc(len);
        memcpy(buf, orig, len);
        fmt_index ixm;
        cr_assert_eq(fmt_index_decode(buf, len, &ixm), HDMLP_OK);
        mut_ctx m = {buf, len, &ixm};
        rule_cases[k].mutate(&m);
        testds_reseal_index(buf, len);
        fmt_index out;
        const int rc = fmt_index_decode(buf, len, &out);
        cr_expect_eq(rc, HDMLP_E_CORRUPT, "%s: rc %d", rule_cases[k].name, rc);
        cr_expect(strstr(hdmlp_last_error(), rule_cases[k].expect) != NULL,
                  "%s: detail \"%s\" lacks \"%s\"", rule_cases[k].name, hdmlp_last_error(),
                  rule_cases[k].expect);
        free(buf);
    }
    hd_free(orig);
}

Test(index, codec2_needs_dictionary)
{
    small sm;
    small_init(&sm, false);
    uint8_t *buf;
    size_t len;
    cr_assert_eq(fmt_index_encode(&sm.b, &buf, &len), HDMLP_OK, "%s", hdmlp_last_error());
    hd_free(buf);
    sm.samples[4].codec = FMT_CODEC_ZSTD_DICT;
    cr_assert_eq(fmt_index_encode(&sm.b, &buf, &len), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "sample 4: codec 2"), "%s", hdmlp_last_error());
}
