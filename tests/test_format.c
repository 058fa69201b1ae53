/* format/: index encode/decode and validation, chunk headers, sample codecs, errors. */
#include "format.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* ---- a small index built in memory ------------------------------------------------------
 * N = 10, K = 3 → chunks of 3, 3, 3, 1; two segments (chunks 0-1 and 2-3); three labels;
 * codecs cycle 0, 1, 2 (the index does not look inside frames). */
#define SMALL_N 10u
#define SMALL_K 3u
#define SMALL_C 4u
#define SMALL_S 2u
#define SMALL_L 3u
#define SMALL_ID 0x1122334455667788ull

typedef struct small {
    fmt_sample samples[SMALL_N];
    fmt_chunk chunks[SMALL_C];
    fmt_segment segments[SMALL_S];
    fmt_label labels[SMALL_L];
    uint8_t strings[256];
    uint8_t dict[40];
    fmt_index_build b;
} small;

static void small_init(small *sm, bool with_dict)
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

static uint8_t *small_encode(bool with_dict, size_t *len, fmt_index *ix)
{
    small sm;
    small_init(&sm, with_dict);
    uint8_t *buf = NULL;
    const int rc = fmt_index_encode(&sm.b, &buf, len);
    cr_assert_eq(rc, HDMLP_OK, "encode: %s", hdmlp_last_error());
    cr_assert_eq(fmt_index_decode(buf, *len, ix), HDMLP_OK, "%s", hdmlp_last_error());
    return buf;
}

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
        const int want = major == 1 ? HDMLP_OK : HDMLP_E_VERSION;
        cr_assert_eq(fmt_index_decode(buf, len, &ix), want, "major %u: %s", major,
                     hdmlp_last_error());
    }
    fmt_st16(buf + 8, 2);
    testds_reseal_index(buf, len);
    cr_assert_eq(fmt_index_decode(buf, len, &ix), HDMLP_E_VERSION);
    cr_assert(strstr(hdmlp_last_error(), "version 2.0"), "%s", hdmlp_last_error());
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

/* ---- chunk headers -------------------------------------------------------------------- */

static void small_chunk_header(const fmt_index *ix, uint64_t c, uint8_t hdr[64])
{
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    const uint64_t sum =
        fmt_chunk_header_encode(hdr, ix->h.dataset_id, c, ch.n_samples, ch.length - 64);
    cr_assert_eq(sum, ch.header_checksum);
    cr_assert_eq(fmt_ld64(hdr + 56), sum);
}

Test(chunk, header_roundtrip)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    for (uint64_t c = 0; c < SMALL_C; c++) {
        uint8_t hdr[64];
        small_chunk_header(&ix, c, hdr);
        cr_assert_eq(memcmp(hdr, "HDMLPCHK", 8), 0);
        cr_assert_eq(fmt_chunk_header_check(&ix, c, hdr, 64), HDMLP_OK, "%s",
                     hdmlp_last_error());
    }
    hd_free(buf);
}

Test(chunk, header_every_byte_flip_detected)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    uint8_t hdr[64];
    small_chunk_header(&ix, 1, hdr);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    for (size_t i = 0; i < 64; i++) {
        for (size_t m = 0; m < sizeof(masks); m++) {
            hdr[i] ^= masks[m];
            cr_assert_eq(fmt_chunk_header_check(&ix, 1, hdr, 64), HDMLP_E_CORRUPT,
                         "byte %zu ^ 0x%02x", i, masks[m]);
            cr_assert(strstr(hdmlp_last_error(), "chunk 1:"), "%s", hdmlp_last_error());
            hdr[i] ^= masks[m];
        }
    }
    cr_assert_eq(fmt_chunk_header_check(&ix, 1, hdr, 64), HDMLP_OK);
    hd_free(buf);
}

Test(chunk, header_of_other_chunk_or_dataset_rejected)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    uint8_t hdr[64];
    small_chunk_header(&ix, 0, hdr);
    cr_assert_eq(fmt_chunk_header_check(&ix, 0, hdr, 64), HDMLP_OK);
    cr_assert_eq(fmt_chunk_header_check(&ix, 1, hdr, 64), HDMLP_E_CORRUPT);
    /* A self-consistent header of another dataset with the same shape. */
    fmt_chunk ch;
    fmt_index_chunk(&ix, 0, &ch);
    fmt_chunk_header_encode(hdr, SMALL_ID + 1, 0, ch.n_samples, ch.length - 64);
    cr_assert_eq(fmt_chunk_header_check(&ix, 0, hdr, 64), HDMLP_E_CORRUPT);
    cr_assert_eq(fmt_chunk_header_check(&ix, 0, hdr, 63), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "truncated"), "%s", hdmlp_last_error());
    cr_assert_eq(fmt_chunk_header_check(&ix, SMALL_C, hdr, 64), HDMLP_E_RANGE);
    hd_free(buf);
}

