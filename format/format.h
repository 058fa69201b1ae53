/*
 * format/ — the on-disk format on buffers only (no files, no threads). See FORMAT.md.
 * Internal header: not installed.
 *
 * Layering (a file calls only those below it; .ci/check_layers.py fails on a call circle):
 *   fmt_table.c (sample tables: a chunk's sample records, version 1 over the index),
 *   fmt_table2.c (version 2: a chunk's value records checked and expanded; key blocks)
 *   fmt_index.c (index encode/decode: version 1 here, version 2's parts in fmt_index2.c),
 *   fmt_chunk.c (chunk headers; reads index records)
 *   fmt_records.c (record accessors of both versions)
 *   fmt_codec.c (sample checksums and zstd codecs)
 *   format/base/ (hd_base.h: allocation and the thread-local error detail)
 */
#ifndef HDMLP_FORMAT_H
#define HDMLP_FORMAT_H

#include "hd_base.h"
#include "hdmlp.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FMT_VERSION_MAJOR 2 /* what is written; majors 1 and 2 are read */
#define FMT_VERSION_MINOR 0 /* of either major */
#define FMT_ALIGN 4096u
#define FMT_INDEX_HEADER_LEN 256u
#define FMT_INDEX_TRAILER_LEN 16u
#define FMT_CHUNK_HEADER_LEN 64u
#define FMT_SAMPLE_REC_LEN 48u
#define FMT_CHUNK_REC_LEN 32u  /* version 1 */
#define FMT_CHUNK_REC2_LEN 96u /* version 2 */
#define FMT_FIELD_REC_LEN 32u
#define FMT_VALUE_REC_LEN 16u
#define FMT_MAX_FIELDS 256u
#define FMT_MAX_NDIM 4u
#define FMT_MAX_VALUE_LEN UINT32_MAX /* a version-2 value's stored and raw lengths */
#define FMT_NO_FIELD UINT32_MAX      /* label_field of a dataset without labels */
#define FMT_SEGMENT_REC_LEN 16u
#define FMT_LABEL_REC_LEN 8u
#define FMT_MAX_CHUNK_SIZE (1u << 20)
#define FMT_MAX_KEY_LEN 65535u
#define FMT_INDEX_NAME "index"
#define FMT_SEGMENT_NAME_FMT "segment-%06u"
#define FMT_TABLES_NAME "tables" /* version 2 */
#define FMT_KEYS_NAME "keys"     /* version 2 */
/* Version 2's DIR/tables and DIR/keys start with a 16-byte header: magic, dataset_id. */
#define FMT_FILE_HEADER_LEN 16u
#define FMT_TABLES_MAGIC "HDMLPTBL"
#define FMT_KEYS_MAGIC "HDMLPKEY"

enum fmt_codec { FMT_CODEC_NONE = 0, FMT_CODEC_ZSTD = 1, FMT_CODEC_ZSTD_DICT = 2 };
/* Not a codec on disk: a sample record (fmt_sample) of a sample with fields, decoded value by
 * value from its value records (fmt_sample.vals) into a field record (fmt_frec_*). */
#define FMT_CODEC_FIELDS 255u

/* Version 2: a field's type (FORMAT.md: fields section). Scalars are stored inline in their
 * value record; the others as bytes in the chunk. */
