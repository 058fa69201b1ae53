/*
 * format/ — the on-disk format on buffers only (no files, no threads). See FORMAT.md.
 * Internal header: not installed.
 *
 * Layering (a file calls only those below it; .ci/check_layers.py fails on a call circle):
 *   fmt_table.c (sample tables: a chunk's sample records, version 1 over the index)
 *   fmt_index.c (index encode/decode), fmt_chunk.c (chunk headers; reads index records)
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

#define FMT_VERSION_MAJOR 1
#define FMT_VERSION_MINOR 0
#define FMT_ALIGN 4096u
#define FMT_INDEX_HEADER_LEN 256u
#define FMT_INDEX_TRAILER_LEN 16u
#define FMT_CHUNK_HEADER_LEN 64u
#define FMT_SAMPLE_REC_LEN 48u
#define FMT_CHUNK_REC_LEN 32u
#define FMT_SEGMENT_REC_LEN 16u
#define FMT_LABEL_REC_LEN 8u
#define FMT_MAX_CHUNK_SIZE (1u << 20)
#define FMT_MAX_KEY_LEN 65535u
#define FMT_INDEX_NAME "index"
#define FMT_SEGMENT_NAME_FMT "segment-%06u"

enum fmt_codec { FMT_CODEC_NONE = 0, FMT_CODEC_ZSTD = 1, FMT_CODEC_ZSTD_DICT = 2 };

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
} fmt_sample;

typedef struct fmt_chunk {
    uint64_t offset; /* in its segment */
    uint64_t length; /* header + payload */
    uint32_t segment;
    uint32_t n_samples;
    uint64_t header_checksum;
} fmt_chunk;

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
} fmt_header;

/* ---- index ---------------------------------------------------------------------------- */

/* A validated view of an index buffer. Does not own the buffer; valid while it lives. */
typedef struct fmt_index {
    fmt_header h;
    const uint8_t *base;
    size_t size;
    const uint8_t *samples;  /* N × FMT_SAMPLE_REC_LEN */
    const uint8_t *chunks;   /* C × FMT_CHUNK_REC_LEN */
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
void fmt_index_sample(const fmt_index *ix, uint64_t i, fmt_sample *out);
void fmt_index_chunk(const fmt_index *ix, uint64_t c, fmt_chunk *out);
void fmt_index_segment(const fmt_index *ix, uint32_t s, fmt_segment *out);
void fmt_index_label(const fmt_index *ix, uint32_t l, fmt_label *out);

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
    const uint8_t *rec; /* n × FMT_SAMPLE_REC_LEN bytes */
    uint64_t chunk;
    uint64_t first; /* the sample record 0 describes: chunk × K */
    uint32_t n;     /* n_c: K, or the remainder for the last chunk */
} fmt_table;

/* The fields of slot t's record (t < n; FORMAT.md: samples section) read in place. */
static inline const uint8_t *fmt_table_rec(const fmt_table *t, uint32_t slot)
{
    return t->rec + (size_t)slot * FMT_SAMPLE_REC_LEN;
}
static inline uint64_t fmt_rec_offset(const uint8_t *r) { return fmt_ld64(r); }
static inline uint64_t fmt_rec_stored_len(const uint8_t *r) { return fmt_ld64(r + 8); }
static inline uint64_t fmt_rec_raw_len(const uint8_t *r) { return fmt_ld64(r + 16); }
static inline uint64_t fmt_table_offset(const fmt_table *t, uint32_t slot)
{
    return fmt_rec_offset(fmt_table_rec(t, slot));
}
static inline uint64_t fmt_table_stored_len(const fmt_table *t, uint32_t slot)
{
    return fmt_rec_stored_len(fmt_table_rec(t, slot));
}
static inline uint64_t fmt_table_raw_len(const fmt_table *t, uint32_t slot)
{
    return fmt_rec_raw_len(fmt_table_rec(t, slot));
}
/* Decodes slot t's record (t < n). */
static inline void fmt_table_sample(const fmt_table *t, uint32_t slot, fmt_sample *out)
{
    fmt_sample_record(fmt_table_rec(t, slot), out);
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
} fmt_tables;

/* Version 1: views into ix's samples section (zero-copy, scratch 0; buf is not used). The
 * source borrows ix, which must outlive it. */
fmt_tables fmt_index_tables(const fmt_index *ix);
/* Version 1's get, directly: chunk c's records cK .. cK+n_c-1. HDMLP_E_RANGE for c ≥ C. */
int fmt_index_table(const fmt_index *ix, uint64_t c, fmt_table *out);
/* Version 1's raw_top_sum: a scan of every record (a min-heap of the m largest). */
uint64_t fmt_index_raw_top_sum(const fmt_index *ix, uint64_t m);

/* Chunk `chunk`'s table from source ts (ts->get). */
static inline int fmt_tables_get(const fmt_tables *ts, uint64_t chunk, void *buf, size_t cap,
                                 fmt_table *out)
{
    return ts->get(ts->ctx, chunk, buf, cap, out);
}

/* Everything needed to encode an index. Arrays are not owned. */
typedef struct fmt_index_build {
    fmt_header h; /* major/minor and counts are filled by fmt_index_encode */
    const fmt_sample *samples;
    uint64_t n_samples;
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
/* Checks only the checksum of a sample's stored bytes (for zero-copy codec-0 samples). */
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