/* ---- sample codecs -------------------------------------------------------------------- */

#define CODEC_SEED 20240611u

static fmt_sample make_sample(const uint8_t *stored, size_t stored_len, size_t raw_len,
                              uint32_t codec)
{
    fmt_sample s;
    memset(&s, 0, sizeof(s));
    s.offset = 64;
    s.stored_len = stored_len;
    s.raw_len = raw_len;
    s.codec = codec;
    s.checksum = fmt_checksum(stored, stored_len);
    return s;
}

/* Index with K = 4 and the given dictionary (only header fields and dict are used). */
static fmt_index codec_index(const uint8_t *dict, size_t dict_len)
{
    fmt_index ix;
    memset(&ix, 0, sizeof(ix));
    ix.h.chunk_size = 4;
    ix.dict = dict;
    ix.dict_len = dict_len;
    return ix;
}

Test(codec, none_roundtrip_and_checksum_mismatch)
{
    cr_log_info("seed %u", CODEC_SEED);
    uint8_t raw[300], out[300];
    testds_fill(9, CODEC_SEED, raw, sizeof(raw));
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    fmt_sample s = make_sample(raw, sizeof(raw), sizeof(raw), FMT_CODEC_NONE);
    cr_assert_eq(fmt_sample_decode(d, 9, &s, raw, out, sizeof(out)), HDMLP_OK);
    cr_assert_eq(memcmp(raw, out, sizeof(raw)), 0);
    cr_assert_eq(fmt_sample_verify(9, &s, raw), HDMLP_OK);
    raw[100] ^= 0x10;
    cr_assert_eq(fmt_sample_decode(d, 9, &s, raw, out, sizeof(out)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "sample 9 (chunk 2): checksum mismatch"), "%s",
              hdmlp_last_error());
    cr_assert_eq(fmt_sample_verify(9, &s, raw), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "sample 9: checksum"), "%s", hdmlp_last_error());
    fmt_decoder_free(d);
}

static void zstd_roundtrip(const uint8_t *dict, size_t dict_len, uint32_t want_codec)
{
    cr_log_info("seed %u", CODEC_SEED);
    const fmt_index ix = codec_index(dict, dict_len);
    fmt_encoder *e;
    fmt_decoder *d;
    cr_assert_eq(fmt_encoder_create(3, dict, dict_len, &e), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK, "%s", hdmlp_last_error());
    uint8_t *enc = NULL;
    size_t enc_cap = 0;
    static const size_t sizes[] = {0, 1, 63, 64, 1000, 100000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        const size_t n = sizes[k];
        uint8_t *raw = malloc(n + 1), *out = malloc(n + 1);
        testds_fill(k, CODEC_SEED, raw, n);
        size_t enc_len;
        uint32_t codec = 99;
        cr_assert_eq(fmt_encode(e, raw, n, &enc, &enc_cap, &enc_len, &codec), HDMLP_OK);
        cr_assert_eq(codec, want_codec);
        if (n >= 1000) {
            cr_assert_lt(enc_len, n / 4, "compressible content");
        }
        const fmt_sample s = make_sample(enc, enc_len, n, codec);
        cr_assert_eq(fmt_sample_decode(d, k, &s, enc, out, n), HDMLP_OK, "size %zu: %s", n,
                     hdmlp_last_error());
        cr_assert_eq(memcmp(raw, out, n), 0, "size %zu", n);
        free(raw);
        free(out);
    }
    hd_free(enc);
    fmt_encoder_free(e);
    fmt_decoder_free(d);
}

Test(codec, zstd_roundtrip) { zstd_roundtrip(NULL, 0, FMT_CODEC_ZSTD); }

Test(codec, zstd_dict_roundtrip)
{
    uint8_t dict[512];
    testds_fill(123, CODEC_SEED, dict, sizeof(dict)); /* raw-content dictionary */
    zstd_roundtrip(dict, sizeof(dict), FMT_CODEC_ZSTD_DICT);
}

/* Encodes sample content k (n bytes) with zstd; returns a malloc'd frame. */
static uint8_t *zstd_frame(size_t n, size_t *len)
{
    uint8_t *raw = malloc(n + 1);
    testds_fill(5, CODEC_SEED, raw, n);
    const size_t cap = ZSTD_compressBound(n);
    uint8_t *out = malloc(cap);
    *len = ZSTD_compress(out, cap, raw, n, 1);
    cr_assert(!ZSTD_isError(*len));
    free(raw);
    return out;
}