enum fmt_field_type {
    FMT_FIELD_BYTES = 0,
    FMT_FIELD_TEXT = 1,    /* UTF-8 */
    FMT_FIELD_JSON = 2,    /* UTF-8 JSON */
    FMT_FIELD_INT64 = 3,   /* scalar */
    FMT_FIELD_FLOAT32 = 4, /* scalar */
    FMT_FIELD_FLOAT64 = 5, /* scalar */
    FMT_FIELD_NDARRAY = 6, /* dtype, ndim, shape */
    FMT_FIELD_IMAGE = 7,   /* encoded image bytes (JPEG, PNG, ...) */
    FMT_FIELD_TYPES = 8
};
enum fmt_dtype {
    FMT_DTYPE_NONE = 0,
    FMT_DTYPE_U8,
    FMT_DTYPE_I8,
    FMT_DTYPE_U16,
    FMT_DTYPE_I16,
    FMT_DTYPE_U32,
    FMT_DTYPE_I32,
    FMT_DTYPE_U64,
    FMT_DTYPE_I64,
    FMT_DTYPE_F16,
    FMT_DTYPE_F32,
    FMT_DTYPE_F64,
    FMT_DTYPES
};
enum fmt_value_state { FMT_VALUE_ABSENT = 0, FMT_VALUE_STORED = 1, FMT_VALUE_INLINE = 2 };
#define FMT_FIELD_REQUIRED 1u /* no sample lacks it */
#define FMT_FIELD_LABEL 2u    /* the dataset's label: an int64 in [0, L) */

/* A field type's and an ndarray dtype's names ("image", "float32"; "" for no dtype; "?" past
 * the known ones). Static storage. */
const char *fmt_field_type_name(uint32_t type);
const char *fmt_dtype_name(uint32_t dtype);

static inline bool fmt_field_scalar(uint32_t type)
{
    return type == FMT_FIELD_INT64 || type == FMT_FIELD_FLOAT32 || type == FMT_FIELD_FLOAT64;
}

/* ---- little-endian codec -------------------------------------------------------------- */
static inline uint16_t fmt_ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t fmt_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static inline uint64_t fmt_ld64(const uint8_t *p)
{
    return (uint64_t)fmt_ld32(p) | ((uint64_t)fmt_ld32(p + 4) << 32);
}
static inline void fmt_st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void fmt_st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}
static inline void fmt_st64(uint8_t *p, uint64_t v)
{
    fmt_st32(p, (uint32_t)v);
    fmt_st32(p + 4, (uint32_t)(v >> 32));
}

uint64_t fmt_checksum(const void *data, size_t len); /* XXH3-64, seed 0 */
static inline uint64_t fmt_align_up(uint64_t v)
{
    return (v + FMT_ALIGN - 1) & ~(uint64_t)(FMT_ALIGN - 1);
}

/* ---- decoded records ------------------------------------------------------------------ */
typedef struct fmt_sample {
    uint64_t offset; /* from the start of its chunk */
    uint64_t stored_len;
    uint64_t raw_len;
    uint64_t checksum; /* XXH3-64 of the stored bytes */
    uint32_t key_off;
    uint32_t key_len;
    uint32_t codec;
    uint32_t label;
    uint32_t sum32; /* 1: checksum holds the low 32 bits of XXH3-64 (version 2's records) */
    /* codec FMT_CODEC_FIELDS: the sample's n_fields value records (FORMAT.md: sample
     * tables), which the decoder reads; not part of the 48-byte encoding. (In this order
     * the struct has no padding: tests compare records with memcmp.) */
    uint32_t n_fields;
    const uint8_t *vals;
} fmt_sample;

/* Whether a sample's stored bytes, hashing to sum (fmt_checksum), match its record. */
static inline bool fmt_sample_sum_ok(const fmt_sample *s, uint64_t sum)
{
    return s->sum32 ? (sum & UINT32_MAX) == s->checksum : sum == s->checksum;
}

typedef struct fmt_chunk {
    uint64_t offset; /* in its segment */
    uint64_t length; /* header + payload */
    uint32_t segment;
    uint32_t n_samples;
    uint64_t header_checksum;
    /* Version 2 (0 in version 1): the chunk's sample table in DIR/tables (n_samples × F
     * value records), its key block in DIR/keys, and the raw sizes sizing needs. */
    uint64_t table_offset;
    uint64_t table_checksum; /* XXH3-64 of the table */
    uint64_t keys_offset;
    uint64_t keys_length;
    uint64_t keys_checksum; /* XXH3-64 of the key block */
    uint64_t raw_bytes;     /* sum of its samples' raw sizes */
    uint64_t max_raw;       /* its largest sample's raw size */
} fmt_chunk;

