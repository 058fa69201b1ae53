/* Deterministic test datasets written with the format/ functions. */
#include "testds.h"

#include "fmt_rng.h"
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TESTDS_DICT_CAP (16u * 1024u)
#define TESTDS_DICT_TRAIN_MAX 2000u

static uint64_t mix(uint64_t x) { return fmt_splitmix64(&x); }

void testds_fill(uint64_t i, uint64_t seed, void *buf, size_t len)
{
    static const char phrase[] = "hdmlp test sample, compressible payload; ";
    const size_t plen = sizeof(phrase) - 1;
    const uint64_t tag = mix(seed ^ mix(i));
    uint8_t *p = buf;
    for (size_t j = 0; j < len; j++) {
        if ((j & 63) < 8) { /* 8 sample-specific bytes every 64 */
            p[j] = (uint8_t)((tag >> (8 * (j & 7))) ^ (j >> 6));
        } else {
            p[j] = (uint8_t)phrase[j % plen];
        }
    }
}

size_t testds_size(const testds_spec *spec, uint64_t i)
{
    if (spec->min_size == 0 && i % 16 == 5) {
        return 0; /* make sure 0-byte samples occur */
    }
    const uint64_t span = (uint64_t)spec->max_size - spec->min_size + 1;
    return (size_t)(spec->min_size + mix(spec->seed * 0x2545f4914f6cdd1dull + i) % span);
}

uint64_t testds_dataset_id(uint64_t seed) { return mix(seed ^ 0x68646d6c70647369ull) | 1; }

static int write_all(int fd, const void *buf, size_t len, const char *path)
{
    const uint8_t *p = buf;
    while (len > 0) {
        const ssize_t r = write(fd, p, len);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return hd_err(hd_errno_code(errno), "%s: write: %s", path, strerror(errno));
        }
        p += r;
        len -= (size_t)r;
    }
    return HDMLP_OK;
}

int testds_write_file(const char *path, const void *buf, size_t len)
{
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -1;
    }
    const int rc = write_all(fd, buf, len, path);
    return close(fd) == 0 && rc == HDMLP_OK ? 0 : -1;
}

int testds_read_file(const char *path, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return -1;
    }
    uint8_t *p = malloc((size_t)st.st_size + 1);
    size_t done = 0;
    while (p != NULL && done < (size_t)st.st_size) {
        const ssize_t r = read(fd, p + done, (size_t)st.st_size - done);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) {
                continue;
            }
            break;
        }
        done += (size_t)r;
    }
    close(fd);
    if (p == NULL || done != (size_t)st.st_size) {
        free(p);
        return -1;
    }
    *buf = p;
    *len = done;
    return 0;
}

void testds_reseal_index(uint8_t *buf, size_t len)
{
    if (len >= 8) {
        fmt_st64(buf + len - 8, fmt_checksum(buf, len - 8));
    }
}

/* Doubles s's room (1024 to start). On failure cap is unchanged (idx may have grown). */
static int seq_grow(testds_seq *s)
{
    const uint64_t cap = s->cap ? 2 * s->cap : 1024;
    uint64_t *idx = realloc(s->idx, cap * sizeof *idx);
    if (idx != NULL) {
        s->idx = idx;
    }
    uint64_t *ep = idx != NULL ? realloc(s->ep, cap * sizeof *ep) : NULL;
    if (ep == NULL) {
        return hd_err(HDMLP_E_NOMEM, "testds_drain: out of memory after %llu samples",
                      (unsigned long long)s->n);
    }
    s->ep = ep;
    s->cap = cap;
    return HDMLP_OK;
}

int testds_drain(hdmlp_loader *ld, testds_seq *s)
{
    hdmlp_batch *b;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b) && rc == HDMLP_OK; i++) {
            if (s->n == s->cap) {
                rc = seq_grow(s);
            }
            if (rc == HDMLP_OK) {
                s->ep[s->n] = hdmlp_batch_epoch(b);
                s->idx[s->n++] = v[i].index;
            }
        }
        hdmlp_batch_release(b);
        if (rc != HDMLP_OK) {
            break;
        }
    }
    return rc;
}

void testds_seq_free(testds_seq *s)
{
    if (s != NULL) {
        free(s->idx);
        free(s->ep);
        memset(s, 0, sizeof *s);
    }
}

