/* Reading a packed dataset: lazily opened segment files, single sample reads and
 * whole-dataset verification; the accessors. Opening and closing: loader_dataset_open.c;
 * version 2's tables: loader_dataset_tables2.c; keys: loader_dataset_keys.c. */
#include "loader_dataset_private.h"
#include "loader_source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ds_segment_fd(hdmlp_dataset *ds, uint32_t s, int direct)
{
    if (ds->store != NULL) {
        return hd_err(HDMLP_E_UNSUPPORTED, "%s: segments of a remote dataset have no file",
                      ds->path);
    }
    if (s >= ds->ix.h.n_segments) {
        return hd_err(HDMLP_E_RANGE, "segment %u out of range (%u segments)", s,
                      ds->ix.h.n_segments);
    }
    int *slot = direct ? &ds->seg_fd_direct[s] : &ds->seg_fd[s];
    pthread_mutex_lock(&ds->fd_lock);
    int fd = *slot;
    if (fd < 0) {
        char path[DS_PATH_MAX];
        ds_segment_path(ds, s, path, sizeof(path));
        fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
        if (fd < 0) {
            const int err = errno;
            pthread_mutex_unlock(&ds->fd_lock);
            if (direct && err == EINVAL) {
                return hd_err(HDMLP_E_UNSUPPORTED,
                              "%s: O_DIRECT is not supported by this file system", path);
            }
            return hd_err(hd_errno_code(err), "%s: open: %s", path, strerror(err));
        }
        if (!direct) {
            /* No readahead: a read fetches exactly its bytes, in requests as large as the
             * device takes, whatever the device's readahead is set to. */
            (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
        }
        *slot = fd;
    }
    pthread_mutex_unlock(&ds->fd_lock);
    return fd;
}

/* Reads exactly len bytes at off from segment s, retrying short reads and EINTR. */
static int ds_pread_full(hdmlp_dataset *ds, uint32_t s, void *buf, uint64_t len, uint64_t off)
{
    if (ds->store != NULL) {
        return ds_remote_read(ds, s, buf, len, off);
    }
    const int fd = ds_segment_fd(ds, s, 0);
    if (fd < 0) {
        return fd;
    }
    char path[DS_PATH_MAX];
    ds_segment_path(ds, s, path, sizeof(path));
    return ds_fd_read(fd, buf, len, off, path, "segment");
}

int ds_read(hdmlp_dataset *ds, uint32_t s, void *buf, uint64_t len, uint64_t off)
{
    return ds_pread_full(ds, s, buf, len, off);
}

static int ds_decoder_get(hdmlp_dataset *ds, fmt_decoder **out)
{
    ds_private *p = ds_priv(ds);
    pthread_mutex_lock(&p->pool_lock);
    if (p->pool_n > 0) {
        *out = p->pool[--p->pool_n];
        pthread_mutex_unlock(&p->pool_lock);
        return HDMLP_OK;
    }
    pthread_mutex_unlock(&p->pool_lock);
    return fmt_decoder_create(&ds->ix, out);
}

static void ds_decoder_put(hdmlp_dataset *ds, fmt_decoder *d)
{
    ds_private *p = ds_priv(ds);
    pthread_mutex_lock(&p->pool_lock);
    if (p->pool_n < DS_POOL_MAX) {
        p->pool[p->pool_n++] = d;
        d = NULL;
    }
    pthread_mutex_unlock(&p->pool_lock);
    fmt_decoder_free(d);
}
int ds_table(const hdmlp_dataset *ds, uint64_t c, void *buf, size_t cap, fmt_table *out)
{
    return fmt_tables_get(&ds->tables, c, buf, cap, out);
}

/* A buffer for one table of ds's source: NULL with *rc OK when it needs none. */
static void *ds_table_buf(const hdmlp_dataset *ds, int *rc)
{
    *rc = HDMLP_OK;
    if (ds->tables.scratch == 0) {
        return NULL;
    }
    void *buf = hd_malloc(ds->tables.scratch);
    if (buf == NULL) {
        *rc = hd_err(HDMLP_E_NOMEM, "cannot allocate %zu bytes for a sample table",
                     ds->tables.scratch);
    }
    return buf;
}

/* Version 2: sample index's record (slot `slot` of chunk c) from the table held last, else
 * read, the one just read then held in its place. */
/* Copies slot's value records of a version-2 view into vals (when not NULL). */
static void copy_vals(const hdmlp_dataset *ds, const fmt_table *t, uint32_t slot, uint8_t *vals)
{
    if (vals != NULL && t->rec == NULL) {
        memcpy(vals, t->val + (size_t)slot * t->stride,
               (size_t)ds->ix.h.n_fields * FMT_VALUE_REC_LEN);
    }
}

static int ds_record_cached(const hdmlp_dataset *ds, uint64_t c, uint32_t slot, fmt_sample *out,
                            uint8_t *vals)
{
    ds_private *p = ds_priv(ds);
    pthread_mutex_lock(&p->rec_lock);
    const bool hit = p->rec_chunk == c;
    if (hit) {
        fmt_table_sample(&p->rec_tab, slot, out);
        copy_vals(ds, &p->rec_tab, slot, vals);
    }
    pthread_mutex_unlock(&p->rec_lock);
    if (hit) {
        return HDMLP_OK;
    }
    int rc;
    uint8_t *buf = ds_table_buf(ds, &rc);
    if (rc != HDMLP_OK) {
        return rc;
    }
    fmt_table t;
    rc = ds_table(ds, c, buf, ds->tables.scratch, &t);
    if (rc == HDMLP_OK) {
        fmt_table_sample(&t, slot, out);
        copy_vals(ds, &t, slot, vals);
        /* keep the table (a view into buf, or into memory the source holds) */
        pthread_mutex_lock(&p->rec_lock);
        uint8_t *old = p->rec_buf;
        p->rec_buf = buf;
        p->rec_tab = t;
        p->rec_chunk = c;
        pthread_mutex_unlock(&p->rec_lock);
        buf = old;
    }
    hd_free(buf);
    return rc;
}

int ds_sample_record(const hdmlp_dataset *ds, uint64_t index, fmt_sample *out)
{
    return ds_sample_values(ds, index, out, NULL);
}

int ds_sample_values(const hdmlp_dataset *ds, uint64_t index, fmt_sample *out, uint8_t *vals)
{
    if (index >= ds->ix.h.n_samples) {
        return hd_err(HDMLP_E_RANGE, "sample %llu out of range (%llu samples)", (ull)index,
                      (ull)ds->ix.h.n_samples);
    }
    const uint64_t c = index / ds->ix.h.chunk_size;
    const uint32_t slot = (uint32_t)(index - c * ds->ix.h.chunk_size);
    if (ds->tables.scratch != 0) {
        return ds_record_cached(ds, c, slot, out, vals);
    }
    fmt_table t;
    const int rc = ds_table(ds, c, NULL, 0, &t);
    if (rc == HDMLP_OK) {
        fmt_table_sample(&t, slot, out);
        copy_vals(ds, &t, slot, vals);
    }
    return rc;
}

uint64_t hdmlp_dataset_sample_count(const hdmlp_dataset *ds) { return ds->ix.h.n_samples; }
uint32_t hdmlp_dataset_chunk_size(const hdmlp_dataset *ds) { return ds->ix.h.chunk_size; }
uint64_t hdmlp_dataset_chunk_count(const hdmlp_dataset *ds) { return ds->ix.h.n_chunks; }
uint32_t hdmlp_dataset_segment_count(const hdmlp_dataset *ds) { return ds->ix.h.n_segments; }
uint32_t hdmlp_dataset_label_count(const hdmlp_dataset *ds) { return ds->ix.h.n_labels; }
uint64_t hdmlp_dataset_seed(const hdmlp_dataset *ds) { return ds->ix.h.pack_seed; }

uint64_t hdmlp_dataset_created(const hdmlp_dataset *ds) { return ds->ix.h.created; }

uint64_t hdmlp_dataset_dict_size(const hdmlp_dataset *ds) { return ds->ix.dict_len; }
uint64_t hdmlp_dataset_raw_bytes(const hdmlp_dataset *ds) { return ds->ix.h.raw_bytes; }
uint64_t hdmlp_dataset_stored_bytes(const hdmlp_dataset *ds) { return ds->ix.h.stored_bytes; }

const char *hdmlp_dataset_label_name(const hdmlp_dataset *ds, uint32_t label, size_t *size)
{
    if (ds == NULL || label >= ds->ix.h.n_labels) {
        if (size != NULL) {
            *size = 0;
        }
        return NULL;
    }
    const ds_private *p = ds_priv(ds);
    if (size != NULL) {
        *size = (size_t)(p->label_pos[label + 1] - p->label_pos[label] - 1);
    }
    return p->label_names + p->label_pos[label];
}

int hdmlp_dataset_sample_info(const hdmlp_dataset *ds, uint64_t index, hdmlp_sample_info *info)
{
    if (ds == NULL || info == NULL) {
        return hd_err(HDMLP_E_INVAL, "sample_info: NULL argument");
    }
    if (index >= ds->ix.h.n_samples) {
        return hd_err(HDMLP_E_RANGE, "sample %llu out of range (%llu samples)", (ull)index,
                      (ull)ds->ix.h.n_samples);
    }
    fmt_sample s;
    int rc = ds_sample_record(ds, index, &s);
    if (rc != HDMLP_OK) {
        return rc;
    }
    info->index = index;
    info->chunk = index / ds->ix.h.chunk_size;
    info->slot = (uint32_t)(index % ds->ix.h.chunk_size);
    info->label = s.label;
    info->raw_size = s.raw_len;
    info->stored_size = s.stored_len;
    info->codec = s.codec;
    ds_keys k;
    rc = ds_chunk_keys(ds, info->chunk, 0, &k);
    if (rc != HDMLP_OK) {
        return rc;
    }
    const uint8_t *key;
    uint32_t key_len;
    ds_keys_at(&k, info->slot, &key, &key_len);
    info->key_size = key_len;
    info->key = (const char *)key;
    return HDMLP_OK;
}

int hdmlp_dataset_find_key(const hdmlp_dataset *ds, const char *key, size_t key_size,
                           uint64_t *index)
{
    if (ds == NULL || index == NULL || (key == NULL && key_size != 0)) {
        return hd_err(HDMLP_E_INVAL, "find_key: NULL argument");
    }
    const fmt_index *ix = &ds->ix;
    if (key_size <= FMT_MAX_KEY_LEN) {
        for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
            ds_keys k;
            const int rc = ds_chunk_keys(ds, c, 0, &k);
            if (rc != HDMLP_OK) {
                return rc;
            }
            for (uint32_t j = 0; j < k.n; j++) {
                const uint8_t *kj;
                uint32_t len;
                ds_keys_at(&k, j, &kj, &len);
                if (len == key_size && (key_size == 0 || memcmp(kj, key, key_size) == 0)) {
                    *index = k.first + j;
                    return HDMLP_OK;
                }
            }
        }
    }
    return hd_err(HDMLP_E_NOTFOUND, "find_key: no sample with key \"%.*s\"",
                  key_size > 200 ? 200 : (int)key_size, key_size ? key : "");
}