/* Version 2: a field (FORMAT.md: fields section). */
typedef struct fmt_field {
    uint32_t name_off, name_len;  /* into strings */
    uint8_t type;                 /* enum fmt_field_type */
    uint8_t dtype;                /* ndarray: enum fmt_dtype; else 0 */
    uint8_t ndim;                 /* ndarray: 0..FMT_MAX_NDIM; else 0 */
    uint8_t flags;                /* FMT_FIELD_REQUIRED | FMT_FIELD_LABEL */
    uint32_t shape[FMT_MAX_NDIM]; /* ndarray: each dim's size, 0 = varies (leads the value) */
} fmt_field;

/* Version 2: one value record (FORMAT.md: value records). */
typedef struct fmt_value {
    uint64_t stored_len, raw_len; /* stored; 0 otherwise */
    uint64_t inline_bits;         /* inline: the scalar's 8 bytes (little-endian) */
    uint32_t checksum;            /* low 32 bits of XXH3-64 of the stored or inline bytes */
    uint8_t codec;                /* stored: enum fmt_codec; else 0 */
    uint8_t state;                /* enum fmt_value_state */
} fmt_value;

typedef struct fmt_segment {
    uint64_t size;
    uint64_t n_chunks;
} fmt_segment;

typedef struct fmt_label {
    uint32_t name_off;
    uint32_t name_len;
} fmt_label;

typedef struct fmt_header {
    uint16_t major, minor;
    uint64_t dataset_id;
    uint64_t n_samples;
    uint64_t n_chunks;
    uint32_t chunk_size;
    uint32_t n_labels;
    uint32_t n_segments;
    uint32_t flags;
    uint64_t pack_seed;
    uint64_t created;
    uint64_t raw_bytes;
    uint64_t stored_bytes;
    /* Version 2 (version 1: 0, FMT_NO_FIELD, 0, 0). */
    uint32_t n_fields;
    uint32_t label_field;  /* the field flagged FMT_FIELD_LABEL, or FMT_NO_FIELD */
    uint64_t tables_bytes; /* size of DIR/tables */
    uint64_t keys_bytes;   /* size of DIR/keys */
} fmt_header;

/* ---- index ---------------------------------------------------------------------------- */

/* A validated view of an index buffer. Does not own the buffer; valid while it lives. */
typedef struct fmt_index {
    fmt_header h;
    const uint8_t *base;
    size_t size;
    const uint8_t *samples;  /* version 1: N × FMT_SAMPLE_REC_LEN; version 2: NULL */
    const uint8_t *chunks;   /* C × chunk_rec_len */
    const uint8_t *fields;   /* version 2: F × FMT_FIELD_REC_LEN; version 1: NULL */
    uint32_t chunk_rec_len;  /* FMT_CHUNK_REC_LEN or FMT_CHUNK_REC2_LEN by version */
    uint32_t data_field;     /* version 2: the one stored (non-scalar) field the loader
                                delivers, FMT_NO_FIELD when there is none or several */
    bool fielded;            /* version 2 with fields besides one stored field and the
                                label: samples are delivered as field records (fmt_frec) */
    const uint8_t *segments; /* S × FMT_SEGMENT_REC_LEN */
    const uint8_t *labels;   /* L × FMT_LABEL_REC_LEN */
    const uint8_t *strings;
    uint64_t strings_len;
    const uint8_t *dict;
    uint64_t dict_len;
} fmt_index;

/* Decodes and fully validates an index buffer: magic, version, header, trailer checksum,
 * section bounds and alignment, every record (FORMAT.md rules). HDMLP_E_CORRUPT or
 * HDMLP_E_VERSION with detail. After success the accessors below need no checks. */