int testds_mkdtemp(const char *tag, char *buf, size_t cap)
{
    const char *base = getenv("HDMLP_TEST_TMP");
    if (base == NULL || base[0] == '\0') {
        base = "/tmp";
    }
    mkdir(base, 0755); /* may already exist */
    const int n = snprintf(buf, cap, "%s/%s-XXXXXX", base, tag);
    if (n < 0 || (size_t)n >= cap) {
        return -1;
    }
    return mkdtemp(buf) != NULL ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int testds_rm_rf(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0) {
        return errno == ENOENT ? 0 : -1;
    }
    return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

/* Growable byte buffer. */
typedef struct bytes {
    uint8_t *p;
    size_t len, cap;
} bytes;

static int bytes_reserve(bytes *b, size_t extra)
{
    if (b->len + extra <= b->cap) {
        return HDMLP_OK;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) {
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (p == NULL) {
        return hd_err(HDMLP_E_NOMEM, "testds: out of memory");
    }
    b->p = p;
    b->cap = cap;
    return HDMLP_OK;
}

static int bytes_append(bytes *b, const void *src, size_t len)
{
    const int rc = bytes_reserve(b, len);
    if (rc == HDMLP_OK && len > 0) {
        memcpy(b->p + b->len, src, len);
        b->len += len;
    }
    return rc;
}

typedef struct writer {
    const testds_spec *spec;
    const char *dir;
    uint64_t n_chunks;
    uint32_t n_segments;
    uint64_t per_seg;
    uint64_t dataset_id;
    fmt_sample *samples;
    fmt_chunk *chunks;
    fmt_segment *segments;
    fmt_label *labels;
    bytes strings;
    bytes tables; /* version 2: DIR/tables and DIR/keys */
    bytes keys;
    bytes dict;
    bytes chunk;    /* header + payload + padding of the chunk being written */
    bytes raw_keys; /* version 2: the keys of the chunk being written */
    uint8_t *raw;   /* max_size bytes */
    uint8_t *enc;   /* compressed sample */
    size_t enc_cap;
    fmt_encoder *encoder;
    int fields; /* testds_write_fields: "caption" and "score" after "data" and "label" */
} writer;

static int train_dict(writer *w)
{
    const testds_spec *spec = w->spec;
    const unsigned n = spec->n_samples < TESTDS_DICT_TRAIN_MAX ? (unsigned)spec->n_samples
                                                               : TESTDS_DICT_TRAIN_MAX;
    bytes all = {0};
    size_t *sizes = malloc(n * sizeof(size_t));
    int rc = sizes != NULL ? HDMLP_OK : hd_err(HDMLP_E_NOMEM, "testds: out of memory");
    for (unsigned i = 0; i < n && rc == HDMLP_OK; i++) {
        sizes[i] = testds_size(spec, i);
        rc = bytes_reserve(&all, sizes[i]);
        if (rc == HDMLP_OK) {
            testds_fill(i, spec->seed, all.p + all.len, sizes[i]);
            all.len += sizes[i];
        }
    }
    if (rc == HDMLP_OK) {
        rc = bytes_reserve(&w->dict, TESTDS_DICT_CAP);
    }
    if (rc == HDMLP_OK) {
        rc = fmt_dict_train(all.p, sizes, n, w->dict.p, TESTDS_DICT_CAP, &w->dict.len);
    }
    free(all.p);
    free(sizes);
    return rc;
}

size_t testds_caption(uint64_t i, char *buf)
{
    if (i % 7 == 3) {
        buf[0] = 0;
        return 0;
    }
    return (size_t)snprintf(buf, 40, "caption of sample %llu", (unsigned long long)i);
}

/* Appends sample i's stored bytes to w->chunk and fills its record (offset set by caller). */
static int add_sample(writer *w, uint64_t i)
{
    const testds_spec *spec = w->spec;
    const size_t raw_len = testds_size(spec, i);
    testds_fill(i, spec->seed, w->raw, raw_len);
    fmt_sample *s = &w->samples[i];
    const uint8_t *stored = w->raw;
    size_t stored_len = raw_len;
    uint32_t codec = FMT_CODEC_NONE;
    if (spec->compress) {
        const int rc =
            fmt_encode(w->encoder, w->raw, raw_len, &w->enc, &w->enc_cap, &stored_len, &codec);
        if (rc != HDMLP_OK) {
            return rc;
        }
        stored = w->enc;
    }
    s->offset = w->chunk.len; /* the chunk buffer starts with its header */
    s->stored_len = stored_len;
    s->raw_len = raw_len;
    s->checksum = fmt_checksum(stored, stored_len);
    s->codec = codec;
    s->label = (uint32_t)(i % spec->n_labels);
    char key[32];
    const int klen = snprintf(key, sizeof(key), "sample-%llu", (unsigned long long)i);
    s->key_len = (uint32_t)klen;
    int rc;
    if (w->spec->version == 1) {
        s->key_off = (uint32_t)w->strings.len;
        rc = bytes_append(&w->strings, key, (size_t)klen);
    } else { /* version 2: the key block's bytes, after the lengths (table_v2) */
        s->key_off = 0;
        rc = bytes_append(&w->raw_keys, key, (size_t)klen);
    }
    if (rc == HDMLP_OK) {
        rc = bytes_append(&w->chunk, stored, stored_len);
    }
    if (rc == HDMLP_OK && w->fields) { /* the caption's bytes follow the data's */
        char caption[40];
        rc = bytes_append(&w->chunk, caption, testds_caption(i, caption));
    }
    return rc;
}

/* Version 2: chunk c's table (data and label value records) and key block, appended. */
static int table_v2(writer *w, uint64_t c, uint64_t first, uint32_t n)
{
    fmt_chunk *ch = &w->chunks[c];
    const uint32_t nf = w->fields ? 4 : 2;
    ch->table_offset = w->tables.len;
    ch->raw_bytes = ch->max_raw = 0;
    int rc = bytes_reserve(&w->tables, (size_t)n * nf * FMT_VALUE_REC_LEN);
    for (uint32_t j = 0; j < n && rc == HDMLP_OK; j++) {
        const fmt_sample *s = &w->samples[first + j];
        uint8_t *r = w->tables.p + w->tables.len;
        const fmt_value data =
            fmt_value_stored(s->stored_len, s->raw_len, s->checksum, s->codec);
        const fmt_value label = fmt_value_int64(s->label);
        fmt_value_encode(r, &data);
        fmt_value_encode(r + FMT_VALUE_REC_LEN, &label);
        uint64_t raw = s->raw_len;
        if (nf == 4) {
            char caption[40];
            const size_t len = testds_caption(first + j, caption);
            fmt_value v = {.state = FMT_VALUE_ABSENT};
            if (len != 0) {
                v = fmt_value_stored(len, len, fmt_checksum(caption, len), FMT_CODEC_NONE);
            }
            fmt_value_encode(r + 2 * FMT_VALUE_REC_LEN, &v);
            const double score = (double)(first + j) / 2;
            uint64_t bits;
            memcpy(&bits, &score, sizeof(bits));
            uint8_t b8[8];
            fmt_st64(b8, bits);
            const fmt_value sv = {.inline_bits = bits,
                                  .checksum = (uint32_t)(fmt_checksum(b8, 8) & UINT32_MAX),
                                  .state = FMT_VALUE_INLINE};
            fmt_value_encode(r + 3 * FMT_VALUE_REC_LEN, &sv);
            raw += len;
        }
        w->tables.len += (size_t)nf * FMT_VALUE_REC_LEN;
        ch->raw_bytes += raw;
        ch->max_raw = raw > ch->max_raw ? raw : ch->max_raw;
    }
    ch->table_checksum =
        fmt_checksum(w->tables.p + ch->table_offset, (size_t)n * nf * FMT_VALUE_REC_LEN);
    ch->keys_offset = w->keys.len;
    for (uint32_t j = 0; j < n && rc == HDMLP_OK; j++) {
        uint8_t len[4];
        fmt_st32(len, w->samples[first + j].key_len);
        rc = bytes_append(&w->keys, len, 4);
    }
    if (rc == HDMLP_OK) {
        rc = bytes_append(&w->keys, w->raw_keys.p, w->raw_keys.len);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    ch->keys_length = w->keys.len - ch->keys_offset;
    ch->keys_checksum = fmt_checksum(w->keys.p + ch->keys_offset, (size_t)ch->keys_length);
    static const uint8_t zero[8];
    return bytes_append(&w->keys, zero, (8 - w->keys.len % 8) % 8);
}

static int write_segments(writer *w)
{
    const testds_spec *spec = w->spec;
    char path[4096];
    uint64_t c = 0;
    for (uint32_t seg = 0; seg < w->n_segments; seg++) {
        snprintf(path, sizeof(path), "%s/" FMT_SEGMENT_NAME_FMT, w->dir, seg);
        const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            return hd_err(hd_errno_code(errno), "%s: open: %s", path, strerror(errno));
        }
        uint64_t seg_off = 0;
        uint64_t n_in_seg = 0;
        int rc = HDMLP_OK;
        for (; c < w->n_chunks && n_in_seg < w->per_seg && rc == HDMLP_OK; c++, n_in_seg++) {
            const uint64_t first = c * spec->chunk_size;
            const uint64_t left = spec->n_samples - first;
            const uint32_t n = left < spec->chunk_size ? (uint32_t)left : spec->chunk_size;
            w->chunk.len = 0;
            w->raw_keys.len = 0;
            rc = bytes_reserve(&w->chunk, FMT_CHUNK_HEADER_LEN);
            w->chunk.len = FMT_CHUNK_HEADER_LEN;
            for (uint32_t j = 0; j < n && rc == HDMLP_OK; j++) {
                rc = add_sample(w, first + j);
            }
            if (rc != HDMLP_OK) {
                break;
            }
            const uint64_t len = w->chunk.len;
            fmt_chunk *ch = &w->chunks[c];
            ch->offset = seg_off;
            ch->length = len;
            ch->segment = seg;
            ch->n_samples = n;
            ch->header_checksum = fmt_chunk_header_encode(w->chunk.p, w->dataset_id, c, n,
                                                          len - FMT_CHUNK_HEADER_LEN);
            if (spec->version != 1) {
                rc = table_v2(w, c, first, n);
                if (rc != HDMLP_OK) {
                    break;
                }
            }
            const size_t padded = (size_t)fmt_align_up(len);
            rc = bytes_reserve(&w->chunk, padded - len);
            if (rc == HDMLP_OK) {
                memset(w->chunk.p + len, 0, padded - len);
                rc = write_all(fd, w->chunk.p, padded, path);
            }
            seg_off += padded;
        }
        w->segments[seg].size = seg_off;
        w->segments[seg].n_chunks = n_in_seg;
        if (close(fd) != 0 && rc == HDMLP_OK) {
            rc = hd_err(HDMLP_E_IO, "%s: close: %s", path, strerror(errno));
        }
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    return HDMLP_OK;
}

static int write_index(writer *w)
{
    const testds_spec *spec = w->spec;
    for (uint32_t l = 0; l < spec->n_labels; l++) {
        char name[32];
        const int n = snprintf(name, sizeof(name), "class-%u", l);
        w->labels[l].name_off = (uint32_t)w->strings.len;
        w->labels[l].name_len = (uint32_t)n;
        const int rc = bytes_append(&w->strings, name, (size_t)n);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.h.dataset_id = w->dataset_id;
    b.h.chunk_size = spec->chunk_size;
    b.h.pack_seed = spec->seed;
    b.h.created = 1700000000u;
    b.n_samples = spec->n_samples;
    fmt_field fields[4] = {
        {.type = FMT_FIELD_BYTES, .flags = FMT_FIELD_REQUIRED},
        {.type = FMT_FIELD_INT64, .flags = FMT_FIELD_REQUIRED | FMT_FIELD_LABEL},
        {.type = FMT_FIELD_TEXT},
        {.type = FMT_FIELD_FLOAT64, .flags = FMT_FIELD_REQUIRED}};
    const int nf = w->fields ? 4 : 2;
    if (spec->version == 1) {
        b.samples = w->samples;
    } else {
        static const char *const names[4] = {"data", "label", "caption", "score"};
        for (int f = 0; f < nf; f++) {
            fields[f].name_off = (uint32_t)w->strings.len;
            fields[f].name_len = (uint32_t)strlen(names[f]);
            const int rc = bytes_append(&w->strings, names[f], fields[f].name_len);
            if (rc != HDMLP_OK) {
                return rc;
            }
        }
        b.version = 2;
        b.fields = fields;
        b.n_fields = (uint32_t)nf;
        b.h.label_field = 1;
        b.h.tables_bytes = w->tables.len;
        b.h.keys_bytes = w->keys.len;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", w->dir, FMT_TABLES_NAME);
        int bad = testds_write_file(path, w->tables.p, w->tables.len);
        if (!bad) {
            snprintf(path, sizeof(path), "%s/%s", w->dir, FMT_KEYS_NAME);
            bad = testds_write_file(path, w->keys.p, w->keys.len);
        }
        if (bad) {
            return hd_err(HDMLP_E_IO, "%s: cannot write", path);
        }
    }
    b.chunks = w->chunks;
    b.n_chunks = w->n_chunks;
    b.segments = w->segments;
    b.n_segments = w->n_segments;
    b.labels = w->labels;
    b.n_labels = spec->n_labels;
    b.strings = w->strings.p;
    b.strings_len = w->strings.len;
    b.dict = w->dict.len ? w->dict.p : NULL;
    b.dict_len = w->dict.len;
    uint8_t *buf;
    size_t len;
    int rc = fmt_index_encode(&b, &buf, &len);
    if (rc != HDMLP_OK) {
        return rc;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", w->dir, FMT_INDEX_NAME);
    if (testds_write_file(path, buf, len) != 0) {
        rc = hd_err(HDMLP_E_IO, "%s: cannot write", path);
    }
    hd_free(buf);
    return rc;
}

static int write_dataset(const char *dir, const testds_spec *spec, int fields);

int testds_write(const char *dir, const testds_spec *spec)
{
    return write_dataset(dir, spec, 0);
}

int testds_write_fields(const char *dir, const testds_spec *spec)
{
    return spec->version == 1 ? hd_err(HDMLP_E_INVAL, "testds: fields need version 2")
                              : write_dataset(dir, spec, 1);
}

static int write_dataset(const char *dir, const testds_spec *spec, int fields)
{
    if (spec->n_samples == 0 || spec->chunk_size == 0 ||
        spec->chunk_size > FMT_MAX_CHUNK_SIZE || spec->n_labels == 0 ||
        spec->min_size > spec->max_size || spec->version > 2) {
        return hd_err(HDMLP_E_INVAL, "testds: bad spec");
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        return hd_err(hd_errno_code(errno), "%s: mkdir: %s", dir, strerror(errno));
    }
    writer w;
    memset(&w, 0, sizeof(w));
    w.spec = spec;
    w.dir = dir;
    w.fields = fields;
    w.n_chunks = (spec->n_samples + spec->chunk_size - 1) / spec->chunk_size;
    w.per_seg = spec->chunks_per_segment ? spec->chunks_per_segment : w.n_chunks;
    w.n_segments = (uint32_t)((w.n_chunks + w.per_seg - 1) / w.per_seg);
    w.dataset_id = testds_dataset_id(spec->seed);
    w.samples = calloc(spec->n_samples, sizeof(fmt_sample));
    w.chunks = calloc(w.n_chunks, sizeof(fmt_chunk));
    w.segments = calloc(w.n_segments, sizeof(fmt_segment));
    w.labels = calloc(spec->n_labels, sizeof(fmt_label));
    w.raw = malloc((size_t)spec->max_size + 1);
    int rc = HDMLP_OK;
    if (!w.samples || !w.chunks || !w.segments || !w.labels || !w.raw) {
        rc = hd_err(HDMLP_E_NOMEM, "testds: out of memory");
    }
    if (rc == HDMLP_OK && spec->compress && spec->dict) {
        rc = train_dict(&w);
    }
    if (rc == HDMLP_OK && spec->compress) {
        rc = fmt_encoder_create(1, w.dict.p, w.dict.len, &w.encoder);
    }
    if (rc == HDMLP_OK && spec->version != 1) { /* the files' headers */
        uint8_t hdr[FMT_FILE_HEADER_LEN];
        fmt_file_header_encode(hdr, FMT_TABLES_MAGIC, w.dataset_id);
        rc = bytes_append(&w.tables, hdr, sizeof(hdr));
        fmt_file_header_encode(hdr, FMT_KEYS_MAGIC, w.dataset_id);
        if (rc == HDMLP_OK) {
            rc = bytes_append(&w.keys, hdr, sizeof(hdr));
        }
    }
    if (rc == HDMLP_OK) {
        rc = write_segments(&w);
    }
    if (rc == HDMLP_OK) {
        rc = write_index(&w);
    }
    fmt_encoder_free(w.encoder);
    free(w.samples);
    free(w.chunks);
    free(w.segments);
    free(w.labels);
    free(w.strings.p);
    free(w.tables.p);
    free(w.keys.p);
    free(w.raw_keys.p);
    free(w.dict.p);
    free(w.chunk.p);
    free(w.raw);
    hd_free(w.enc);
    return rc;
}
