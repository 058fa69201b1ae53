/*
 * libFuzzer target: the index decoder (versions 1 and 2) and version 2's sample tables and
 * key blocks, on arbitrary bytes.
 *
 * Input layout, so that the fuzzer mutates a dataset's three metadata files together:
 *
 *   0    4  index_length   I (u32 little-endian)
 *   4    4  tables_length  T (u32 little-endian)
 *   8    I  DIR/index
 *   8+I  T  DIR/tables
 *   ...     DIR/keys: the rest of the input
 *
 * Lengths that run past the end are cut to what is there. An input shorter than 8 bytes or
 * starting with the index magic "HDMLPIDX" is a bare index with empty tables and keys (the
 * layout of this target before version 2, so older corpora still mean something).
 *
 * Each part is copied to a heap buffer of exactly its size, so ASan sees any read past it.
 * The index is decoded as given; then with its trailing checksum recomputed; then, when that
 * decodes as version 2, with every chunk record's table_checksum and keys_checksum also
 * recomputed from the blobs (where they cover the chunk's range); then once more with every
 * inline value record's checksum recomputed too, so the fuzzer reaches the checks behind
 * each checksum. A decoded index must satisfy the invariants the loader relies
 * on (walk) and re-encode to an index that decodes to the same records (reencode). When a
 * version-2 index's tables_bytes and keys_bytes equal the blobs' sizes, every chunk's table
 * is expanded (fmt_table2_expand) and every key block checked and read (fmt_keys_check,
 * fmt_keys_at): the outcome must agree with an independent reading of FORMAT.md's rules,
 * and what is accepted must satisfy what the loader relies on. fmt_index2_raw_top_sum must
 * lie between what the chunk records (and, when the tables are valid, the tables) prove.
 *
 * Built with -DFUZZ_GEN_CORPUS instead of -fsanitize=fuzzer, main() writes the seed corpus
 * into the directory given as argv[1] (see run.sh --gen-corpus).
 */
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 255u /* a field name's length (FORMAT.md: fields) */
#define PREFIX_LEN 8u

static volatile uint8_t sink; /* bytes touched so ASan checks the read */

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_index: invariant violated: %s\n", what);
        abort();
    }
}

/* A heap copy of exactly n bytes (1 byte, unread, when n is 0). */
static uint8_t *copy_exact(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    check(c != NULL, "malloc");
    if (n) {
        memcpy(c, p, n);
    }
    return c;
}

static uint64_t add(uint64_t a, uint64_t b)
{
    uint64_t r;
    check(!__builtin_add_overflow(a, b, &r), "a total the decoder accepted overflows");
    return r;
}

/* ---- the index ------------------------------------------------------------------------ */

/* Version 2's fields: names inside strings and distinct, types and dtypes valid, the label
 * field an int64 with the label flag, the data field the single non-scalar one. */
static void walk_fields(const fmt_index *ix)
{
    const fmt_header *h = &ix->h;
    check(ix->fields != NULL && ix->samples == NULL && ix->chunk_rec_len == FMT_CHUNK_REC2_LEN,
          "version 2 sections");
    check(h->n_fields >= 1 && h->n_fields <= FMT_MAX_FIELDS, "n_fields");
    check(h->label_field == FMT_NO_FIELD || h->label_field < h->n_fields, "label_field");
    check(h->label_field == FMT_NO_FIELD || h->n_labels >= 1, "labels of the label field");
    uint32_t stored = 0, data = FMT_NO_FIELD;
    for (uint32_t f = 0; f < h->n_fields; f++) {
        fmt_field fd;
        fmt_index_field(ix, f, &fd);
        check(fd.name_len >= 1 && fd.name_len <= NAME_MAX_LEN &&
                  (uint64_t)fd.name_off + fd.name_len <= ix->strings_len,
              "field name inside strings");
        sink ^= ix->strings[fd.name_off + fd.name_len - 1];
        check(fd.type < FMT_FIELD_TYPES, "field type");
        if (fd.type == FMT_FIELD_NDARRAY) {
            check(fd.dtype != FMT_DTYPE_NONE && fd.dtype < FMT_DTYPES, "ndarray dtype");
            check(fd.ndim <= FMT_MAX_NDIM, "ndarray ndim");
        } else {
            check(fd.dtype == FMT_DTYPE_NONE && fd.ndim == 0, "dtype or ndim of a non-array");
        }
        for (unsigned d = fd.ndim; d < FMT_MAX_NDIM; d++) {
            check(fd.shape[d] == 0, "shape beyond ndim");
        }
        const bool label = (fd.flags & FMT_FIELD_LABEL) != 0;
        check(label == (f == h->label_field), "label flag on the label field alone");
        check(!label || fd.type == FMT_FIELD_INT64, "label field is int64");
        for (uint32_t g = 0; g < f; g++) {
            fmt_field o;
            fmt_index_field(ix, g, &o);
            check(o.name_len != fd.name_len ||
                      memcmp(ix->strings + o.name_off, ix->strings + fd.name_off,
                             fd.name_len) != 0,
                  "field names distinct");
        }
        if (!fmt_field_scalar(fd.type)) {
            stored++;
            data = f;
        }
    }
    check(ix->data_field == (stored == 1 ? data : FMT_NO_FIELD), "data field");
}

/* Version 1's samples of chunk c: inside the chunk, back to back, valid codec and label. */
static void walk_samples(const fmt_index *ix, uint64_t c, const fmt_chunk *ch, uint64_t *raw,
                         uint64_t *stored)
{
    uint64_t pos = FMT_CHUNK_HEADER_LEN;
    for (uint32_t j = 0; j < ch->n_samples; j++) {
        const uint64_t i = c * ix->h.chunk_size + j;
        fmt_sample s;
        fmt_index_sample(ix, i, &s);
        check(s.offset >= FMT_CHUNK_HEADER_LEN, "sample offset");
        check(s.offset <= ch->length && s.stored_len <= ch->length - s.offset,
              "sample in chunk");
        check(s.offset == pos, "samples back to back");
        pos = s.offset + s.stored_len;
        check(s.codec <= FMT_CODEC_ZSTD_DICT, "codec");
        check(s.codec != FMT_CODEC_NONE || s.raw_len == s.stored_len, "codec 0 lengths");
        check(s.codec != FMT_CODEC_ZSTD_DICT || ix->dict_len > 0, "dict");
        check(s.label < ix->h.n_labels, "label");
        check((uint64_t)s.key_off + s.key_len <= ix->strings_len, "key");
        if (s.key_len) {
            sink ^= ix->strings[s.key_off + s.key_len - 1];
        }
        *raw = add(*raw, s.raw_len);
        *stored = add(*stored, s.stored_len);
    }
    check(pos == ch->length, "samples fill the chunk");
}