int fmt_index_decode(const void *buf, size_t size, fmt_index *out);
/* Version 1 only (ix->samples); version 2's records come from tables (fmt_tables). */
void fmt_index_sample(const fmt_index *ix, uint64_t i, fmt_sample *out);
void fmt_index_chunk(const fmt_index *ix, uint64_t c, fmt_chunk *out);
void fmt_index_segment(const fmt_index *ix, uint32_t s, fmt_segment *out);
void fmt_index_label(const fmt_index *ix, uint32_t l, fmt_label *out);
void fmt_index_field(const fmt_index *ix, uint32_t f, fmt_field *out); /* version 2 */

/* Decodes one sample record (FMT_SAMPLE_REC_LEN bytes; FORMAT.md: samples section). */
void fmt_sample_record(const uint8_t *rec, fmt_sample *out);

/* ---- sample tables -------------------------------------------------------------------- */
/*
 * A chunk's sample table: the records of its n_c samples, record t describing slot t (sample
 * cK + t), in the samples section's encoding. What a reader holds per sample is got a chunk
 * at a time through a table source (fmt_tables), never by indexing the samples section: in
 * version 1 a table is a view into the index (records cK .. cK+n_c-1, contiguous), a later
 * version may read a chunk's table from storage into the caller's buffer and check it.
 */
typedef struct fmt_table {
    const uint8_t *rec; /* version-1 records: n × FMT_SAMPLE_REC_LEN bytes; NULL for a view */
    uint64_t chunk;
    uint64_t first; /* the sample record 0 describes: chunk × K */
    uint32_t n;     /* n_c: K, or the remainder for the last chunk */
    /* A version-2 view (rec NULL): the chunk's value records in place (F per sample, stride
     * bytes a sample), the data field's and the label field's records at data_at and
     * label_at in a sample's (label_at UINT32_MAX without a label field), and each
     * sample's offset in the chunk, summed once when the table was read (n entries); or,
     * for a sizes view (off NULL: ds_tables_sizes), no offsets and nothing checked yet:
     * only the lengths may be read, or with blk, records through fmt_table2_records. */
    const uint8_t *val;
    const uint64_t *off;
    const uint32_t *blk; /* a sizes view's block offsets (fmt_table2_blocks), or NULL */
    uint32_t stride, data_at, label_at;
    /* A view of a dataset with fields (fmt_index.fielded): its F fields; a sample's stored
     * length is its values', its raw length its field record's (fmt_frec_len). 0 otherwise. */
    uint32_t fields;
    /* A view's raw lengths are read as at most this, its chunk record's largest: a sizes
     * view's records are not checked yet (its reader checks the table before it uses a
     * record), and a damaged one must not make a planner charge or allocate more than the
     * chunk's largest sample. */
    uint64_t max_raw;
} fmt_table;

/* Slot t's record in the samples section's encoding (t < n; FORMAT.md: samples section):
 * version 1's in place; for a view, encoded into out (FMT_SAMPLE_REC_LEN bytes) and returned.
 */
const uint8_t *fmt_table_record(const fmt_table *t, uint32_t slot, uint8_t *out);
static inline uint64_t fmt_rec_offset(const uint8_t *r) { return fmt_ld64(r); }
static inline uint64_t fmt_rec_stored_len(const uint8_t *r) { return fmt_ld64(r + 8); }
static inline uint64_t fmt_rec_raw_len(const uint8_t *r) { return fmt_ld64(r + 16); }
static inline const uint8_t *fmt_table_val(const fmt_table *t, uint32_t slot)
{
    return t->val + (size_t)slot * t->stride + t->data_at;
}
static inline uint64_t fmt_table_offset(const fmt_table *t, uint32_t slot)
{
    return t->rec != NULL ? fmt_rec_offset(t->rec + (size_t)slot * FMT_SAMPLE_REC_LEN)
                          : t->off[slot];
}
/* ---- field records: what a reader delivers for a sample with fields (FORMAT.md) -------- */
#define FMT_FREC_MAGIC 0x46534448u /* "HDSF" */
#define FMT_FREC_HEAD 8u
#define FMT_FREC_ENTRY 16u
/* One field of a field record (fmt_frec_field): state as a value record's (absent, stored,
 * inline), the field's type; data and size the stored value's bytes in the record, or the
 * inline value's 8 bytes (bits: an int64, a float32 in the low 4 bytes, a float64). */
