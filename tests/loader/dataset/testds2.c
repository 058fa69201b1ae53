/* Version-2 test datasets written with the format/ functions (see testds2.h). */
#include "testds2.h"

#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TESTDS2_DICT_CAP (16u * 1024u)
#define TESTDS2_DICT_TRAIN_MAX 2000u

/* Growable byte buffer. */
typedef struct buf2 {
    uint8_t *p;
    size_t len, cap;
} buf2;

/* Appends n bytes of src (zeros when src is NULL). */
static int put(buf2 *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) {
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (p == NULL) {
            return hd_err(HDMLP_E_NOMEM, "testds2: out of memory");
        }
        b->p = p;
        b->cap = cap;
    }
    if (n > 0) {
        if (src != NULL) {
            memcpy(b->p + b->len, src, n);
        } else {
            memset(b->p + b->len, 0, n);
        }
    }
    b->len += n;
    return HDMLP_OK;
}

static uint32_t sum32(const void *p, size_t n)
{
    return (uint32_t)(fmt_checksum(p, n) & UINT32_MAX);
}

static int put_value(buf2 *tables, const fmt_value *v)
{
    uint8_t r[FMT_VALUE_REC_LEN];
    fmt_value_encode(r, v);
    return put(tables, r, sizeof(r));
}

static int write_file(const char *dir, const char *name, const buf2 *b)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (testds_write_file(path, b->p, b->len) != 0) {
        return hd_err(HDMLP_E_IO, "%s: cannot write", path);
    }
    return HDMLP_OK;
}

static int train_dict(const testds_spec *spec, buf2 *dict)
{
    const unsigned n = spec->n_samples < TESTDS2_DICT_TRAIN_MAX ? (unsigned)spec->n_samples
                                                                : TESTDS2_DICT_TRAIN_MAX;
    buf2 all = {0};
    size_t *sizes = malloc(n * sizeof(size_t));
    int rc = sizes != NULL ? HDMLP_OK : hd_err(HDMLP_E_NOMEM, "testds2: out of memory");
    for (unsigned i = 0; i < n && rc == HDMLP_OK; i++) {
        sizes[i] = testds_size(spec, i);
        rc = put(&all, NULL, sizes[i]);
        if (rc == HDMLP_OK) {
            testds_fill(i, spec->seed, all.p + all.len - sizes[i], sizes[i]);
        }
    }
    if (rc == HDMLP_OK) {
        rc = put(dict, NULL, TESTDS2_DICT_CAP);
    }
    if (rc == HDMLP_OK) {
        rc = fmt_dict_train(all.p, sizes, n, dict->p, TESTDS2_DICT_CAP, &dict->len);
    }
    free(all.p);
    free(sizes);
    return rc;
}

typedef struct writer2 {
    const testds_spec *spec;
    uint32_t n_fields;
    uint64_t dataset_id;
    fmt_encoder *enc;
    uint8_t *raw, *out; /* a sample's raw bytes; its compressed bytes (out_cap) */
    size_t out_cap;
    buf2 chunk, tables, keys;
} writer2;

/* Sample i: its stored bytes into w->chunk, its value records into w->tables, its key into
 * the key block at keys_off (slot j); *raw_len its raw size. */
static int add_sample(writer2 *w, uint64_t i, uint32_t j, size_t keys_off, uint64_t *raw_len)
{
    const testds_spec *spec = w->spec;
    const size_t n = testds_size(spec, i);
    testds_fill(i, spec->seed, w->raw, n);
    const uint8_t *stored = w->raw;
    size_t stored_len = n;
    uint32_t codec = FMT_CODEC_NONE;
    int rc = HDMLP_OK;
    if (spec->compress) {
        rc = fmt_encode(w->enc, w->raw, n, &w->out, &w->out_cap, &stored_len, &codec);
        stored = w->out;
    }
    const fmt_value data = {.stored_len = stored_len,
                            .raw_len = n,
                            .checksum = sum32(stored, stored_len),
                            .codec = (uint8_t)codec,
                            .state = FMT_VALUE_STORED};
    uint8_t bits[8];
    const uint64_t label = i % spec->n_labels;
    fmt_st64(bits, label);
    const fmt_value lab = {
        .inline_bits = label, .checksum = sum32(bits, 8), .state = FMT_VALUE_INLINE};
    const fmt_value absent = {.state = FMT_VALUE_ABSENT};
    if (rc == HDMLP_OK) {
        rc = put_value(&w->tables, &data);
    }
    if (rc == HDMLP_OK) {
        rc = put_value(&w->tables, &lab);
    }
    if (rc == HDMLP_OK && w->n_fields > 2) {
        rc = put_value(&w->tables, &absent);
    }
    if (rc == HDMLP_OK) {
        rc = put(&w->chunk, stored, stored_len);
    }
    char key[32];
    const int klen = snprintf(key, sizeof(key), "sample-%llu", (unsigned long long)i);
    if (rc == HDMLP_OK) {
        fmt_st32(w->keys.p + keys_off + 4u * j, (uint32_t)klen);
        rc = put(&w->keys, key, (size_t)klen);
    }
    *raw_len = n;
    return rc;
}