/* Version 2's placement of chunk c's table and key block and its sizes. */
static void walk_chunk2(const fmt_index *ix, const fmt_chunk *ch, uint64_t *table_end,
                        uint64_t *keys_end, uint64_t *raw)
{
    check(ch->table_offset == *table_end, "tables back to back");
    *table_end = add(*table_end, fmt_table2_len(ix, ch));
    check(ch->keys_offset == *keys_end, "key blocks in order");
    check(ch->keys_length >= 4ull * ch->n_samples, "key block holds its lengths");
    *keys_end = add(add(ch->keys_offset, ch->keys_length), 7) & ~(uint64_t)7;
    uint64_t most;
    check(ch->max_raw <= ch->raw_bytes, "max_raw <= raw_bytes");
    check(__builtin_mul_overflow(ch->max_raw, (uint64_t)ch->n_samples, &most) ||
              ch->raw_bytes <= most,
          "raw_bytes <= max_raw * n_samples");
    *raw = add(*raw, ch->raw_bytes);
}

static uint64_t top_sum2(const fmt_index *ix, uint64_t m)
{
    const uint64_t v = fmt_index2_raw_top_sum(ix, m);
    check(v != UINT64_MAX, "raw_top_sum out of memory");
    return v;
}

static int desc_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The sum of the m largest of v[0..n) (sorted in place, decreasing). */
static uint64_t top_of(uint64_t *v, uint64_t n, uint64_t m)
{
    qsort(v, (size_t)n, sizeof(*v), desc_u64);
    uint64_t s = 0;
    for (uint64_t i = 0; i < n && i < m; i++) {
        s = add(s, v[i]);
    }
    return s;
}

/* fmt_index2_raw_top_sum against what is known of the samples: every chunk c holds a sample
 * of max_raw_c raw bytes, none holds a larger one, and the m largest together are at most
 * the raw bytes. `exact` (N sample sizes, or NULL when the tables are not known valid): the
 * true sizes, whose m largest the answer must bound. */
static void walk_top_sum(const fmt_index *ix, uint64_t *exact)
{
    const fmt_header *h = &ix->h;
    const uint64_t n = h->n_samples, k = h->chunk_size;
    uint64_t *maxes = malloc((size_t)h->n_chunks * sizeof(uint64_t));
    check(maxes != NULL, "malloc");
    for (uint64_t c = 0; c < h->n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        maxes[c] = ch.max_raw;
    }
    const uint64_t ms[] = {1, 2, 3, k - 1, k, k + 1, n / 2, n - 1, n, n + 1, UINT64_MAX};
    for (size_t j = 0; j < sizeof(ms) / sizeof(ms[0]); j++) {
        const uint64_t m = ms[j];
        if (m == 0) {
            continue;
        }
        /* A sample with fields is charged its field record: the head and entries more. */
        const uint64_t extra =
            ix->fielded ? fmt_frec_bound(0, h->n_fields) * (m < n ? m : n) : 0;
        const uint64_t got = top_sum2(ix, m) - extra;
        if (m >= n) {
            check(got == h->raw_bytes, "raw_top_sum(m >= N) is raw_bytes");
            continue;
        }
        const uint64_t lower = top_of(maxes, h->n_chunks, m); /* one sample per chunk */
        check(got >= lower, "raw_top_sum below the m largest chunks' max_raw");
        uint64_t upper;
        check(__builtin_mul_overflow(m, maxes[0], &upper) || got <= upper,
              "raw_top_sum above m x the largest max_raw");
        if (exact != NULL) {
            check(got >= top_of(exact, n, m), "raw_top_sum below the exact sum");
        }
    }
    free(maxes);
}

/* Walks a decoded index through the accessors, checking what the loader assumes. */
static void walk(const fmt_index *ix)
{
    const fmt_header *h = &ix->h;
    const bool v2 = h->major == 2;
    check(h->major == 1 || v2, "version");
    check(h->n_samples >= 1 && h->chunk_size >= 1 && h->n_segments >= 1, "counts");
    check(v2 || h->n_labels >= 1, "version 1 has labels");
    check(h->n_chunks == (h->n_samples - 1) / h->chunk_size + 1, "n_chunks");
    if (v2) {
        walk_fields(ix);
    } else {
        check(ix->samples != NULL && ix->fields == NULL && h->n_fields == 0 &&
                  h->label_field == FMT_NO_FIELD && h->tables_bytes == 0 &&
                  h->keys_bytes == 0 && ix->chunk_rec_len == FMT_CHUNK_REC_LEN,
              "version 1 sections");
    }
    uint64_t raw = 0, stored = 0, table_end = FMT_FILE_HEADER_LEN,
             keys_end = FMT_FILE_HEADER_LEN, seg_end = 0;
    uint32_t prev_seg = 0;
    for (uint64_t c = 0; c < h->n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        const uint64_t want_n =
            c + 1 < h->n_chunks ? h->chunk_size : h->n_samples - c * h->chunk_size;
        check(ch.n_samples == want_n, "chunk n_samples");
        check(ch.segment < h->n_segments, "chunk segment");
        check(ch.segment >= prev_seg, "chunks in segment order");
        if (ch.segment != prev_seg) {
            seg_end = 0;
        }
        fmt_segment seg;
        fmt_index_segment(ix, ch.segment, &seg);
        check(ch.offset % FMT_ALIGN == 0, "chunk alignment");
        check(ch.offset >= seg_end, "chunks do not overlap");
        check(ch.offset <= seg.size && ch.length <= seg.size - ch.offset, "chunk in segment");
        check(ch.length >= FMT_CHUNK_HEADER_LEN, "chunk length");
        seg_end = ch.offset + ch.length;
        prev_seg = ch.segment;
        if (v2) {
            walk_chunk2(ix, &ch, &table_end, &keys_end, &raw);
            stored = add(stored, ch.length - FMT_CHUNK_HEADER_LEN);
        } else {
            walk_samples(ix, c, &ch, &raw, &stored);
        }
    }
    check(raw == h->raw_bytes && stored == h->stored_bytes, "byte totals");
    if (h->major == 2) { /* version 1 has neither file (both sizes 0, checked above) */
        check(table_end == h->tables_bytes, "tables_bytes is where the last table ends");
        check(keys_end == h->keys_bytes, "keys_bytes is where the last key block ends");
    }
    for (uint32_t l = 0; l < h->n_labels; l++) {
        fmt_label lab;
        fmt_index_label(ix, l, &lab);
        check((uint64_t)lab.name_off + lab.name_len <= ix->strings_len, "label name");
        if (lab.name_len) {
            sink ^= ix->strings[lab.name_off + lab.name_len - 1];
        }
    }
    if (ix->dict_len) {
        sink ^= ix->dict[ix->dict_len - 1];
    }
    if (v2) {
        walk_top_sum(ix, NULL);
    }
}