typedef struct fmt_frec_value {
    const void *data;
    uint64_t size;
    uint64_t bits;
    uint32_t state, type;
} fmt_frec_value;
/* Field f of the field record at rec (len bytes), checked against the record's bounds:
 * HDMLP_E_INVAL for a buffer that is not one, HDMLP_E_RANGE for f past its fields. */
int fmt_frec_field(const void *rec, uint64_t len, uint32_t f, fmt_frec_value *out);
/* A sample's stored bytes (the sum of its stored values' lengths) from its nf value records. */
static inline uint64_t fmt_vals_stored(const uint8_t *vals, uint32_t nf)
{
    uint64_t sum = 0;
    for (uint32_t f = 0; f < nf; f++, vals += FMT_VALUE_REC_LEN) {
        sum += (uint64_t)(vals[13] == FMT_VALUE_STORED) * fmt_ld32(vals);
    }
    return sum;
}
/* The length of the field record of a sample whose nf value records are at vals: the head,
 * an entry a field, each stored value at a multiple of 8. */
static inline uint64_t fmt_frec_len(const uint8_t *vals, uint32_t nf)
{
    uint64_t len = FMT_FREC_HEAD + (uint64_t)nf * FMT_FREC_ENTRY;
    for (uint32_t f = 0; f < nf; f++, vals += FMT_VALUE_REC_LEN) {
        len += (uint64_t)(vals[13] == FMT_VALUE_STORED) * ((fmt_ld32(vals + 4) + 7u) & ~7ull);
    }
    return len;
}
/* The longest field record of a sample whose values' raw lengths sum to raw, in a dataset of
 * nf fields (each value padded by at most 7 bytes). */
static inline uint64_t fmt_frec_bound(uint64_t raw, uint32_t nf)
{
    return raw + FMT_FREC_HEAD + (uint64_t)nf * (FMT_FREC_ENTRY + 7u);
}

static inline uint64_t fmt_table_stored_len(const fmt_table *t, uint32_t slot)
{
    if (t->rec != NULL) {
        return fmt_rec_stored_len(t->rec + (size_t)slot * FMT_SAMPLE_REC_LEN);
    }
    return t->fields ? fmt_vals_stored(t->val + (size_t)slot * t->stride, t->fields)
                     : fmt_ld32(fmt_table_val(t, slot));
}
static inline uint64_t fmt_table_raw_len(const fmt_table *t, uint32_t slot)
{
    if (t->rec != NULL) {
        return fmt_rec_raw_len(t->rec + (size_t)slot * FMT_SAMPLE_REC_LEN);
    }
    const uint64_t raw = t->fields ? fmt_frec_len(t->val + (size_t)slot * t->stride, t->fields)
                                   : fmt_ld32(fmt_table_val(t, slot) + 4);
    return raw < t->max_raw ? raw : t->max_raw;
}
/* Decodes slot t's record (t < n). */
static inline void fmt_table_sample(const fmt_table *t, uint32_t slot, fmt_sample *out)
{
    uint8_t r[FMT_SAMPLE_REC_LEN];
    fmt_sample_record(fmt_table_record(t, slot, r), out);
}

/* A source of sample tables: chosen by whoever opens the dataset (the dataset, by its
 * version), handed to the loader's modules, which never read the samples section. */