/* Chunk c (n samples) into w->chunk, its table and key block appended, its record *ch but
 * for its place in its segment. */
static int add_chunk(writer2 *w, uint64_t c, uint32_t n, fmt_chunk *ch)
{
    w->chunk.len = 0;
    int rc = put(&w->chunk, NULL, FMT_CHUNK_HEADER_LEN);
    const size_t table_off = w->tables.len, keys_off = w->keys.len;
    if (rc == HDMLP_OK) {
        rc = put(&w->keys, NULL, 4u * (size_t)n); /* the lengths, filled per sample */
    }
    uint64_t raw_sum = 0, max_raw = 0;
    for (uint32_t j = 0; j < n && rc == HDMLP_OK; j++) {
        uint64_t raw_len = 0;
        rc = add_sample(w, c * w->spec->chunk_size + j, j, keys_off, &raw_len);
        raw_sum += raw_len;
        max_raw = raw_len > max_raw ? raw_len : max_raw;
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    ch->length = w->chunk.len;
    ch->n_samples = n;
    ch->header_checksum = fmt_chunk_header_encode(w->chunk.p, w->dataset_id, c, n,
                                                  w->chunk.len - FMT_CHUNK_HEADER_LEN);
    ch->table_offset = table_off;
    ch->table_checksum = fmt_checksum(w->tables.p + table_off, w->tables.len - table_off);
    ch->keys_offset = keys_off;
    ch->keys_length = w->keys.len - keys_off;
    ch->keys_checksum = fmt_checksum(w->keys.p + keys_off, (size_t)ch->keys_length);
    ch->raw_bytes = raw_sum;
    ch->max_raw = max_raw;
    /* The next block starts at a multiple of 8, and so does the file end. */
    const size_t pad = (8 - w->keys.len % 8) % 8;
    rc = put(&w->keys, NULL, pad);
    if (rc == HDMLP_OK) { /* the chunk padded to FMT_ALIGN in its segment */
        rc = put(&w->chunk, NULL, (size_t)fmt_align_up(w->chunk.len) - w->chunk.len);
    }
    return rc;
}

static int write_segments(writer2 *w, const char *dir, fmt_chunk *chunks, uint64_t n_chunks,
                          uint64_t per_seg, fmt_segment *segs, uint32_t n_segs)
{
    const testds_spec *spec = w->spec;
    uint64_t c = 0;
    for (uint32_t s = 0; s < n_segs; s++) {
        buf2 seg = {0};
        int rc = HDMLP_OK;
        for (uint64_t k = 0; k < per_seg && c < n_chunks && rc == HDMLP_OK; k++, c++) {
            const uint64_t left = spec->n_samples - c * spec->chunk_size;
            const uint32_t n = left < spec->chunk_size ? (uint32_t)left : spec->chunk_size;
            chunks[c].offset = seg.len;
            chunks[c].segment = s;
            rc = add_chunk(w, c, n, &chunks[c]);
            if (rc == HDMLP_OK) {
                rc = put(&seg, w->chunk.p, w->chunk.len);
            }
            segs[s].n_chunks++;
        }
        segs[s].size = seg.len;
        char name[32];
        snprintf(name, sizeof(name), FMT_SEGMENT_NAME_FMT, s);
        if (rc == HDMLP_OK) {
            rc = write_file(dir, name, &seg);
        }
        free(seg.p);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    return HDMLP_OK;
}

int testds2_write(const char *dir, const testds_spec *spec, const testds2_opts *opts)
{
    if (spec->n_samples == 0 || spec->chunk_size == 0 ||
        spec->chunk_size > FMT_MAX_CHUNK_SIZE || spec->n_labels == 0 ||
        spec->min_size > spec->max_size) {
        return hd_err(HDMLP_E_INVAL, "testds2: bad spec");
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        return hd_err(hd_errno_code(errno), "%s: mkdir: %s", dir, strerror(errno));
    }
    writer2 w = {.spec = spec,
                 .n_fields = opts != NULL && opts->extra_field ? 3 : 2,
                 .dataset_id = testds_dataset_id(spec->seed)};
    const uint64_t n_chunks = (spec->n_samples + spec->chunk_size - 1) / spec->chunk_size;
    const uint64_t per_seg = spec->chunks_per_segment ? spec->chunks_per_segment : n_chunks;
    const uint32_t n_segs = (uint32_t)((n_chunks + per_seg - 1) / per_seg);
    fmt_chunk *chunks = calloc(n_chunks, sizeof(fmt_chunk));
    fmt_segment *segs = calloc(n_segs, sizeof(fmt_segment));
    fmt_label *labels = calloc(spec->n_labels, sizeof(fmt_label));
    w.raw = malloc((size_t)spec->max_size + 1);
    buf2 strings = {0}, dict = {0};
    int rc = chunks && segs && labels && w.raw
                 ? HDMLP_OK
                 : hd_err(HDMLP_E_NOMEM, "testds2: out of memory");
    /* Fields: their names first in strings, then the label names. */
    static const char *const names[3] = {"data", "label", "caption"};
    static const uint8_t types[3] = {FMT_FIELD_BYTES, FMT_FIELD_INT64, FMT_FIELD_TEXT};
    static const uint8_t flags[3] = {FMT_FIELD_REQUIRED, FMT_FIELD_REQUIRED | FMT_FIELD_LABEL,
                                     0};
    fmt_field fields[3];
    memset(fields, 0, sizeof(fields));
    for (uint32_t f = 0; f < w.n_fields && rc == HDMLP_OK; f++) {
        fields[f].name_off = (uint32_t)strings.len;
        fields[f].name_len = (uint32_t)strlen(names[f]);
        fields[f].type = types[f];
        fields[f].flags = flags[f];
        rc = put(&strings, names[f], strlen(names[f]));
    }
    for (uint32_t l = 0; l < spec->n_labels && rc == HDMLP_OK; l++) {
        char name[32];
        const int n = snprintf(name, sizeof(name), "class-%u", l);
        labels[l].name_off = (uint32_t)strings.len;
        labels[l].name_len = (uint32_t)n;
        rc = put(&strings, name, (size_t)n);
    }
    if (rc == HDMLP_OK && spec->compress && spec->dict) {
        rc = train_dict(spec, &dict);
    }
    if (rc == HDMLP_OK && spec->compress) {
        rc = fmt_encoder_create(1, dict.p, dict.len, &w.enc);
    }
    uint8_t hdr[FMT_FILE_HEADER_LEN]; /* the files' headers */
    fmt_file_header_encode(hdr, FMT_TABLES_MAGIC, w.dataset_id);
    if (rc == HDMLP_OK) {
        rc = put(&w.tables, hdr, sizeof(hdr));
    }
    fmt_file_header_encode(hdr, FMT_KEYS_MAGIC, w.dataset_id);
    if (rc == HDMLP_OK) {
        rc = put(&w.keys, hdr, sizeof(hdr));
    }
    if (rc == HDMLP_OK) {
        rc = write_segments(&w, dir, chunks, n_chunks, per_seg, segs, n_segs);
    }
    if (rc == HDMLP_OK) {
        rc = write_file(dir, FMT_TABLES_NAME, &w.tables);
    }
    if (rc == HDMLP_OK) {
        rc = write_file(dir, FMT_KEYS_NAME, &w.keys);
    }
    uint8_t *index = NULL;
    size_t index_len = 0;
    if (rc == HDMLP_OK) {
        fmt_index_build b;
        memset(&b, 0, sizeof(b));
        b.version = 2;
        b.h.dataset_id = w.dataset_id;
        b.h.chunk_size = spec->chunk_size;
        b.h.pack_seed = spec->seed;
        b.h.created = 1700000000u;
        b.h.label_field = 1;
        b.h.tables_bytes = w.tables.len;
        b.h.keys_bytes = w.keys.len;
        b.fields = fields;
        b.n_fields = w.n_fields;
        b.n_samples = spec->n_samples;
        b.chunks = chunks;
        b.n_chunks = n_chunks;
        b.segments = segs;
        b.n_segments = n_segs;
        b.labels = labels;
        b.n_labels = spec->n_labels;
        b.strings = strings.p;
        b.strings_len = strings.len;
        b.dict = dict.len ? dict.p : NULL;
        b.dict_len = dict.len;
        rc = fmt_index_encode(&b, &index, &index_len);
    }
    if (rc == HDMLP_OK) {
        const buf2 ib = {index, index_len, index_len};
        rc = write_file(dir, FMT_INDEX_NAME, &ib);
    }
    hd_free(index);
    fmt_encoder_free(w.enc);
    hd_free(w.out);
    free(w.raw);
    free(w.chunk.p);
    free(w.tables.p);
    free(w.keys.p);
    free(strings.p);
    free(dict.p);
    free(chunks);
    free(segs);
    free(labels);
    return rc;
}