static bool same_sample(const fmt_sample *a, const fmt_sample *b)
{
    return a->offset == b->offset && a->stored_len == b->stored_len &&
           a->raw_len == b->raw_len && a->checksum == b->checksum && a->key_off == b->key_off &&
           a->key_len == b->key_len && a->codec == b->codec && a->label == b->label;
}

/* decode(encode(records of ix)) must succeed and give the same records. */
static void reencode(const fmt_index *ix)
{
    const fmt_header *h = &ix->h;
    const bool v2 = h->major == 2;
    const uint64_t ns = v2 ? 0 : h->n_samples;
    fmt_sample *samples = malloc((size_t)(ns ? ns : 1) * sizeof(*samples));
    fmt_field *fields = malloc((size_t)(v2 ? h->n_fields : 1) * sizeof(*fields));
    fmt_chunk *chunks = malloc((size_t)h->n_chunks * sizeof(*chunks));
    fmt_segment *segments = malloc((size_t)h->n_segments * sizeof(*segments));
    fmt_label *labels = malloc((size_t)(h->n_labels ? h->n_labels : 1) * sizeof(*labels));
    check(samples && fields && chunks && segments && labels, "malloc");
    for (uint64_t i = 0; i < ns; i++) {
        fmt_index_sample(ix, i, &samples[i]);
    }
    for (uint32_t f = 0; v2 && f < h->n_fields; f++) {
        memset(&fields[f], 0, sizeof(fields[f]));
        fmt_index_field(ix, f, &fields[f]);
        /* a newer minor may set flags this version does not write */
        fields[f].flags &= FMT_FIELD_REQUIRED | FMT_FIELD_LABEL;
    }
    for (uint64_t c = 0; c < h->n_chunks; c++) {
        fmt_index_chunk(ix, c, &chunks[c]);
    }
    for (uint32_t s = 0; s < h->n_segments; s++) {
        fmt_index_segment(ix, s, &segments[s]);
    }
    for (uint32_t l = 0; l < h->n_labels; l++) {
        fmt_index_label(ix, l, &labels[l]);
    }
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.h = *h; /* version 2: label_field, tables_bytes, keys_bytes */
    b.h.flags = 0;
    b.version = v2 ? 2 : 1;
    b.samples = v2 ? NULL : samples;
    b.n_samples = h->n_samples;
    b.fields = v2 ? fields : NULL;
    b.n_fields = v2 ? h->n_fields : 0;
    b.chunks = chunks;
    b.n_chunks = h->n_chunks;
    b.segments = segments;
    b.n_segments = h->n_segments;
    b.labels = labels;
    b.n_labels = h->n_labels;
    b.strings = ix->strings;
    b.strings_len = ix->strings_len;
    b.dict = ix->dict;
    b.dict_len = ix->dict_len;
    uint8_t *out = NULL;
    size_t len = 0;
    check(fmt_index_encode(&b, &out, &len) == HDMLP_OK, "re-encode");
    fmt_index a;
    check(fmt_index_decode(out, len, &a) == HDMLP_OK, "decode of re-encoded index");
    const fmt_header *g = &a.h;
    check(g->major == h->major && g->dataset_id == h->dataset_id &&
              g->n_samples == h->n_samples && g->n_chunks == h->n_chunks &&
              g->chunk_size == h->chunk_size && g->n_labels == h->n_labels &&
              g->n_segments == h->n_segments && g->pack_seed == h->pack_seed &&
              g->created == h->created && g->raw_bytes == h->raw_bytes &&
              g->stored_bytes == h->stored_bytes && g->n_fields == h->n_fields &&
              g->label_field == h->label_field && g->tables_bytes == h->tables_bytes &&
              g->keys_bytes == h->keys_bytes && a.data_field == ix->data_field,
          "re-encoded header");
    for (uint64_t i = 0; i < ns; i++) {
        fmt_sample s;
        fmt_index_sample(&a, i, &s);
        check(same_sample(&s, &samples[i]), "re-encoded sample");
    }
    for (uint32_t f = 0; v2 && f < h->n_fields; f++) {
        fmt_field fd;
        memset(&fd, 0, sizeof(fd));
        fmt_index_field(&a, f, &fd);
        check(memcmp(&fd, &fields[f], sizeof(fd)) == 0, "re-encoded field");
    }
    for (uint64_t c = 0; c < h->n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(&a, c, &ch);
        check(memcmp(&ch, &chunks[c], sizeof(ch)) == 0, "re-encoded chunk");
    }
    for (uint32_t s = 0; s < h->n_segments; s++) {
        fmt_segment seg;
        fmt_index_segment(&a, s, &seg);
        check(seg.size == segments[s].size && seg.n_chunks == segments[s].n_chunks,
              "re-encoded segment");
    }
    for (uint32_t l = 0; l < h->n_labels; l++) {
        fmt_label lab;
        fmt_index_label(&a, l, &lab);
        check(lab.name_off == labels[l].name_off && lab.name_len == labels[l].name_len,
              "re-encoded label");
    }
    check(a.strings_len == ix->strings_len && a.dict_len == ix->dict_len &&
              (!a.strings_len || memcmp(a.strings, ix->strings, a.strings_len) == 0) &&
              (!a.dict_len || memcmp(a.dict, ix->dict, a.dict_len) == 0),
          "re-encoded strings and dict");
    hd_free(out);
    free(samples);
    free(fields);
    free(chunks);
    free(segments);
    free(labels);
}