typedef struct fmt_tables {
    /* Chunk `chunk`'s table into *out. `buf` holds `cap` bytes the call may fill (at least
     * `scratch` below; NULL when scratch is 0). The view is valid while the source lives
     * and `buf` is neither reused nor freed. HDMLP_E_RANGE for a chunk ≥ C; a source that
     * reads tables also its read and checksum errors (HDMLP_E_IO, HDMLP_E_CORRUPT). Thread-
     * safe for distinct buffers. */
    int (*get)(void *ctx, uint64_t chunk, void *buf, size_t cap, fmt_table *out);
    /* The sum of the m largest raw lengths of the dataset (1 ≤ m; the raw bytes when m ≥ N),
     * or UINT64_MAX out of memory: the budget's batches (loader_sizing.c), the one figure a
     * loader needs at create from every sample. Version 1 scans every record (N reads). A
     * version with per-chunk tables answers from a per-chunk aggregate in its chunk records
     * instead: each chunk's largest raw length r_c (with n_c) bounds the sum by taking
     * chunks in decreasing r_c, min(n_c, what is left of m) samples of r_c each, in C log C;
     * exact when a chunk's samples are equal in size, else larger, so such a dataset sizes
     * its batches cautiously (and its A can differ from a version-1 copy's). */
    uint64_t (*raw_top_sum)(void *ctx, uint64_t m);
    void *ctx;
    size_t scratch; /* bytes of buffer a get needs: 0 when views point into memory held */
    /* Optional (NULL: nothing to do): the caller is done with the view its buffer `buf`
     * holds, before freeing buf (a source that maps tables lets their pages go). */
    void (*drop)(void *ctx, void *buf);
} fmt_tables;

/* Version 1: views into ix's samples section (zero-copy, scratch 0; buf is not used). The
 * source borrows ix, which must outlive it. */
fmt_tables fmt_index_tables(const fmt_index *ix);
/* Version 1's get, directly: chunk c's records cK .. cK+n_c-1. HDMLP_E_RANGE for c ≥ C. */
int fmt_index_table(const fmt_index *ix, uint64_t c, fmt_table *out);
/* Version 1's raw_top_sum: a scan of every record (a min-heap of the m largest). */
uint64_t fmt_index_raw_top_sum(const fmt_index *ix, uint64_t m);

/* ---- version 2: sample tables and key blocks (fmt_table2.c) ----------------------------- */

/* Tables of at least this many bytes are mapped for a loader's planning rather than copied
 * into buffers (ds_tables_mapped: for smaller ones a mapping's system calls and TLB flush
 * cost more than the copy); a loader charges such a table's mapping its two end pages. */
#define FMT_TABLE_MAP_MIN (64u << 10)
/* Bytes of chunk c's table in DIR/tables: n_c × F value records. */
static inline uint64_t fmt_table2_len(const fmt_index *ix, const fmt_chunk *c)
{
    return (uint64_t)c->n_samples * ix->h.n_fields * FMT_VALUE_REC_LEN;
}
/* Buffer a version-2 table source needs per get: the largest table as read, then K offsets
 * (fmt_table2_view). */
size_t fmt_table2_scratch(const fmt_index *ix);
/* Chunk c's table as read (`raw`, fmt_table2_len bytes) as a view (*out; valid while raw
 * and off live): each sample's offset summed into off (n_c entries) and the sums checked
 * against the chunk record, every time (what bounds each sample inside its chunk); unless
 * `checked` (this table passed before, unchanged since), also its checksum and every value
 * record against its field, the dictionary and the labels. Errors as fmt_table2_expand. */
int fmt_table2_view(const fmt_index *ix, uint64_t c, const uint8_t *raw, uint64_t *off,
                    int checked, fmt_table *out);
/* A view of chunk c's table (raw) whose offsets a fmt_table2_view of it filled in off
 * before, unchanged since: no check, no sum (tables held in memory); with off NULL, a sizes
 * view (fmt_table). c < C. */
void fmt_table2_view_of(const fmt_index *ix, uint64_t c, const uint8_t *raw,
                        const uint64_t *off, fmt_table *out);
/* Samples a table block holds: a loader may keep the offset of every block's first sample
 * (fmt_table2_blocks) to find any sample's offset by summing at most this many less one. */