int hdmlp_dataset_read_sample(hdmlp_dataset *ds, uint64_t index, void *buf, size_t buf_size,
                              size_t *size)
{
    if (ds == NULL || size == NULL) {
        return hd_err(HDMLP_E_INVAL, "read_sample: NULL argument");
    }
    *size = 0;
    if (index >= ds->ix.h.n_samples) {
        return hd_err(HDMLP_E_RANGE, "sample %llu out of range (%llu samples)", (ull)index,
                      (ull)ds->ix.h.n_samples);
    }
    fmt_sample s;
    uint8_t vals[FMT_MAX_FIELDS * FMT_VALUE_REC_LEN];
    int rc = ds_sample_values(ds, index, &s, ds->ix.fielded ? vals : NULL);
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (ds->ix.fielded) {
        s.vals = vals;
        s.n_fields = ds->ix.h.n_fields;
    }
    const uint64_t c = index / ds->ix.h.chunk_size;
    fmt_chunk ch;
    fmt_index_chunk(&ds->ix, c, &ch);
    if (s.raw_len > buf_size) {
        *size = s.raw_len > SIZE_MAX ? SIZE_MAX : (size_t)s.raw_len;
        return hd_err(HDMLP_E_RANGE, "sample %llu: needs %llu bytes, the buffer holds %zu",
                      (ull)index, (ull)s.raw_len, buf_size);
    }
    if (buf == NULL && s.raw_len != 0) {
        return hd_err(HDMLP_E_INVAL, "read_sample: NULL buffer");
    }
    char path[DS_PATH_MAX];
    const uint64_t off = ch.offset + s.offset;
    if (s.codec == FMT_CODEC_NONE) {
        /* Stored bytes are the raw bytes: read in place, then verify. */
        rc = ds_pread_full(ds, ch.segment, buf, s.stored_len, off);
        if (rc != HDMLP_OK) {
            return hd_err_wrap(rc, "sample %llu (chunk %llu): ", (ull)index, (ull)c);
        }
        rc = fmt_sample_verify(index, &s, buf);
        if (rc != HDMLP_OK) {
            ds_segment_path(ds, ch.segment, path, sizeof(path));
            return hd_err_wrap(rc, "%s: chunk %llu: ", path, (ull)c);
        }
    } else {
        uint8_t *stored = hd_malloc((size_t)s.stored_len);
        if (stored == NULL) {
            return hd_err(HDMLP_E_NOMEM, "sample %llu: cannot allocate %llu bytes", (ull)index,
                          (ull)s.stored_len);
        }
        rc = ds_pread_full(ds, ch.segment, stored, s.stored_len, off);
        if (rc != HDMLP_OK) {
            rc = hd_err_wrap(rc, "sample %llu (chunk %llu): ", (ull)index, (ull)c);
        } else {
            fmt_decoder *d;
            rc = ds_decoder_get(ds, &d);
            if (rc == HDMLP_OK) {
                rc = fmt_sample_decode(d, index, &s, stored, buf, buf_size);
                ds_decoder_put(ds, d);
                if (rc != HDMLP_OK) {
                    ds_segment_path(ds, ch.segment, path, sizeof(path));
                    rc = hd_err_wrap(rc, "%s: ", path);
                }
            }
        }
        hd_free(stored);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    *size = (size_t)s.raw_len;
    return HDMLP_OK;
}

int hdmlp_dataset_verify(hdmlp_dataset *ds,
                         void (*progress)(void *arg, uint64_t chunks_done,
                                          uint64_t chunks_total),
                         void *arg)
{
    if (ds == NULL) {
        return hd_err(HDMLP_E_INVAL, "verify: NULL dataset");
    }
    const fmt_index *ix = &ds->ix;
    uint64_t max_len = 0;
    for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        if (ch.length > max_len) {
            max_len = ch.length;
        }
    }
    if (max_len > SIZE_MAX) {
        return hd_err(HDMLP_E_NOMEM, "verify: chunk of %llu bytes", (ull)max_len);
    }
    uint8_t *buf = hd_malloc((size_t)max_len);
    if (buf == NULL) {
        return hd_err(HDMLP_E_NOMEM, "verify: cannot allocate %llu bytes", (ull)max_len);
    }
    char path[DS_PATH_MAX];
    int rc;
    void *tbuf = ds_table_buf(ds, &rc);
    for (uint64_t c = 0; c < ix->h.n_chunks && rc == HDMLP_OK; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        rc = ds_pread_full(ds, ch.segment, buf, ch.length, ch.offset);
        if (rc != HDMLP_OK) {
            rc = hd_err_wrap(rc, "chunk %llu: ", (ull)c);
            break;
        }
        rc = fmt_chunk_header_check(ix, c, buf, (size_t)ch.length);
        if (rc != HDMLP_OK) {
            ds_segment_path(ds, ch.segment, path, sizeof(path));
            rc = hd_err_wrap(rc, "%s: ", path);
            break;
        }
        fmt_table t;
        ds_table_recheck(ds, c); /* version 2: checks the table whole, as on a first read */
        rc = ds_table(ds, c, tbuf, ds->tables.scratch, &t);
        if (rc != HDMLP_OK) {
            break;
        }
        if (ix->h.major == 2) { /* and the key block, afresh */
            ds_keys k;
            rc = ds_chunk_keys(ds, c, 1, &k);
            if (rc != HDMLP_OK) {
                break;
            }
        }
        for (uint32_t j = 0; j < t.n; j++) {
            fmt_sample s;
            fmt_table_sample(&t, j, &s);
            if (ix->fielded) {
                s.vals = t.val + (size_t)j * t.stride;
                s.n_fields = ix->h.n_fields;
            }
            rc = fmt_sample_verify(t.first + j, &s, buf + s.offset);
            if (rc != HDMLP_OK) {
                ds_segment_path(ds, ch.segment, path, sizeof(path));
                rc = hd_err_wrap(rc, "%s: chunk %llu: ", path, (ull)c);
                break;
            }
        }
        if (rc == HDMLP_OK && progress != NULL) {
            progress(arg, c + 1, ix->h.n_chunks);
        }
    }
    hd_free(tbuf);
    hd_free(buf);
    return rc;
}