/* ---- version 2: sample tables --------------------------------------------------------- */

/* An independent reading of value record r (field f, fd) by FORMAT.md's rules. */
static bool value_valid(const fmt_index *ix, uint32_t f, const fmt_field *fd, const uint8_t *r)
{
    const uint8_t codec = r[12], state = r[13];
    if (r[14] != 0 || r[15] != 0) {
        return false;
    }
    const bool scalar = fmt_field_scalar(fd->type);
    if (state == FMT_VALUE_ABSENT) {
        for (int j = 0; j < 13; j++) {
            if (r[j] != 0) {
                return false;
            }
        }
        return (fd->flags & FMT_FIELD_REQUIRED) == 0;
    }
    if (state == FMT_VALUE_INLINE) {
        const uint64_t bits = fmt_ld64(r);
        return scalar && codec == 0 && (fmt_checksum(r, 8) & UINT32_MAX) == fmt_ld32(r + 8) &&
               (f != ix->h.label_field || bits < ix->h.n_labels) &&
               (fd->type != FMT_FIELD_FLOAT32 || bits >> 32 == 0);
    }
    if (state == FMT_VALUE_STORED) {
        return !scalar && codec <= FMT_CODEC_ZSTD_DICT &&
               (codec != FMT_CODEC_ZSTD_DICT || ix->dict_len > 0) &&
               (codec != FMT_CODEC_NONE || fmt_ld32(r) == fmt_ld32(r + 4));
    }
    return false;
}

/* Chunk c's table (raw, fmt_table2_len bytes; its checksum aside) read independently:
 * whether every record is valid and the values give the chunk record's length, raw_bytes
 * and max_raw. Each sample's raw size goes to sample_raw[t]. */
static bool table_valid(const fmt_index *ix, const fmt_chunk *ch, const fmt_field *fds,
                        const uint8_t *raw, uint64_t *sample_raw)
{
    const uint32_t nf = ix->h.n_fields;
    bool ok = true;
    uint64_t pos = FMT_CHUNK_HEADER_LEN, total = 0, most = 0;
    for (uint32_t t = 0; t < ch->n_samples; t++) {
        uint64_t s = 0;
        for (uint32_t f = 0; f < nf; f++) {
            const uint8_t *r = raw + ((size_t)t * nf + f) * FMT_VALUE_REC_LEN;
            ok = ok && value_valid(ix, f, &fds[f], r);
            if (r[13] != FMT_VALUE_INLINE) {
                pos += fmt_ld32(r);
                s += fmt_ld32(r + 4);
            }
        }
        sample_raw[t] = s;
        total += s;
        most = s > most ? s : most;
    }
    return ok && pos == ch->length && total == ch->raw_bytes && most == ch->max_raw;
}

/* What the loader relies on in chunk c's expanded records, and that they say what the
 * table says (data field's lengths, codec and checksum; the label field's value). */
static void check_expanded(const fmt_index *ix, uint64_t c, const fmt_chunk *ch,
                           const uint8_t *raw, const uint8_t *rec, const fmt_table *tab)
{
    const fmt_header *h = &ix->h;
    const uint32_t nf = h->n_fields, df = ix->data_field;
    check(tab->rec == rec && tab->chunk == c && tab->first == c * h->chunk_size &&
              tab->n == ch->n_samples,
          "table view");
    const uint32_t empty_sum = (uint32_t)fmt_checksum(NULL, 0);
    uint64_t pos = FMT_CHUNK_HEADER_LEN;
    for (uint32_t t = 0; t < tab->n; t++) {
        fmt_sample s;
        fmt_table_sample(tab, t, &s);
        check(s.offset >= FMT_CHUNK_HEADER_LEN, "expanded offset >= 64");
        check(s.offset <= ch->length && s.stored_len <= ch->length - s.offset,
              "expanded sample inside its chunk");
        check(s.offset == pos, "expanded records back to back");
        pos = s.offset + s.stored_len;
        if (ix->fielded) { /* a field record's: every stored value's, its own length */
            const uint8_t *vals = raw + (size_t)t * nf * FMT_VALUE_REC_LEN;
            check(s.codec == FMT_CODEC_FIELDS && s.stored_len == fmt_vals_stored(vals, nf) &&
                      s.raw_len == fmt_frec_len(vals, nf) &&
                      s.raw_len <= fmt_frec_bound(ch->max_raw, nf),
                  "expanded record of a sample with fields");
            continue;
        }
        check(s.codec <= FMT_CODEC_ZSTD_DICT, "expanded codec");
        check(s.codec != FMT_CODEC_NONE || s.stored_len == s.raw_len, "expanded codec 0");
        check(s.codec != FMT_CODEC_ZSTD_DICT || ix->dict_len > 0, "expanded dict");
        check(h->label_field == FMT_NO_FIELD ? s.label == 0 : s.label < h->n_labels,
              "expanded label");
        check(s.sum32 == 1, "expanded checksum is 32-bit");
        const uint8_t *d = raw + ((size_t)t * nf + df) * FMT_VALUE_REC_LEN;
        const bool stored = d[13] == FMT_VALUE_STORED;
        check(s.stored_len == fmt_ld32(d) && s.raw_len == fmt_ld32(d + 4) && s.codec == d[12] &&
                  s.checksum == (stored ? fmt_ld32(d + 8) : empty_sum),
              "expanded record is the data field's value");
        uint64_t label = 0;
        if (h->label_field != FMT_NO_FIELD) {
            const uint8_t *l = raw + ((size_t)t * nf + h->label_field) * FMT_VALUE_REC_LEN;
            label = l[13] == FMT_VALUE_INLINE ? fmt_ld64(l) : 0;
        }
        check(s.label == label, "expanded label is the label field's value");
    }
    check(pos == ch->length, "expanded records fill the chunk");
}

/* Every chunk's table: fmt_table2_expand's answer against table_valid's, the expansion
 * against check_expanded. True when every table is valid (sample_raw then holds every
 * sample's raw size). */
