/* The index: decoding with full validation (FORMAT.md), record accessors, encoding. What
 * is version 2's alone (fields, its chunk records' tables and keys) is in fmt_index2.c. */
#include "fmt_index_private.h"

#include <string.h>

/* Section 0 is version 1's samples, version 2's fields. */
enum { SEC_RECORDS, SEC_CHUNKS, SEC_SEGMENTS, SEC_LABELS, SEC_STRINGS, SEC_DICT, SEC_COUNT };

static const char *const sec_name[2][SEC_COUNT] = {
    {"samples", "chunks", "segments", "labels", "strings", "dict"},
    {"fields", "chunks", "segments", "labels", "strings", "dict"}};

#define IDX_MAGIC "HDMLPIDX"
#define IDX_END_MAGIC "HDMLPEND"
#define IDX_SECTIONS_AT 88u
#define IDX_RESERVED_AT 184u  /* version 1 */
#define IDX2_FIELDS_AT 184u   /* version 2: n_fields, label_field, tables_bytes, keys_bytes */
#define IDX2_RESERVED_AT 208u /* version 2 */
#define IDX_MAX_STRINGS ((uint64_t)1 << 32)

typedef struct sec {
    uint64_t off, len;
    int id;
} sec;

/* Header fields and section table; bounds, alignment, overlap and gaps. */
static int decode_sections(const uint8_t *p, size_t size, bool strict, const fmt_header *h,
                           sec out[SEC_COUNT])
{
    const uint64_t body_end = (uint64_t)size - FMT_INDEX_TRAILER_LEN;
    uint64_t want[SEC_COUNT];
    const bool v2 = h->major == 2;
    const char *const *name = sec_name[v2];
    const uint64_t counts[4] = {v2 ? h->n_fields : h->n_samples, h->n_chunks, h->n_segments,
                                h->n_labels};
    const uint64_t rec_len[4] = {v2 ? FMT_FIELD_REC_LEN : FMT_SAMPLE_REC_LEN,
                                 v2 ? FMT_CHUNK_REC2_LEN : FMT_CHUNK_REC_LEN,
                                 FMT_SEGMENT_REC_LEN, FMT_LABEL_REC_LEN};
    for (int j = 0; j < SEC_COUNT; j++) {
        const uint8_t *e = p + IDX_SECTIONS_AT + 16u * (unsigned)j;
        out[j].off = fmt_ld64(e);
        out[j].len = fmt_ld64(e + 8);
        out[j].id = j;
        if (out[j].off % 8 != 0) {
            return hd_err(HDMLP_E_CORRUPT, "index: section %s: offset %llu not a multiple of 8",
                          name[j], (ull)out[j].off);
        }
        if (out[j].off < FMT_INDEX_HEADER_LEN || out[j].off > body_end ||
            out[j].len > body_end - out[j].off) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: section %s: range [%llu, +%llu) outside the index body "
                          "[256, %llu)",
                          name[j], (ull)out[j].off, (ull)out[j].len, (ull)body_end);
        }
        if (j < 4) {
            if (mul_ovf(counts[j], rec_len[j], &want[j]) || out[j].len != want[j]) {
                return hd_err(HDMLP_E_CORRUPT,
                              "index: section %s: length %llu, expected %llu records x %llu",
                              name[j], (ull)out[j].len, (ull)counts[j], (ull)rec_len[j]);
            }
        }
    }
    if (out[SEC_STRINGS].len > IDX_MAX_STRINGS) {
        return hd_err(HDMLP_E_CORRUPT, "index: section strings: length %llu exceeds 4 GiB",
                      (ull)out[SEC_STRINGS].len);
    }
    /* Non-empty sections sorted by offset must not overlap; gaps must be zero. */
    sec sorted[SEC_COUNT];
    int n = 0;
    for (int j = 0; j < SEC_COUNT; j++) {
        if (out[j].len == 0) {
            continue;
        }
        int k = n++;
        while (k > 0 && sorted[k - 1].off > out[j].off) {
            sorted[k] = sorted[k - 1];
            k--;
        }
        sorted[k] = out[j];
    }
    uint64_t pos = FMT_INDEX_HEADER_LEN;
    for (int k = 0; k <= n; k++) {
        const uint64_t start = k < n ? sorted[k].off : body_end;
        if (start < pos) {
            return hd_err(HDMLP_E_CORRUPT, "index: section %s overlaps section %s",
                          name[sorted[k].id], name[sorted[k - 1].id]);
        }
        if (strict && !fmt_all_zero(p + pos, start - pos)) {
            return hd_err(HDMLP_E_CORRUPT, "index: non-zero padding in [%llu, %llu)", (ull)pos,
                          (ull)start);
        }
        if (k < n) {
            pos = sorted[k].off + sorted[k].len;
        }
    }
    return HDMLP_OK;
}