Test(codec, zstd_wrong_raw_length_rejected)
{
    size_t len;
    uint8_t *frame = zstd_frame(500, &len);
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    uint8_t out[600];
    fmt_sample s = make_sample(frame, len, 500, FMT_CODEC_ZSTD);
    cr_assert_eq(fmt_sample_decode(d, 6, &s, frame, out, sizeof(out)), HDMLP_OK);
    s.raw_len = 499;
    cr_assert_eq(fmt_sample_decode(d, 6, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "sample 6 (chunk 1)"), "%s", hdmlp_last_error());
    s.raw_len = 501;
    cr_assert_eq(fmt_sample_decode(d, 6, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    free(frame);
    fmt_decoder_free(d);
}

Test(codec, zstd_frame_without_content_size_checked)
{
    uint8_t raw[400], out[800];
    testds_fill(1, CODEC_SEED, raw, sizeof(raw));
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
    uint8_t frame[1024];
    ZSTD_outBuffer ob = {frame, sizeof(frame), 0};
    ZSTD_inBuffer ib = {raw, sizeof(raw), 0};
    cr_assert_eq(ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_end), 0);
    ZSTD_freeCCtx(cctx);
    cr_assert_eq(ZSTD_getFrameContentSize(frame, ob.pos), ZSTD_CONTENTSIZE_UNKNOWN);
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    fmt_sample s = make_sample(frame, ob.pos, sizeof(raw), FMT_CODEC_ZSTD);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, frame, out, sizeof(out)), HDMLP_OK);
    cr_assert_eq(memcmp(out, raw, sizeof(raw)), 0);
    s.raw_len = sizeof(raw) - 1; /* decoding would overflow raw_len */
    cr_assert_eq(fmt_sample_decode(d, 0, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    s.raw_len = sizeof(raw) + 1; /* decoding gives fewer bytes */
    cr_assert_eq(fmt_sample_decode(d, 0, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    fmt_decoder_free(d);
}

Test(codec, zstd_trailing_or_garbage_rejected)
{
    size_t len;
    uint8_t *frame = zstd_frame(300, &len);
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, frame, len);
    longer[len] = 0;
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    uint8_t out[300];
    fmt_sample s = make_sample(longer, len + 1, 300, FMT_CODEC_ZSTD);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, longer, out, sizeof(out)), HDMLP_E_CORRUPT);
    s = make_sample(frame, len - 1, 300, FMT_CODEC_ZSTD); /* truncated frame */
    cr_assert_eq(fmt_sample_decode(d, 0, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    static const uint8_t garbage[] = "definitely not a zstd frame";
    s = make_sample(garbage, sizeof(garbage), 300, FMT_CODEC_ZSTD);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, garbage, out, sizeof(out)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "zstd"), "%s", hdmlp_last_error());
    s = make_sample(NULL, 0, 0, FMT_CODEC_ZSTD); /* empty stored bytes: not a frame */
    cr_assert_eq(fmt_sample_decode(d, 0, &s, NULL, out, sizeof(out)), HDMLP_E_CORRUPT);
    free(frame);
    free(longer);
    fmt_decoder_free(d);
}

Test(codec, dict_sample_needs_dict_and_plain_decoder_fails)
{
    uint8_t dict[512];
    testds_fill(123, CODEC_SEED, dict, sizeof(dict));
    fmt_encoder *e;
    cr_assert_eq(fmt_encoder_create(1, dict, sizeof(dict), &e), HDMLP_OK);
    uint8_t raw[2000], out[2000];
    testds_fill(7, CODEC_SEED, raw, sizeof(raw));
    uint8_t *enc = NULL;
    size_t cap = 0, len;
    uint32_t codec;
    cr_assert_eq(fmt_encode(e, raw, sizeof(raw), &enc, &cap, &len, &codec), HDMLP_OK);
    const fmt_index plain = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&plain, &d), HDMLP_OK);
    fmt_sample s = make_sample(enc, len, sizeof(raw), FMT_CODEC_ZSTD_DICT);
    cr_assert_eq(fmt_sample_decode(d, 3, &s, enc, out, sizeof(out)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "dictionary"), "%s", hdmlp_last_error());
    s.codec = FMT_CODEC_ZSTD; /* a dictionary frame read as plain zstd */
    cr_assert_eq(fmt_sample_decode(d, 3, &s, enc, out, sizeof(out)), HDMLP_E_CORRUPT);
    s.codec = 3;
    cr_assert_eq(fmt_sample_decode(d, 3, &s, enc, out, sizeof(out)), HDMLP_E_CORRUPT);
    hd_free(enc);
    fmt_encoder_free(e);
    fmt_decoder_free(d);
}