static bool exercise_tables(const fmt_index *ix, const uint8_t *tables, uint64_t *sample_raw)
{
    const fmt_header *h = &ix->h;
    fmt_field fds[FMT_MAX_FIELDS];
    for (uint32_t f = 0; f < h->n_fields; f++) {
        fmt_index_field(ix, f, &fds[f]);
    }
    const size_t scratch = fmt_table2_scratch(ix);
    bool all = true;
    for (uint64_t c = 0; c < h->n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        const uint64_t len = fmt_table2_len(ix, &ch);
        /* The loader's buffer of fmt_table2_scratch bytes holds the table as read then K
         * offsets (fmt_table2_view); here each is a buffer of its own, of exactly the chunk's
         * size, so ASan sees a read past the table or a write past the n_c records (and a
         * 1-chunk dataset's K of up to 2^20 costs nothing). */
        check(len + (uint64_t)h->chunk_size * sizeof(uint64_t) <= scratch, "scratch size");
        uint8_t *raw = copy_exact(tables + ch.table_offset, (size_t)len);
        uint8_t *rec = malloc((size_t)ch.n_samples * FMT_SAMPLE_REC_LEN);
        check(rec != NULL, "malloc");
        const bool sum_ok = fmt_checksum(raw, (size_t)len) == ch.table_checksum;
        const bool valid =
            table_valid(ix, &ch, fds, raw, sample_raw + c * h->chunk_size) && sum_ok;
        all = all && valid;
        fmt_table tab;
        const int rc = fmt_table2_expand(ix, c, raw, rec, &tab);
        const char *e = hdmlp_last_error();
        check(rc == HDMLP_OK || (e != NULL && e[0] != '\0'), "table error detail");
        if (!valid) {
            check(rc == HDMLP_E_CORRUPT, "expand accepts a table FORMAT.md refuses");
        } else {
            check(rc == HDMLP_OK, "expand refuses a valid table");
            check_expanded(ix, c, &ch, raw, rec, &tab);
        }
        free(raw);
        free(rec);
    }
    fmt_table tab;
    check(fmt_table2_expand(ix, h->n_chunks, tables, NULL, &tab) == HDMLP_E_RANGE,
          "expand of chunk C");
    return all;
}

/* Every chunk's key block: fmt_keys_check's answer against an independent reading, then
 * every key through fmt_keys_at, inside the block and back to back. */
static void exercise_keys(const fmt_index *ix, const uint8_t *keys)
{
    for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        const uint64_t len = ch.keys_length, n = ch.n_samples;
        uint8_t *blk = copy_exact(keys + ch.keys_offset, (size_t)len);
        bool valid = fmt_checksum(blk, (size_t)len) == ch.keys_checksum;
        uint64_t total = 4 * n;
        for (uint64_t t = 0; t < n; t++) {
            const uint32_t k = fmt_ld32(blk + 4 * t);
            valid = valid && k <= FMT_MAX_KEY_LEN;
            total += k;
        }
        valid = valid && total == len;
        const int rc = fmt_keys_check(ix, c, blk, len);
        const char *e = hdmlp_last_error();
        check(rc == HDMLP_OK || (e != NULL && e[0] != '\0'), "key block error detail");
        check(rc == (valid ? HDMLP_OK : HDMLP_E_CORRUPT), "fmt_keys_check's answer");
        check(fmt_keys_check(ix, c, blk, len - 1) == HDMLP_E_CORRUPT, "key block length");
        uint64_t at = 4 * n;
        for (uint32_t t = 0; valid && t < n; t++) {
            const uint8_t *key;
            uint32_t klen;
            fmt_keys_at(blk, (uint32_t)n, t, &key, &klen);
            check(key == blk + at && klen == fmt_ld32(blk + 4ull * t) && klen <= len - at,
                  "key inside its block");
            if (klen) {
                sink ^= key[0] ^ key[klen - 1];
            }
            at += klen;
        }
        check(!valid || at == len, "keys fill the block");
        free(blk);
    }
}

/* ---- driver --------------------------------------------------------------------------- */

/* Decodes the index (idx, exactly ilen bytes) and checks what decodes. Returns the decode's
 * status; *out is the decoded view. */
static int exercise(const uint8_t *idx, size_t ilen, const uint8_t *tables, size_t tlen,
                    const uint8_t *keys, size_t klen, fmt_index *out)
{
    fmt_index ix;
    const int rc = fmt_index_decode(idx, ilen, &ix);
    check(rc == HDMLP_OK || rc == HDMLP_E_CORRUPT || rc == HDMLP_E_VERSION, "return code");
    check(hdmlp_last_error() != NULL, "error detail");
    *out = ix;
    if (rc != HDMLP_OK) {
        return rc;
    }
    walk(&ix);
    reencode(&ix);
    fmt_decoder *d = NULL;
    if (fmt_decoder_create(&ix, &d) == HDMLP_OK) {
        fmt_decoder_free(d);
    }
    if (ix.h.major == 2 && ix.h.tables_bytes == tlen && ix.h.keys_bytes == klen) {
        uint64_t *sizes = malloc((size_t)ix.h.n_samples * sizeof(uint64_t));
        check(sizes != NULL, "malloc");
        const bool valid = exercise_tables(&ix, tables, sizes);
        exercise_keys(&ix, keys);
        /* The files' headers: accepted exactly when magic and dataset id match. */
        const int th = fmt_file_header_check(&ix, "tables", FMT_TABLES_MAGIC, tables, tlen);
        check(th == (memcmp(tables, FMT_TABLES_MAGIC, 8) == 0 &&
                             fmt_ld64(tables + 8) == ix.h.dataset_id
                         ? HDMLP_OK
                         : HDMLP_E_CORRUPT),
              "tables header");
        const int kh = fmt_file_header_check(&ix, "keys", FMT_KEYS_MAGIC, keys, klen);
        check(kh ==
                  (memcmp(keys, FMT_KEYS_MAGIC, 8) == 0 && fmt_ld64(keys + 8) == ix.h.dataset_id
                       ? HDMLP_OK
                       : HDMLP_E_CORRUPT),
              "keys header");
        walk_top_sum(&ix, valid ? sizes : NULL);
        free(sizes);
    }
    return rc;
}

/* Recomputes the checksum of every inline value record in the tables blob. False when
 * nothing changed. */