/* ---- fields ------------------------------------------------------------------------------ */

uint32_t hdmlp_dataset_field_count(const hdmlp_dataset *ds)
{
    return ds == NULL ? 0 : ds->ix.h.major == 2 ? ds->ix.h.n_fields : 2;
}

int hdmlp_dataset_field(const hdmlp_dataset *ds, uint32_t f, hdmlp_field_info *out)
{
    if (ds == NULL || out == NULL) {
        return hd_err(HDMLP_E_INVAL, "dataset_field: NULL argument");
    }
    const uint32_t nf = hdmlp_dataset_field_count(ds);
    if (f >= nf) {
        return hd_err(HDMLP_E_RANGE, "field %u out of range (%u fields)", f, nf);
    }
    memset(out, 0, sizeof(*out));
    if (ds->ix.h.major != 2) { /* version 1: its bytes and its label */
        out->name = f == 0 ? "data" : "label";
        out->name_size = f == 0 ? 4 : 5;
        out->type = f == 0 ? HDMLP_FIELD_BYTES : HDMLP_FIELD_INT64;
        out->required = 1;
        out->is_label = f == 1;
        return HDMLP_OK;
    }
    fmt_field fd;
    fmt_index_field(&ds->ix, f, &fd);
    out->name = (const char *)ds->ix.strings + fd.name_off;
    out->name_size = fd.name_len;
    out->type = fd.type;
    out->dtype = fd.dtype;
    out->ndim = fd.ndim;
    for (uint32_t d = 0; d < FMT_MAX_NDIM && d < 4; d++) {
        out->shape[d] = fd.shape[d];
    }
    out->required = (fd.flags & FMT_FIELD_REQUIRED) != 0;
    out->is_label = (fd.flags & FMT_FIELD_LABEL) != 0;
    return HDMLP_OK;
}

