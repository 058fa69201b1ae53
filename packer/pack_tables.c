/* Version 2's per-chunk files (FORMAT.md): DIR/tables (each chunk's value records) and
 * DIR/keys (each chunk's key block), appended chunk by chunk as the writer appends the
 * chunks, through one buffer each, fsynced at the end; each chunk's record gets its table's
 * and key block's place and checksum, its raw bytes and largest sample. */
#include "pack_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define TABLEW_FLUSH (1u << 20)

static int file_err(const pack_tablew *w, const char *name, const char *what, int err)
{
    return hd_err(hd_errno_code(err), "cannot %s %s/%s: %s", what, w->dir, name, strerror(err));
}

int pack_tablew_open(pack_tablew *w, int dirfd, const char *dir, uint64_t dataset_id)
{
    memset(w, 0, sizeof(*w));
    w->dir = dir;
    w->fd[0] = w->fd[1] = -1;
    static const char *const names[2] = {FMT_TABLES_NAME, FMT_KEYS_NAME};
    static const char *const magic[2] = {FMT_TABLES_MAGIC, FMT_KEYS_MAGIC};
    for (int i = 0; i < 2; i++) {
        w->fd[i] = openat(dirfd, names[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (w->fd[i] < 0) {
            return file_err(w, names[i], "create", errno);
        }
        uint8_t hdr[FMT_FILE_HEADER_LEN];
        fmt_file_header_encode(hdr, magic[i], dataset_id);
        const int rc = pack_buf_append(&w->buf[i], hdr, sizeof(hdr));
        if (rc != HDMLP_OK) {
            return rc;
        }
        w->bytes[i] = sizeof(hdr);
    }
    return HDMLP_OK;
}

static int flush(pack_tablew *w, int i)
{
    static const char *const names[2] = {FMT_TABLES_NAME, FMT_KEYS_NAME};
    pack_buf *const b = &w->buf[i];
    size_t done = 0;
    while (done < b->len) {
        const ssize_t r = write(w->fd[i], b->p + done, b->len - done);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return file_err(w, names[i], "write", errno);
        }
        done += (size_t)r;
    }
    b->len = 0;
    return HDMLP_OK;
}

int pack_tablew_chunk(pack_tablew *w, const fmt_sample *s, const uint8_t *vals, uint32_t nf,
                      const uint8_t *keys, uint32_t n, fmt_chunk *rec)
{
    /* Table: n × (data, label), or the given n × nf value records. Checksums are taken
     * over the records as appended. */
    const size_t tlen = (size_t)n * (vals ? nf : PACK_FIELDS) * FMT_VALUE_REC_LEN;
    const size_t t0 = w->buf[0].len;
    int rc = pack_buf_reserve(&w->buf[0], tlen);
    if (rc != HDMLP_OK) {
        return rc;
    }
    uint64_t raw = 0, max_raw = 0;
    if (vals != NULL) {
        memcpy(w->buf[0].p + t0, vals, tlen);
    }
    for (uint32_t t = 0; vals != NULL && t < n; t++) {
        raw += s[t].raw_len; /* its stored values' raw lengths */
        max_raw = s[t].raw_len > max_raw ? s[t].raw_len : max_raw;
    }
    for (uint32_t t = 0; vals == NULL && t < n; t++) {
        uint8_t *const r = w->buf[0].p + t0 + (size_t)t * PACK_FIELDS * FMT_VALUE_REC_LEN;
        const fmt_value data =
            fmt_value_stored(s[t].stored_len, s[t].raw_len, s[t].checksum, s[t].codec);
        const fmt_value label = fmt_value_int64(s[t].label);
        fmt_value_encode(r, &data);
        fmt_value_encode(r + FMT_VALUE_REC_LEN, &label);
        raw += s[t].raw_len;
        max_raw = s[t].raw_len > max_raw ? s[t].raw_len : max_raw;
    }
    w->buf[0].len += tlen;
    rec->table_offset = w->bytes[0];
    rec->table_checksum = fmt_checksum(w->buf[0].p + t0, tlen);
    rec->raw_bytes = raw;
    rec->max_raw = max_raw;
    w->bytes[0] += tlen;
    if (w->buf[0].len >= TABLEW_FLUSH && (rc = flush(w, 0)) != HDMLP_OK) {
        return rc;
    }
    /* Key block: n lengths, the keys, zeros to a multiple of 8 (not part of the block). */
    const size_t k0 = w->buf[1].len;
    rec->keys_offset = w->bytes[1];
    for (uint32_t t = 0; t < n && rc == HDMLP_OK; t++) {
        uint8_t len[4];
        fmt_st32(len, s[t].key_len);
        rc = pack_buf_append(&w->buf[1], len, 4);
    }
    for (uint32_t t = 0; t < n && rc == HDMLP_OK; t++) {
        rc = pack_buf_append(&w->buf[1], keys + s[t].key_off, s[t].key_len);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    rec->keys_length = w->buf[1].len - k0;
    rec->keys_checksum = fmt_checksum(w->buf[1].p + k0, (size_t)rec->keys_length);
    w->bytes[1] += rec->keys_length;
    static const uint8_t zero[8];
    const size_t pad = (size_t)((8 - w->bytes[1] % 8) % 8);
    if (pad != 0 && (rc = pack_buf_append(&w->buf[1], zero, pad)) != HDMLP_OK) {
        return rc;
    }
    w->bytes[1] += pad;
    return w->buf[1].len >= TABLEW_FLUSH ? flush(w, 1) : HDMLP_OK;
}

int pack_tablew_finish(pack_tablew *w)
{
    static const char *const names[2] = {FMT_TABLES_NAME, FMT_KEYS_NAME};
    for (int i = 0; i < 2; i++) {
        int rc = flush(w, i);
        if (rc == HDMLP_OK && fsync(w->fd[i]) != 0) {
            rc = file_err(w, names[i], "fsync", errno);
        }
        if (rc == HDMLP_OK && close(w->fd[i]) != 0) {
            rc = file_err(w, names[i], "close", errno);
        }
        w->fd[i] = -1;
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    return HDMLP_OK;
}

void pack_tablew_free(pack_tablew *w)
{
    for (int i = 0; i < 2; i++) {
        if (w->fd[i] >= 0) {
            close(w->fd[i]);
            w->fd[i] = -1;
        }
        pack_buf_free(&w->buf[i]);
    }
}