#define FMT_TABLE_BLOCK 32u
/* The offsets of view's blocks' first samples into blk (ceil(n / FMT_TABLE_BLOCK) entries),
 * from a checked view (fmt_table2_view) of a chunk shorter than 4 GiB. */
void fmt_table2_blocks(const fmt_table *view, uint32_t *blk);
/* The sample records (FMT_SAMPLE_REC_LEN each, at rec) of the n samples at in-chunk `slots`
 * of chunk c, from its table as read (raw) and its blocks' offsets (blk, from a checked view
 * of this table): each offset summed from its block's start, each sample's value records
 * checked against their fields as a first view checks them, its range against the chunk's
 * length. Reads only the slots' blocks, not the whole table. HDMLP_E_CORRUPT naming the
 * chunk, sample and field or range (a table changed since its view), HDMLP_E_RANGE for a
 * slot past the chunk. */
int fmt_table2_records(const fmt_index *ix, uint64_t c, const uint8_t *raw, const uint32_t *blk,
                       const uint32_t *slots, uint32_t n, uint8_t *rec);
/* Checks chunk c's table as read (`raw`, fmt_table2_len bytes: its checksum against the
 * chunk record, then every value record against its field, the dictionary, the labels and
 * the chunk record's sizes) and expands it into n_c sample records at `rec` (the samples
 * section's encoding: the data field's offset, lengths, codec and 32-bit checksum, the label
 * field's value), *out a view of them. HDMLP_E_CORRUPT naming the chunk, sample and field;
 * HDMLP_E_UNSUPPORTED when the dataset has no single data field (ix->data_field). */
int fmt_table2_expand(const fmt_index *ix, uint64_t c, const uint8_t *raw, uint8_t *rec,
                      fmt_table *out);
void fmt_value_decode(const uint8_t r[FMT_VALUE_REC_LEN], fmt_value *out);
/* A stored value's record: stored bytes hashing to sum (fmt_checksum; its low 32 bits are
 * kept) under codec. */
static inline fmt_value fmt_value_stored(uint64_t stored_len, uint64_t raw_len, uint64_t sum,
                                         uint32_t codec)
{
    return (fmt_value){.stored_len = stored_len,
                       .raw_len = raw_len,
                       .checksum = (uint32_t)(sum & UINT32_MAX),
                       .codec = (uint8_t)codec,
                       .state = FMT_VALUE_STORED};
}
/* An inline int64 value's record (a label), its checksum computed. */
fmt_value fmt_value_int64(int64_t v);
void fmt_value_encode(uint8_t r[FMT_VALUE_REC_LEN], const fmt_value *v);
/* Version 2's raw_top_sum, from the chunk records' max_raw (C log C; see fmt_tables). */
uint64_t fmt_index2_raw_top_sum(const fmt_index *ix, uint64_t m);

/* A chunk's key block (DIR/keys at keys_offset, keys_length bytes): n_c × u32 key lengths,
 * then the keys back to back. fmt_keys_check checks it against chunk c's record (checksum,
 * lengths adding up); fmt_keys_at then gives key t (t < n_c) in place. */
int fmt_keys_check(const fmt_index *ix, uint64_t c, const uint8_t *blk, uint64_t len);
void fmt_keys_at(const uint8_t *blk, uint32_t n, uint32_t t, const uint8_t **key,
                 uint32_t *len);

/* The 16-byte header of DIR/tables or DIR/keys (magic FMT_TABLES_MAGIC or FMT_KEYS_MAGIC):
 * written by fmt_file_header_encode, checked against ix by fmt_file_header_check
 * (HDMLP_E_CORRUPT naming `name`: another file, or another dataset's). */
void fmt_file_header_encode(uint8_t hdr[FMT_FILE_HEADER_LEN], const char *magic,
                            uint64_t dataset_id);
int fmt_file_header_check(const fmt_index *ix, const char *name, const char *magic,
                          const uint8_t *hdr, size_t len);