static bool fix_inline(uint8_t *tables, size_t tlen)
{
    bool changed = false;
    for (size_t off = FMT_FILE_HEADER_LEN; off + FMT_VALUE_REC_LEN <= tlen;
         off += FMT_VALUE_REC_LEN) {
        uint8_t *r = tables + off;
        const uint32_t sum = (uint32_t)fmt_checksum(r, 8);
        if (r[13] == FMT_VALUE_INLINE && fmt_ld32(r + 8) != sum) {
            fmt_st32(r + 8, sum);
            changed = true;
        }
    }
    return changed;
}

/* Recomputes the chunk records' table and key-block checksums from the blobs (each where
 * the blob covers it), then the index checksum. False when nothing changed. */
static bool fix_checksums(uint8_t *idx, size_t ilen, const fmt_index *ix, const uint8_t *tables,
                          size_t tlen, const uint8_t *keys, size_t klen)
{
    bool changed = false;
    for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        uint8_t *r = idx + (size_t)(ix->chunks - idx) + c * FMT_CHUNK_REC2_LEN;
        const uint64_t tl = fmt_table2_len(ix, &ch);
        if (ch.table_offset <= tlen && tl <= tlen - ch.table_offset) {
            const uint64_t sum = fmt_checksum(tables + ch.table_offset, (size_t)tl);
            changed = changed || sum != ch.table_checksum;
            fmt_st64(r + 40, sum);
        }
        if (ch.keys_offset <= klen && ch.keys_length <= klen - ch.keys_offset) {
            const uint64_t sum = fmt_checksum(keys + ch.keys_offset, (size_t)ch.keys_length);
            changed = changed || sum != ch.keys_checksum;
            fmt_st64(r + 64, sum);
        }
    }
    fmt_st64(idx + ilen - 8, fmt_checksum(idx, ilen - 8));
    return changed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t ilen = size, tlen = 0, klen = 0;
    const uint8_t *ip = data;
    if (size >= PREFIX_LEN && memcmp(data, "HDMLPIDX", 8) != 0) {
        const size_t rest = size - PREFIX_LEN;
        ilen = fmt_ld32(data) < rest ? fmt_ld32(data) : rest;
        tlen = fmt_ld32(data + 4) < rest - ilen ? fmt_ld32(data + 4) : rest - ilen;
        klen = rest - ilen - tlen;
        ip = data + PREFIX_LEN;
    }
    /* The input as a field record (what hdmlp_sample_field reads from callers' bytes): a
     * field it gives lies inside it. */
    for (uint32_t f = 0; f < 4; f++) {
        fmt_frec_value v;
        if (fmt_frec_field(data, size, f, &v) == HDMLP_OK && v.state == FMT_VALUE_STORED) {
            check((const uint8_t *)v.data >= data && v.size <= size &&
                      (const uint8_t *)v.data - data <= (ptrdiff_t)(size - v.size),
                  "a field record's value inside it");
        }
    }
    uint8_t *idx = copy_exact(ip, ilen);
    uint8_t *tables = copy_exact(ip + ilen, tlen);
    uint8_t *keys = copy_exact(ip + ilen + tlen, klen);
    fmt_index ix;
    exercise(idx, ilen, tables, tlen, keys, klen, &ix);
    if (ilen >= FMT_INDEX_TRAILER_LEN) {
        fmt_st64(idx + ilen - 8, fmt_checksum(idx, ilen - 8));
        if (exercise(idx, ilen, tables, tlen, keys, klen, &ix) == HDMLP_OK && ix.h.major == 2) {
            /* past the tables' and key blocks' checksums, then the inline values' too */
            if (fix_checksums(idx, ilen, &ix, tables, tlen, keys, klen)) {
                check(exercise(idx, ilen, tables, tlen, keys, klen, &ix) == HDMLP_OK,
                      "decode after the chunk records' checksums were recomputed");
            }
            if (fix_inline(tables, tlen) &&
                fix_checksums(idx, ilen, &ix, tables, tlen, keys, klen)) {
                check(exercise(idx, ilen, tables, tlen, keys, klen, &ix) == HDMLP_OK,
                      "decode after the inline values' checksums were recomputed");
            }
        }
    }
    free(idx);
    free(tables);
    free(keys);
    return 0;
}

#ifdef FUZZ_GEN_CORPUS
/* Seed corpus: small valid datasets of several shapes, in the input layout above. */

static void write_seed(const char *dir, const char *name, bool bare, const uint8_t *index,
                       size_t ilen, const uint8_t *tables, size_t tlen, const uint8_t *keys,
                       size_t klen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    uint8_t prefix[PREFIX_LEN];
    fmt_st32(prefix, (uint32_t)ilen);
    fmt_st32(prefix + 4, (uint32_t)tlen);
    check(PREFIX_LEN + ilen + tlen + klen < 8192, "seed size");
    const size_t plen = bare ? 0 : PREFIX_LEN;
    FILE *f = fopen(path, "wb");
    check(f != NULL && fwrite(prefix, 1, plen, f) == plen &&
              fwrite(index, 1, ilen, f) == ilen && fwrite(tables, 1, tlen, f) == tlen &&
              fwrite(keys, 1, klen, f) == klen && fclose(f) == 0,
          "write seed");
}

static const uint8_t dict_bytes[] = "raw dictionary content for the seed corpus";

/* Places n_chunks chunks of the given lengths, per_seg to a segment. */
static uint32_t place(fmt_chunk *chunks, uint64_t n_chunks, uint32_t per_seg,
                      fmt_segment *segments)
{
    const uint32_t n_seg = (uint32_t)((n_chunks + per_seg - 1) / per_seg);
    memset(segments, 0, n_seg * sizeof(*segments));
    uint64_t off = 0;
    for (uint64_t c = 0; c < n_chunks; c++) {
        const uint32_t seg = (uint32_t)(c / per_seg);
        off = c % per_seg == 0 ? 0 : off;
        uint8_t hdr[FMT_CHUNK_HEADER_LEN];
        chunks[c].offset = off;
        chunks[c].segment = seg;
        chunks[c].header_checksum = fmt_chunk_header_encode(
            hdr, 77, c, chunks[c].n_samples, chunks[c].length - FMT_CHUNK_HEADER_LEN);
        off += fmt_align_up(chunks[c].length);
        segments[seg].size = off;
        segments[seg].n_chunks++;
    }
    return n_seg;
}