int hdmlp_dataset_field_index(const hdmlp_dataset *ds, const char *name, size_t name_size,
                              uint32_t *f)
{
    if (ds == NULL || f == NULL || (name == NULL && name_size != 0)) {
        return hd_err(HDMLP_E_INVAL, "dataset_field_index: NULL argument");
    }
    const uint32_t nf = hdmlp_dataset_field_count(ds);
    for (uint32_t i = 0; i < nf; i++) {
        hdmlp_field_info in;
        hdmlp_dataset_field(ds, i, &in);
        if (in.name_size == name_size && memcmp(in.name, name, name_size) == 0) {
            *f = i;
            return HDMLP_OK;
        }
    }
    return hd_err(HDMLP_E_NOTFOUND, "%s: no field named \"%.*s\" (%u fields)", ds->path,
                  name_size > 200 ? 200 : (int)name_size, name_size ? name : "", nf);
}

int hdmlp_dataset_field_records(const hdmlp_dataset *ds)
{
    return ds != NULL && ds->ix.fielded;
}

int hdmlp_sample_field(const void *data, uint64_t size, uint32_t f, hdmlp_field_value *out)
{
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "sample_field: NULL argument");
    }
    memset(out, 0, sizeof(*out));
    fmt_frec_value v;
    const int rc = fmt_frec_field(data, size, f, &v);
    if (rc != HDMLP_OK) {
        return rc;
    }
    out->present = v.state != FMT_VALUE_ABSENT;
    out->type = v.type;
    out->data = v.data;
    out->size = v.size;
    if (v.state == FMT_VALUE_INLINE) {
        out->i64 = (int64_t)v.bits;
        if (v.type == FMT_FIELD_FLOAT32) {
            float x;
            const uint32_t lo = (uint32_t)v.bits;
            memcpy(&x, &lo, sizeof(x));
            out->f64 = x;
        } else if (v.type == FMT_FIELD_FLOAT64) {
            memcpy(&out->f64, &v.bits, sizeof(out->f64));
        } else {
            out->f64 = (double)out->i64;
        }
    }
    return HDMLP_OK;
}