static int decode_header(const uint8_t *p, size_t size, fmt_header *h, bool *strict)
{
    if (size < 12) {
        return hd_err(HDMLP_E_CORRUPT, "index: %zu bytes, too short to be an hdmlp index",
                      size);
    }
    if (memcmp(p, IDX_MAGIC, 8) != 0) {
        return hd_err(HDMLP_E_CORRUPT, "index: bad magic (not an hdmlp index)");
    }
    h->major = fmt_ld16(p + 8);
    h->minor = fmt_ld16(p + 10);
    if (h->major != 1 && h->major != 2) {
        return hd_err(HDMLP_E_VERSION,
                      "index: format version %u.%u is not supported (this reader reads 1.x "
                      "and 2.x)",
                      (unsigned)h->major, (unsigned)h->minor);
    }
    if (size < FMT_INDEX_HEADER_LEN + FMT_INDEX_TRAILER_LEN) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: %zu bytes, shorter than header and trailer (truncated)", size);
    }
    if (memcmp(p + size - FMT_INDEX_TRAILER_LEN, IDX_END_MAGIC, 8) != 0) {
        return hd_err(HDMLP_E_CORRUPT, "index: bad trailer magic (truncated?)");
    }
    const uint64_t want = fmt_ld64(p + size - 8);
    const uint64_t got = fmt_checksum(p, size - 8);
    if (want != got) {
        return hd_err(HDMLP_E_CORRUPT,
                      "index: checksum mismatch (stored %016llx, computed %016llx)", (ull)want,
                      (ull)got);
    }
    const uint32_t header_length = fmt_ld32(p + 12);
    if (header_length != FMT_INDEX_HEADER_LEN) {
        return hd_err(HDMLP_E_CORRUPT, "index: header_length %u, expected %u", header_length,
                      FMT_INDEX_HEADER_LEN);
    }
    h->dataset_id = fmt_ld64(p + 16);
    h->n_samples = fmt_ld64(p + 24);
    h->n_chunks = fmt_ld64(p + 32);
    h->chunk_size = fmt_ld32(p + 40);
    h->n_labels = fmt_ld32(p + 44);
    h->n_segments = fmt_ld32(p + 48);
    h->flags = fmt_ld32(p + 52);
    h->pack_seed = fmt_ld64(p + 56);
    h->created = fmt_ld64(p + 64);
    h->raw_bytes = fmt_ld64(p + 72);
    h->stored_bytes = fmt_ld64(p + 80);
    /* Newer minors may give meaning to fields that are zero in this one. */
    *strict = h->minor <= FMT_VERSION_MINOR;
    if (*strict && h->flags != 0) {
        return hd_err(HDMLP_E_CORRUPT, "index: flags 0x%x, expected 0", h->flags);
    }
    const unsigned reserved = h->major == 2 ? IDX2_RESERVED_AT : IDX_RESERVED_AT;
    if (*strict && !fmt_all_zero(p + reserved, FMT_INDEX_HEADER_LEN - reserved)) {
        return hd_err(HDMLP_E_CORRUPT, "index: reserved header bytes %u..255 not zero",
                      reserved);
    }
    h->n_fields = 0;
    h->label_field = FMT_NO_FIELD;
    h->tables_bytes = h->keys_bytes = 0;
    if (h->major == 2) {
        h->n_fields = fmt_ld32(p + IDX2_FIELDS_AT);
        h->label_field = fmt_ld32(p + IDX2_FIELDS_AT + 4);
        h->tables_bytes = fmt_ld64(p + IDX2_FIELDS_AT + 8);
        h->keys_bytes = fmt_ld64(p + IDX2_FIELDS_AT + 16);
        if (h->n_fields == 0 || h->n_fields > FMT_MAX_FIELDS) {
            return hd_err(HDMLP_E_CORRUPT, "index: n_fields %u outside 1..%u", h->n_fields,
                          FMT_MAX_FIELDS);
        }
        if (h->label_field != FMT_NO_FIELD && h->label_field >= h->n_fields) {
            return hd_err(HDMLP_E_CORRUPT, "index: label_field %u, n_fields is %u",
                          h->label_field, h->n_fields);
        }
    }
    if (h->n_samples == 0) {
        return hd_err(HDMLP_E_CORRUPT, "index: n_samples 0 (must be at least 1)");
    }
    if (h->chunk_size == 0 || h->chunk_size > FMT_MAX_CHUNK_SIZE) {
        return hd_err(HDMLP_E_CORRUPT, "index: chunk_size %u outside 1..%u", h->chunk_size,
                      FMT_MAX_CHUNK_SIZE);
    }
    const uint64_t c = h->n_samples / h->chunk_size + (h->n_samples % h->chunk_size != 0);
    if (h->n_chunks != c) {
        return hd_err(HDMLP_E_CORRUPT, "index: n_chunks %llu, expected ceil(%llu / %u) = %llu",
                      (ull)h->n_chunks, (ull)h->n_samples, h->chunk_size, (ull)c);
    }
    if (h->n_labels == 0 && (h->major == 1 || h->label_field != FMT_NO_FIELD)) {
        return hd_err(HDMLP_E_CORRUPT, "index: n_labels 0 (must be at least 1%s)",
                      h->major == 1 ? "" : " with a label field");
    }
    if (h->n_segments == 0) {
        return hd_err(HDMLP_E_CORRUPT, "index: n_segments 0 (must be at least 1)");
    }
    return HDMLP_OK;
}