/* Version 1: n samples, chunks of k (bare: the index alone, without the prefix). */
static void gen(const char *dir, const char *name, uint64_t n, uint32_t k, uint32_t per_seg,
                uint32_t n_labels, bool dict, bool bare)
{
    static fmt_sample samples[64];
    static fmt_chunk chunks[64];
    static fmt_segment segments[64];
    static fmt_label labels[8];
    static uint8_t strings[1024];
    size_t slen = 0;
    const uint64_t n_chunks = (n + k - 1) / k;
    for (uint64_t i = 0; i < n; i++) {
        fmt_sample *s = &samples[i];
        s->stored_len = (i * 5) % 9;
        s->codec = (uint32_t)(i % (dict ? 3 : 2));
        s->raw_len = s->codec ? s->stored_len * 2 + 1 : s->stored_len;
        s->checksum = i * 0x9e3779b97f4a7c15ull;
        s->label = (uint32_t)(i % n_labels);
        s->key_off = (uint32_t)slen;
        s->key_len =
            (uint32_t)snprintf((char *)strings + slen, 16, "key%llu", (unsigned long long)i);
        slen += s->key_len;
    }
    for (uint32_t l = 0; l < n_labels; l++) {
        labels[l].name_off = (uint32_t)slen;
        labels[l].name_len = (uint32_t)snprintf((char *)strings + slen, 16, "class%u", l);
        slen += labels[l].name_len;
    }
    for (uint64_t c = 0; c < n_chunks; c++) {
        const uint32_t cnt = (uint32_t)(c + 1 < n_chunks ? k : n - c * k);
        uint64_t pos = FMT_CHUNK_HEADER_LEN;
        for (uint32_t j = 0; j < cnt; j++) {
            samples[c * k + j].offset = pos;
            pos += samples[c * k + j].stored_len;
        }
        chunks[c] = (fmt_chunk){.length = pos, .n_samples = cnt};
    }
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.h.dataset_id = 77;
    b.h.chunk_size = k;
    b.h.pack_seed = 5;
    b.samples = samples;
    b.n_samples = n;
    b.chunks = chunks;
    b.n_chunks = n_chunks;
    b.segments = segments;
    b.n_segments = place(chunks, n_chunks, per_seg, segments);
    b.labels = labels;
    b.n_labels = n_labels;
    b.strings = strings;
    b.strings_len = slen;
    b.dict = dict ? dict_bytes : NULL;
    b.dict_len = dict ? sizeof(dict_bytes) - 1 : 0;
    uint8_t *out;
    size_t len;
    check(fmt_index_encode(&b, &out, &len) == HDMLP_OK, hdmlp_last_error());
    write_seed(dir, name, bare, out, len, NULL, 0, NULL, 0);
    hd_free(out);
}

/* A version-2 field of a seed: flags FMT_FIELD_REQUIRED / FMT_FIELD_LABEL. */
typedef struct seed_field {
    const char *name;
    uint8_t type, dtype, ndim, flags;
    uint32_t shape[FMT_MAX_NDIM];
} seed_field;

/* Sample i's value of field f (fd): absent in every third sample of an optional field,
 * inline for scalars (the label field: i mod L), else stored with codecs cycling. */
static fmt_value seed_value(uint64_t i, uint32_t f, const seed_field *fd, uint32_t n_labels,
                            bool dict)
{
    fmt_value v;
    memset(&v, 0, sizeof(v));
    if (!(fd->flags & FMT_FIELD_REQUIRED) && i % 3 == 1) {
        return v; /* absent */
    }
    if (fmt_field_scalar(fd->type)) {
        v.state = FMT_VALUE_INLINE;
        if (fd->flags & FMT_FIELD_LABEL) {
            v.inline_bits = i % n_labels;
        } else if (fd->type == FMT_FIELD_FLOAT32) {
            const float x = (float)i * 0.5f;
            uint32_t u;
            memcpy(&u, &x, 4);
            v.inline_bits = u;
        } else if (fd->type == FMT_FIELD_FLOAT64) {
            const double x = (double)i * 0.25;
            memcpy(&v.inline_bits, &x, 8);
        } else {
            v.inline_bits = (uint64_t) - (int64_t)(i * 7);
        }
        uint8_t bits[8];
        fmt_st64(bits, v.inline_bits);
        v.checksum = (uint32_t)fmt_checksum(bits, 8);
        return v;
    }
    v.state = FMT_VALUE_STORED;
    v.stored_len = (i * 5 + f * 3) % 9;
    v.codec = (uint8_t)((i + f) % (dict ? 3 : 2));
    v.raw_len = v.codec ? v.stored_len * 2 + 1 : v.stored_len;
    v.checksum = (uint32_t)(i * 0x9e3779b9u + f);
    return v;
}