/* Chunk `chunk`'s table from source ts (ts->get). */
static inline int fmt_tables_get(const fmt_tables *ts, uint64_t chunk, void *buf, size_t cap,
                                 fmt_table *out)
{
    return ts->get(ts->ctx, chunk, buf, cap, out);
}

/* Everything needed to encode an index. Arrays are not owned. */
typedef struct fmt_index_build {
    fmt_header h;              /* major/minor and counts are filled by fmt_index_encode */
    uint32_t version;          /* 2: version 2 (fields, no samples); 0 or 1: version 1 */
    const fmt_sample *samples; /* version 1 */
    uint64_t n_samples;        /* both versions */
    const fmt_field *fields;   /* version 2; h.label_field, h.tables_bytes, h.keys_bytes */
    uint32_t n_fields;
    const fmt_chunk *chunks;
    uint64_t n_chunks;
    const fmt_segment *segments;
    uint32_t n_segments;
    const fmt_label *labels;
    uint32_t n_labels;
    const uint8_t *strings;
    uint64_t strings_len;
    const uint8_t *dict;
    uint64_t dict_len;
} fmt_index_build;

/* Encodes an index into a new buffer (*out, *out_len; free with hd_free). Validates the
 * result with fmt_index_decode before returning (HDMLP_E_INVAL names the broken rule). */
int fmt_index_encode(const fmt_index_build *b, uint8_t **out, size_t *out_len);

/* ---- chunks --------------------------------------------------------------------------- */

/* Writes the 64-byte chunk header into hdr and returns its header checksum. */
uint64_t fmt_chunk_header_encode(uint8_t hdr[FMT_CHUNK_HEADER_LEN], uint64_t dataset_id,
                                 uint64_t chunk, uint32_t n_samples, uint64_t payload_len);
/* Checks a chunk header read from storage against the index (magic, checksum, dataset id,
 * chunk number, sample count, payload length). HDMLP_E_CORRUPT naming the chunk. */
int fmt_chunk_header_check(const fmt_index *ix, uint64_t chunk, const uint8_t *hdr, size_t len);

/* ---- samples -------------------------------------------------------------------------- */

/* Decompression context (one per thread). */
typedef struct fmt_decoder fmt_decoder;
int fmt_decoder_create(const fmt_index *ix, fmt_decoder **out);
void fmt_decoder_free(fmt_decoder *d);

/* Verifies the checksum of a sample's stored bytes and decodes them into dst (capacity
 * dst_cap ≥ raw_len). For codec 0 a plain copy. HDMLP_E_CORRUPT naming sample `index`
 * (and its chunk) on mismatch or a decode that does not give exactly raw_len bytes. */
int fmt_sample_decode(fmt_decoder *d, uint64_t index, const fmt_sample *s,
                      const uint8_t *stored, void *dst, size_t dst_cap);
/* Checks only the checksum of a sample's stored bytes (for zero-copy codec-0 samples); of
 * a sample with fields (codec FMT_CODEC_FIELDS), each stored value's, naming the field. */
int fmt_sample_verify(uint64_t index, const fmt_sample *s, const uint8_t *stored);

/* Compression context (one per thread) for the packer. level: zstd level (1..22). */
typedef struct fmt_encoder fmt_encoder;
int fmt_encoder_create(int level, const void *dict, size_t dict_len, fmt_encoder **out);
void fmt_encoder_free(fmt_encoder *e);
/* Compresses src into *dst (grown with hd_realloc as needed; *dst_cap tracks capacity).
 * *codec is set to FMT_CODEC_ZSTD or FMT_CODEC_ZSTD_DICT. */
int fmt_encode(fmt_encoder *e, const void *src, size_t len, uint8_t **dst, size_t *dst_cap,
               size_t *out_len, uint32_t *codec);
/* Trains a zstd dictionary of at most dict_cap bytes from concatenated samples. */
int fmt_dict_train(const void *samples, const size_t *sizes, unsigned n, void *dict,
                   size_t dict_cap, size_t *dict_len);

#endif /* HDMLP_FORMAT_H */