static int check_segments(const fmt_index *ix)
{
    uint64_t total = 0;
    for (uint32_t s = 0; s < ix->h.n_segments; s++) {
        const uint8_t *r = ix->segments + (uint64_t)s * FMT_SEGMENT_REC_LEN;
        const uint64_t size = fmt_ld64(r);
        const uint64_t n = fmt_ld64(r + 8);
        if (size % FMT_ALIGN != 0) {
            return hd_err(HDMLP_E_CORRUPT, "index: segment %u: size %llu not a multiple of %u",
                          s, (ull)size, FMT_ALIGN);
        }
        if (add_ovf(total, n, &total) || total > ix->h.n_chunks) {
            return hd_err(
                HDMLP_E_CORRUPT,
                "index: segment %u: n_chunks %llu brings the total past n_chunks %llu", s,
                (ull)n, (ull)ix->h.n_chunks);
        }
    }
    if (total != ix->h.n_chunks) {
        return hd_err(HDMLP_E_CORRUPT, "index: segments hold %llu chunks, n_chunks is %llu",
                      (ull)total, (ull)ix->h.n_chunks);
    }
    return HDMLP_OK;
}

/* Samples of chunk c, first sample `first`, n of them: returns the chunk's end (64 +
 * payload) in *end and adds to the raw/stored sums. */