/* Version 2: n samples, chunks of k, the given fields (label_field: the one flagged). */
static void gen2(const char *dir, const char *name, uint64_t n, uint32_t k, uint32_t per_seg,
                 uint32_t n_labels, const seed_field *sf, uint32_t nf, bool dict)
{
    static fmt_field fields[8];
    static fmt_chunk chunks[32];
    static fmt_segment segments[32];
    static fmt_label labels[8];
    static uint8_t strings[1024], tables[4096], keys[2048];
    size_t slen = 0, tlen = 0, klen = 0;
    uint32_t label_field = FMT_NO_FIELD;
    check(nf <= 8 && n_labels <= 8 && n <= 32 && n * nf * FMT_VALUE_REC_LEN <= sizeof(tables),
          "seed buffers"); /* keys: at most 8 + 4 + 24 bytes a sample */
    for (uint32_t f = 0; f < nf; f++) {
        const size_t len = strlen(sf[f].name);
        fields[f] = (fmt_field){.name_off = (uint32_t)slen,
                                .name_len = (uint32_t)len,
                                .type = sf[f].type,
                                .dtype = sf[f].dtype,
                                .ndim = sf[f].ndim,
                                .flags = sf[f].flags};
        memcpy(fields[f].shape, sf[f].shape, sizeof(fields[f].shape));
        memcpy(strings + slen, sf[f].name, len);
        slen += len;
        label_field = sf[f].flags & FMT_FIELD_LABEL ? f : label_field;
    }
    for (uint32_t l = 0; l < n_labels; l++) {
        labels[l].name_off = (uint32_t)slen;
        labels[l].name_len = (uint32_t)snprintf((char *)strings + slen, 16, "class%u", l);
        slen += labels[l].name_len;
    }
    const uint64_t n_chunks = (n + k - 1) / k;
    fmt_file_header_encode(tables, FMT_TABLES_MAGIC, 77); /* the dataset id of every seed */
    fmt_file_header_encode(keys, FMT_KEYS_MAGIC, 77);
    tlen = klen = FMT_FILE_HEADER_LEN;
    for (uint64_t c = 0; c < n_chunks; c++) {
        fmt_chunk *ch = &chunks[c];
        memset(ch, 0, sizeof(*ch));
        ch->n_samples = (uint32_t)(c + 1 < n_chunks ? k : n - c * k);
        ch->length = FMT_CHUNK_HEADER_LEN;
        ch->table_offset = tlen;
        ch->keys_offset = klen;
        size_t at = klen + 4 * ch->n_samples; /* where the keys start */
        for (uint32_t t = 0; t < ch->n_samples; t++) {
            const uint64_t i = c * k + t;
            uint64_t sample_raw = 0;
            for (uint32_t f = 0; f < nf; f++) {
                const fmt_value v = seed_value(i, f, &sf[f], n_labels, dict);
                fmt_value_encode(tables + tlen, &v);
                tlen += FMT_VALUE_REC_LEN;
                ch->length += v.stored_len;
                sample_raw += v.raw_len;
            }
            ch->raw_bytes += sample_raw;
            ch->max_raw = sample_raw > ch->max_raw ? sample_raw : ch->max_raw;
            /* every fourth key empty */
            const int kl = i % 4 == 3
                               ? 0
                               : snprintf((char *)keys + at, 24, "dir%llu/s%llu.bin",
                                          (unsigned long long)(i % 3), (unsigned long long)i);
            fmt_st32(keys + klen + 4 * t, (uint32_t)kl);
            at += (size_t)kl;
        }
        ch->table_checksum =
            fmt_checksum(tables + ch->table_offset, tlen - (size_t)ch->table_offset);
        ch->keys_length = at - klen;
        ch->keys_checksum = fmt_checksum(keys + klen, (size_t)ch->keys_length);
        klen = (at + 7) & ~(size_t)7; /* the padding stays zero */
    }
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.version = 2;
    b.h.dataset_id = 77;
    b.h.chunk_size = k;
    b.h.pack_seed = 5;
    b.h.label_field = label_field;
    b.h.tables_bytes = tlen;
    b.h.keys_bytes = klen;
    b.n_samples = n;
    b.fields = fields;
    b.n_fields = nf;
    b.chunks = chunks;
    b.n_chunks = n_chunks;
    b.segments = segments;
    b.n_segments = place(chunks, n_chunks, per_seg, segments);
    b.labels = labels;
    b.n_labels = n_labels;
    b.strings = strings;
    b.strings_len = slen;
    b.dict = dict ? dict_bytes : NULL;
    b.dict_len = dict ? sizeof(dict_bytes) - 1 : 0;
    uint8_t *out;
    size_t len;
    check(fmt_index_encode(&b, &out, &len) == HDMLP_OK, hdmlp_last_error());
    write_seed(dir, name, false, out, len, tables, tlen, keys, klen);
    hd_free(out);
}

int main(int argc, char **argv)
{
    check(argc == 2, "usage: gen DIR");
    const char *dir = argv[1];
    gen(dir, "one-sample", 1, 1, 1, 1, false, false);
    gen(dir, "k3-two-segments", 10, 3, 2, 3, false, false);
    gen(dir, "k4-dict", 9, 4, 4, 2, true, false);
    gen(dir, "k1-chunk-per-segment", 5, 1, 1, 2, true, false);
    gen(dir, "k8-one-segment", 40, 8, 100, 5, false, false);
    gen(dir, "bare-k3-two-segments", 10, 3, 2, 3, false, true); /* the layout before v2 */

    const uint8_t req = FMT_FIELD_REQUIRED, lab = FMT_FIELD_REQUIRED | FMT_FIELD_LABEL;
    const seed_field bytes_label[] = {{"data", FMT_FIELD_BYTES, 0, 0, req, {0}},
                                      {"label", FMT_FIELD_INT64, 0, 0, lab, {0}}};
    gen2(dir, "v2-one-sample", 1, 1, 1, 1, bytes_label, 2, false);
    gen2(dir, "v2-k3-two-segments", 10, 3, 2, 3, bytes_label, 2, false);
    gen2(dir, "v2-k4-dict", 9, 4, 4, 2, bytes_label, 2, true);
    /* the image optional (absent in samples 1, 4, ...) and an optional float32 */
    const seed_field optional[] = {{"weight", FMT_FIELD_FLOAT32, 0, 0, 0, {0}},
                                   {"image", FMT_FIELD_IMAGE, 0, 0, 0, {0}},
                                   {"label", FMT_FIELD_INT64, 0, 0, lab, {0}}};
    gen2(dir, "v2-absent-optional", 7, 4, 1, 2, optional, 3, false);
    const seed_field text_label[] = {{"label", FMT_FIELD_INT64, 0, 0, lab, {0}},
                                     {"caption", FMT_FIELD_TEXT, 0, 0, req, {0}}};
    gen2(dir, "v2-text-label", 6, 2, 3, 4, text_label, 2, false);
    /* no label field (n_labels 0): an ndarray of rows of 3 float32 and a float64 */
    const seed_field array[] = {{"x", FMT_FIELD_NDARRAY, FMT_DTYPE_F32, 2, req, {0, 3}},
                                {"score", FMT_FIELD_FLOAT64, 0, 0, req, {0}},
                                {"id", FMT_FIELD_INT64, 0, 0, 0, {0}}};
    gen2(dir, "v2-ndarray-no-label", 5, 2, 2, 0, array, 3, true);
    /* two stored fields: no single data field, the tables are HDMLP_E_UNSUPPORTED */
    const seed_field two[] = {{"image", FMT_FIELD_IMAGE, 0, 0, req, {0}},
                              {"meta", FMT_FIELD_JSON, 0, 0, 0, {0}},
                              {"label", FMT_FIELD_INT64, 0, 0, lab, {0}}};
    gen2(dir, "v2-two-stored-fields", 4, 4, 1, 2, two, 3, false);
    return 0;
}
#endif