Test(codec, destination_too_small)
{
    uint8_t raw[100], out[100];
    testds_fill(2, CODEC_SEED, raw, sizeof(raw));
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    const fmt_sample s = make_sample(raw, sizeof(raw), sizeof(raw), FMT_CODEC_NONE);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, raw, out, sizeof(out)), HDMLP_OK);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, raw, out, sizeof(out) - 1), HDMLP_E_RANGE);
    fmt_decoder_free(d);
}

Test(codec, encoder_level_checked)
{
    fmt_encoder *e = (fmt_encoder *)1;
    cr_assert_eq(fmt_encoder_create(0, NULL, 0, &e), HDMLP_E_INVAL);
    cr_assert_null(e);
    cr_assert_eq(fmt_encoder_create(ZSTD_maxCLevel() + 1, NULL, 0, &e), HDMLP_E_INVAL);
    cr_assert_eq(fmt_encoder_create(ZSTD_maxCLevel(), NULL, 0, &e), HDMLP_OK);
    fmt_encoder_free(e);
    fmt_encoder_free(NULL);
    fmt_decoder_free(NULL);
}

Test(codec, dict_train)
{
    cr_log_info("seed %u", CODEC_SEED);
    enum { N = 1000, SZ = 200 };
    uint8_t *all = malloc(N * SZ);
    size_t sizes[N];
    for (unsigned i = 0; i < N; i++) {
        testds_fill(i, CODEC_SEED, all + (size_t)i * SZ, SZ);
        sizes[i] = SZ;
    }
    uint8_t dict[4096];
    size_t dict_len = 0;
    cr_assert_eq(fmt_dict_train(all, sizes, N, dict, sizeof(dict), &dict_len), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert_gt(dict_len, 0);
    cr_assert_leq(dict_len, sizeof(dict));
    zstd_roundtrip(dict, dict_len, FMT_CODEC_ZSTD_DICT);
    /* Too little material to train on. */
    cr_assert_eq(fmt_dict_train(all, sizes, 1, dict, sizeof(dict), &dict_len), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "dictionary training"), "%s", hdmlp_last_error());
    free(all);
}

Test(codec, bad_dictionary_refused_by_decoder)
{
    /* zstd dictionary magic followed by garbage entropy tables. */
    uint8_t dict[256];
    memset(dict, 0xee, sizeof(dict));
    fmt_st32(dict, 0xEC30A437u);
    const fmt_index ix = codec_index(dict, sizeof(dict));
    fmt_decoder *d = (fmt_decoder *)1;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_E_CORRUPT);
    cr_assert_null(d);
    cr_assert(strstr(hdmlp_last_error(), "dict"), "%s", hdmlp_last_error());
}

/* ---- errors --------------------------------------------------------------------------- */

Test(errors, names_and_messages_for_every_code)
{
    struct {
        int code;
        const char *name;
        const char *msg;
    } table[] = {
#define ROW(name, value, msg) {value, "HDMLP_" #name, msg},
        HDMLP_ERRNO_MAP(ROW)
#undef ROW
    };
    const size_t n = sizeof(table) / sizeof(table[0]);
    cr_assert_geq(n, 16);
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(hdmlp_err_name(table[i].code), table[i].name);
        cr_assert_str_eq(hdmlp_strerror(table[i].code), table[i].msg);
        cr_assert_gt(strlen(table[i].msg), 0);
        cr_assert_str_neq(hdmlp_strerror(table[i].code), "unknown error");
        for (size_t j = 0; j < i; j++) {
            cr_assert_neq(table[i].code, table[j].code, "codes are unique");
        }
    }
    cr_assert_str_eq(hdmlp_err_name(HDMLP_E_CORRUPT), "HDMLP_E_CORRUPT");
    cr_assert_str_eq(hdmlp_strerror(HDMLP_E_VERSION), "unsupported format version");
    cr_assert_eq(HDMLP_E_NOTFOUND, -6);
}

Test(errors, unknown_code)
{
    cr_assert_str_eq(hdmlp_strerror(-1000), "unknown error");
    cr_assert_str_eq(hdmlp_err_name(-1000), "HDMLP_E_UNKNOWN");
    cr_assert_str_eq(hdmlp_strerror(2), "unknown error");
}

Test(errors, detail_and_wrap)
{
    hd_clear_error();
    cr_assert_str_eq(hdmlp_last_error(), "");
    cr_assert_eq(hd_err(HDMLP_E_CORRUPT, "sample %d: bad", 5), HDMLP_E_CORRUPT);
    cr_assert_str_eq(hdmlp_last_error(), "sample 5: bad");
    cr_assert_eq(hd_err_wrap(HDMLP_E_CORRUPT, "%s: ", "seg"), HDMLP_E_CORRUPT);
    cr_assert_str_eq(hdmlp_last_error(), "seg: sample 5: bad");
}