static int check_samples(const fmt_index *ix, bool strict, uint64_t c, uint64_t first,
                         uint32_t n, uint64_t *end, uint64_t *raw_sum, uint64_t *stored_sum)
{
    uint64_t pos = FMT_CHUNK_HEADER_LEN;
    const uint8_t *r = ix->samples + first * FMT_SAMPLE_REC_LEN;
    for (uint32_t j = 0; j < n; j++, r += FMT_SAMPLE_REC_LEN) {
        const uint64_t i = first + j;
        const uint64_t off = fmt_ld64(r);
        const uint64_t stored = fmt_ld64(r + 8);
        const uint64_t raw = fmt_ld64(r + 16);
        const uint32_t key_off = fmt_ld32(r + 32);
        const uint32_t key_len = fmt_ld16(r + 36);
        const uint8_t codec = r[38];
        const uint32_t label = fmt_ld32(r + 40);
        if (off != pos) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: sample %llu: offset %llu, expected %llu (samples of chunk "
                          "%llu lie back to back from 64)",
                          (ull)i, (ull)off, (ull)pos, (ull)c);
        }
        if (add_ovf(pos, stored, &pos)) {
            return hd_err(HDMLP_E_CORRUPT, "index: sample %llu: stored_length %llu overflows",
                          (ull)i, (ull)stored);
        }
        if ((uint64_t)key_off + key_len > ix->strings_len) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: sample %llu: key [%u, +%u) outside strings (%llu bytes)",
                          (ull)i, key_off, key_len, (ull)ix->strings_len);
        }
        if (codec > FMT_CODEC_ZSTD_DICT) {
            return hd_err(HDMLP_E_CORRUPT, "index: sample %llu: unknown codec %u", (ull)i,
                          (unsigned)codec);
        }
        if (codec == FMT_CODEC_ZSTD_DICT && ix->dict_len == 0) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: sample %llu: codec 2 but the index has no dictionary",
                          (ull)i);
        }
        if (codec == FMT_CODEC_NONE && stored != raw) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: sample %llu: codec 0 with stored_length %llu != raw_length "
                          "%llu",
                          (ull)i, (ull)stored, (ull)raw);
        }
        if (label >= ix->h.n_labels) {
            return hd_err(HDMLP_E_CORRUPT, "index: sample %llu: label %u, n_labels is %u",
                          (ull)i, label, ix->h.n_labels);
        }
        if (strict && (r[39] != 0 || fmt_ld32(r + 44) != 0)) {
            return hd_err(HDMLP_E_CORRUPT, "index: sample %llu: reserved bytes not zero",
                          (ull)i);
        }
        if (add_ovf(*raw_sum, raw, raw_sum) || add_ovf(*stored_sum, stored, stored_sum)) {
            return hd_err(HDMLP_E_CORRUPT, "index: sample %llu: byte totals overflow", (ull)i);
        }
    }
    *end = pos;
    return HDMLP_OK;
}

static int check_chunks(const fmt_index *ix, bool strict)
{
    const fmt_header *h = &ix->h;
    uint64_t raw_sum = 0;
    uint64_t stored_sum = 0;
    uint32_t seg = 0;
    uint64_t seg_left = fmt_ld64(ix->segments + 8);
    uint64_t seg_size = fmt_ld64(ix->segments);
    uint64_t prev_end = 0; /* end of the previous chunk in the current segment */
    fmt_chunk2_sums sums = {FMT_FILE_HEADER_LEN, FMT_FILE_HEADER_LEN, 0};
    for (uint64_t c = 0; c < h->n_chunks; c++) {
        while (seg_left == 0) { /* check_segments guarantees a next segment exists */
            seg++;
            const uint8_t *sr = ix->segments + (uint64_t)seg * FMT_SEGMENT_REC_LEN;
            seg_size = fmt_ld64(sr);
            seg_left = fmt_ld64(sr + 8);
            prev_end = 0;
        }
        seg_left--;
        const uint8_t *r = ix->chunks + c * ix->chunk_rec_len;
        const uint64_t off = fmt_ld64(r);
        const uint64_t len = fmt_ld64(r + 8);
        const uint32_t cseg = fmt_ld32(r + 16);
        const uint32_t n = fmt_ld32(r + 20);
        const uint64_t first = c * h->chunk_size;
        const uint64_t want_n = c + 1 < h->n_chunks ? h->chunk_size : h->n_samples - first;
        if (n != want_n) {
            return hd_err(HDMLP_E_CORRUPT, "index: chunk %llu: n_samples %u, expected %llu",
                          (ull)c, n, (ull)want_n);
        }
        if (cseg != seg) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: chunk %llu: segment %u, but the segment records place it in "
                          "segment %u",
                          (ull)c, cseg, seg);
        }
        if (off % FMT_ALIGN != 0) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: chunk %llu: offset %llu not a multiple of %u", (ull)c,
                          (ull)off, FMT_ALIGN);
        }
        if (off < prev_end) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: chunk %llu: offset %llu overlaps the previous chunk (ends at "
                          "%llu)",
                          (ull)c, (ull)off, (ull)prev_end);
        }
        uint64_t end;
        if (add_ovf(off, len, &end) || end > seg_size) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: chunk %llu: [%llu, +%llu) exceeds segment %u size %llu",
                          (ull)c, (ull)off, (ull)len, seg, (ull)seg_size);
        }
        prev_end = end;
        if (len < FMT_CHUNK_HEADER_LEN ||
            add_ovf(stored_sum, len - FMT_CHUNK_HEADER_LEN, &stored_sum)) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: chunk %llu: length %llu, below 64 or past "
                          "the byte totals",
                          (ull)c, (ull)len);
        }
        if (h->major == 2) {
            const int rc = fmt_index2_check_chunk(ix, strict, c, &sums);
            if (rc != HDMLP_OK) {
                return rc;
            }
            continue;
        }
        uint64_t samples_end = 0, sample_stored = 0;
        const int rc =
            check_samples(ix, strict, c, first, n, &samples_end, &raw_sum, &sample_stored);
        if (rc != HDMLP_OK) {
            return rc;
        }
        if (len != samples_end) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: chunk %llu: length %llu, but 64 + its samples' stored "
                          "lengths is %llu",
                          (ull)c, (ull)len, (ull)samples_end);
        }
    }
    if (h->major == 2) {
        const int rc = fmt_index2_check_totals(ix, &sums);
        if (rc != HDMLP_OK) {
            return rc;
        }
        raw_sum = sums.raw;
    }
    if (raw_sum != h->raw_bytes) {
        return hd_err(HDMLP_E_CORRUPT, "index: raw_bytes %llu, %s sum to %llu",
                      (ull)h->raw_bytes, h->major == 2 ? "chunks" : "samples", (ull)raw_sum);
    }
    if (stored_sum != h->stored_bytes) {
        return hd_err(HDMLP_E_CORRUPT, "index: stored_bytes %llu, chunks' payloads sum to %llu",
                      (ull)h->stored_bytes, (ull)stored_sum);
    }
    return HDMLP_OK;
}