int hdmlp_dataset_field_stats(hdmlp_dataset *ds, hdmlp_field_stats *out, uint32_t n_out)
{
    if (ds == NULL || (out == NULL && n_out != 0)) {
        return hd_err(HDMLP_E_INVAL, "dataset_field_stats: NULL argument");
    }
    const fmt_index *ix = &ds->ix;
    const uint32_t nf = hdmlp_dataset_field_count(ds);
    n_out = n_out < nf ? n_out : nf;
    memset(out, 0, n_out * sizeof(*out));
    if (ix->h.major != 2) {
        for (uint32_t f = 0; f < n_out; f++) {
            out[f].present = ix->h.n_samples;
            out[f].raw_bytes = f == 0 ? ix->h.raw_bytes : 8 * ix->h.n_samples;
            out[f].stored_bytes = f == 0 ? ix->h.stored_bytes : 0;
        }
        return HDMLP_OK;
    }
    int rc;
    uint8_t *buf = ds_table_buf(ds, &rc);
    for (uint64_t c = 0; rc == HDMLP_OK && c < ix->h.n_chunks; c++) {
        fmt_table t;
        rc = ds_table(ds, c, buf, ds->tables.scratch, &t);
        for (uint32_t s = 0; rc == HDMLP_OK && s < t.n; s++) {
            const uint8_t *r = t.val + (size_t)s * t.stride;
            for (uint32_t f = 0; f < n_out; f++, r += FMT_VALUE_REC_LEN) {
                const bool stored = r[13] == FMT_VALUE_STORED, inl = r[13] == FMT_VALUE_INLINE;
                out[f].present += stored || inl;
                out[f].raw_bytes += stored ? fmt_ld32(r + 4) : inl ? 8 : 0;
                out[f].stored_bytes += stored ? fmt_ld32(r) : 0;
            }
        }
    }
    hd_free(buf);
    return rc;
}