static int check_labels(const fmt_index *ix)
{
    for (uint32_t l = 0; l < ix->h.n_labels; l++) {
        const uint8_t *r = ix->labels + (uint64_t)l * FMT_LABEL_REC_LEN;
        const uint64_t off = fmt_ld32(r);
        const uint64_t len = fmt_ld32(r + 4);
        if (off + len > ix->strings_len) {
            return hd_err(HDMLP_E_CORRUPT,
                          "index: label %u: name [%llu, +%llu) outside strings (%llu bytes)", l,
                          (ull)off, (ull)len, (ull)ix->strings_len);
        }
    }
    return HDMLP_OK;
}

int fmt_index_decode(const void *buf, size_t size, fmt_index *out)
{
    memset(out, 0, sizeof(*out));
    if (buf == NULL && size != 0) {
        return hd_err(HDMLP_E_INVAL, "index: NULL buffer");
    }
    const uint8_t *p = buf;
    fmt_index ix;
    memset(&ix, 0, sizeof(ix));
    bool strict = true;
    int rc = decode_header(p, size, &ix.h, &strict);
    if (rc != HDMLP_OK) {
        return rc;
    }
    sec s[SEC_COUNT];
    rc = decode_sections(p, size, strict, &ix.h, s);
    if (rc != HDMLP_OK) {
        return rc;
    }
    ix.base = p;
    ix.size = size;
    const bool v2 = ix.h.major == 2;
    ix.samples = v2 ? NULL : p + s[SEC_RECORDS].off;
    ix.fields = v2 ? p + s[SEC_RECORDS].off : NULL;
    ix.chunk_rec_len = v2 ? FMT_CHUNK_REC2_LEN : FMT_CHUNK_REC_LEN;
    ix.data_field = FMT_NO_FIELD;
    ix.chunks = p + s[SEC_CHUNKS].off;
    ix.segments = p + s[SEC_SEGMENTS].off;
    ix.labels = p + s[SEC_LABELS].off;
    ix.strings = p + s[SEC_STRINGS].off;
    ix.strings_len = s[SEC_STRINGS].len;
    ix.dict = p + s[SEC_DICT].off;
    ix.dict_len = s[SEC_DICT].len;
    rc = check_segments(&ix);
    if (rc == HDMLP_OK && v2) {
        rc = fmt_index2_check_fields(&ix, strict, &ix.data_field);
        /* One stored field but an ndarray (its shape is in the record), alone or with the
         * label: delivered as its bytes; else as a field record. */
        const uint32_t plain = ix.h.label_field == FMT_NO_FIELD ? 1 : 2;
        ix.fielded =
            ix.data_field == FMT_NO_FIELD || ix.h.n_fields != plain ||
            ix.fields[(size_t)ix.data_field * FMT_FIELD_REC_LEN + 8] == FMT_FIELD_NDARRAY;
    }
    if (rc == HDMLP_OK) {
        rc = check_chunks(&ix, strict);
    }
    if (rc == HDMLP_OK) {
        rc = check_labels(&ix);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    *out = ix;
    return HDMLP_OK;
}

/* ---- encoding ------------------------------------------------------------------------- */

int fmt_index_encode(const fmt_index_build *b, uint8_t **out, size_t *out_len)
{
    if (out == NULL || out_len == NULL) {
        return hd_err(HDMLP_E_INVAL, "index encode: NULL output");
    }
    *out = NULL;
    *out_len = 0;
    const bool v2 = b != NULL && b->version == 2;
    if (b == NULL || (!v2 && b->n_samples && !b->samples) || (v2 && b->samples) ||
        (b->n_chunks && !b->chunks) || (b->n_segments && !b->segments) ||
        (b->n_labels && !b->labels) || (b->strings_len && !b->strings) ||
        (b->dict_len && !b->dict) || (b->n_fields && !b->fields) || (!v2 && b->n_fields)) {
        return hd_err(HDMLP_E_INVAL, "index encode: NULL array with a non-zero count, or "
                                     "records of the other version");
    }
    uint64_t len[SEC_COUNT];
    if (mul_ovf(v2 ? b->n_fields : b->n_samples, v2 ? FMT_FIELD_REC_LEN : FMT_SAMPLE_REC_LEN,
                &len[SEC_RECORDS]) ||
        mul_ovf(b->n_chunks, v2 ? FMT_CHUNK_REC2_LEN : FMT_CHUNK_REC_LEN, &len[SEC_CHUNKS])) {
        return hd_err(HDMLP_E_INVAL, "index encode: too many records");
    }
    len[SEC_SEGMENTS] = (uint64_t)b->n_segments * FMT_SEGMENT_REC_LEN;
    len[SEC_LABELS] = (uint64_t)b->n_labels * FMT_LABEL_REC_LEN;
    len[SEC_STRINGS] = b->strings_len;
    len[SEC_DICT] = b->dict_len;
    uint64_t off[SEC_COUNT];
    uint64_t pos = FMT_INDEX_HEADER_LEN;
    for (int j = 0; j < SEC_COUNT; j++) {
        if (align8_ovf(pos, &off[j]) || add_ovf(off[j], len[j], &pos)) {
            return hd_err(HDMLP_E_INVAL, "index encode: index too large");
        }
    }
    uint64_t total;
    if (align8_ovf(pos, &pos) || add_ovf(pos, FMT_INDEX_TRAILER_LEN, &total) ||
        total > SIZE_MAX) {
        return hd_err(HDMLP_E_INVAL, "index encode: index too large");
    }
    for (uint64_t i = 0; !v2 && i < b->n_samples; i++) {
        if (b->samples[i].key_len > FMT_MAX_KEY_LEN || b->samples[i].codec > 255) {
            return hd_err(HDMLP_E_INVAL,
                          "index encode: sample %llu: key_length %u or codec %u out of range",
                          (ull)i, b->samples[i].key_len, b->samples[i].codec);
        }
    }
    uint8_t *p = hd_calloc(1, (size_t)total);
    if (p == NULL) {
        return hd_err(HDMLP_E_NOMEM, "index encode: cannot allocate %llu bytes", (ull)total);
    }
    uint64_t raw_sum = 0;
    uint64_t stored_sum = 0;
    for (uint64_t i = 0; !v2 && i < b->n_samples; i++) {
        const fmt_sample *s = &b->samples[i];
        uint8_t *r = p + off[SEC_RECORDS] + i * FMT_SAMPLE_REC_LEN;
        fmt_st64(r, s->offset);
        fmt_st64(r + 8, s->stored_len);
        fmt_st64(r + 16, s->raw_len);
        fmt_st64(r + 24, s->checksum);
        fmt_st32(r + 32, s->key_off);
        fmt_st16(r + 36, (uint16_t)s->key_len);
        r[38] = (uint8_t)s->codec;
        fmt_st32(r + 40, s->label);
        raw_sum += s->raw_len; /* wraps only for indexes the decoder rejects anyway */
        stored_sum += s->stored_len;
    }
    for (uint64_t c = 0; c < b->n_chunks; c++) {
        const fmt_chunk *ch = &b->chunks[c];
        if (v2) {
            fmt_index2_put_chunk(p + off[SEC_CHUNKS] + c * FMT_CHUNK_REC2_LEN, ch);
            raw_sum += ch->raw_bytes;
            stored_sum += ch->length - FMT_CHUNK_HEADER_LEN;
            continue;
        }
        uint8_t *r = p + off[SEC_CHUNKS] + c * FMT_CHUNK_REC_LEN;
        fmt_st64(r, ch->offset);
        fmt_st64(r + 8, ch->length);
        fmt_st32(r + 16, ch->segment);
        fmt_st32(r + 20, ch->n_samples);
        fmt_st64(r + 24, ch->header_checksum);
    }
    for (uint32_t f = 0; v2 && f < b->n_fields; f++) {
        fmt_index2_put_field(p + off[SEC_RECORDS] + (uint64_t)f * FMT_FIELD_REC_LEN,
                             &b->fields[f]);
    }
    for (uint32_t s = 0; s < b->n_segments; s++) {
        uint8_t *r = p + off[SEC_SEGMENTS] + (uint64_t)s * FMT_SEGMENT_REC_LEN;
        fmt_st64(r, b->segments[s].size);
        fmt_st64(r + 8, b->segments[s].n_chunks);
    }
    for (uint32_t l = 0; l < b->n_labels; l++) {
        uint8_t *r = p + off[SEC_LABELS] + (uint64_t)l * FMT_LABEL_REC_LEN;
        fmt_st32(r, b->labels[l].name_off);
        fmt_st32(r + 4, b->labels[l].name_len);
    }
    if (b->strings_len) {
        memcpy(p + off[SEC_STRINGS], b->strings, (size_t)b->strings_len);
    }
    if (b->dict_len) {
        memcpy(p + off[SEC_DICT], b->dict, (size_t)b->dict_len);
    }
    const fmt_header *h = &b->h;
    memcpy(p, IDX_MAGIC, 8);
    fmt_st16(p + 8, v2 ? 2 : 1);
    fmt_st16(p + 10, FMT_VERSION_MINOR);
    fmt_st32(p + 12, FMT_INDEX_HEADER_LEN);
    fmt_st64(p + 16, h->dataset_id);
    fmt_st64(p + 24, b->n_samples);
    fmt_st64(p + 32, b->n_chunks);
    fmt_st32(p + 40, h->chunk_size);
    fmt_st32(p + 44, b->n_labels);
    fmt_st32(p + 48, b->n_segments);
    fmt_st32(p + 52, h->flags);
    fmt_st64(p + 56, h->pack_seed);
    fmt_st64(p + 64, h->created);
    fmt_st64(p + 72, raw_sum);
    fmt_st64(p + 80, stored_sum);
    if (v2) {
        fmt_st32(p + IDX2_FIELDS_AT, b->n_fields);
        fmt_st32(p + IDX2_FIELDS_AT + 4, h->label_field);
        fmt_st64(p + IDX2_FIELDS_AT + 8, h->tables_bytes);
        fmt_st64(p + IDX2_FIELDS_AT + 16, h->keys_bytes);
    }
    for (int j = 0; j < SEC_COUNT; j++) {
        fmt_st64(p + IDX_SECTIONS_AT + 16u * (unsigned)j, off[j]);
        fmt_st64(p + IDX_SECTIONS_AT + 16u * (unsigned)j + 8, len[j]);
    }
    memcpy(p + total - FMT_INDEX_TRAILER_LEN, IDX_END_MAGIC, 8);
    fmt_st64(p + total - 8, fmt_checksum(p, (size_t)total - 8));

    fmt_index ix;
    const int rc = fmt_index_decode(p, (size_t)total, &ix);
    if (rc != HDMLP_OK) {
        hd_free(p);
        return hd_err_wrap(HDMLP_E_INVAL, "index encode: invalid input: ");
    }
    *out = p;
    *out_len = (size_t)total;
    return HDMLP_OK;
}
