/*
 * The samples' keys, either version, through one accessor (ds_chunk_keys, ds_keys_at). In
 * version 1 a key is a sample record's key_offset/key_length into the index's strings. In
 * version 2 it is in its chunk's key block in DIR/keys (n_c u32 lengths, then the keys back
 * to back): the file is mapped (a remote object fetched) once, on the first key asked for,
 * and held until close, so a key handed out (hdmlp_sample_info.key) stays valid while the
 * dataset is open; each block is checked (fmt_keys_check) before its first use.
 */
#include "loader_dataset_private.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The keys file at path (st: its stat) against the index's keys_bytes. */
static int keys_check_size(const fmt_index *ix, const char *path, const struct stat *st)
{
    if (!S_ISREG(st->st_mode)) {
        return hd_err(HDMLP_E_CORRUPT, "%s: keys file is not a regular file", path);
    }
    if ((uint64_t)st->st_size != ix->h.keys_bytes) {
        return hd_err(HDMLP_E_CORRUPT, "%s: keys file has %llu bytes, the index says %llu (%s)",
                      path, (ull)st->st_size, (ull)ix->h.keys_bytes,
                      (uint64_t)st->st_size < ix->h.keys_bytes ? "truncated" : "wrong file");
    }
    return HDMLP_OK;
}

int ds_keys2_open(ds_private *p)
{
    hdmlp_dataset *ds = &p->pub;
    const fmt_index *ix = &ds->ix;
    const uint64_t nc = ix->h.n_chunks;
    p->keys_ok = hd_calloc(nc ? (size_t)nc : 1, sizeof(atomic_uchar));
    if (p->keys_ok == NULL) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for the key blocks of %llu chunks",
                      (ull)nc);
    }
    if (ds->store != NULL) {
        const char *const name = FMT_KEYS_NAME;
        return ds_remote_check_sizes(ds, &name, &ix->h.keys_bytes, 1);
    }
    char path[DS_PATH_MAX];
    ds_file_path(ds, FMT_KEYS_NAME, path, sizeof(path));
    struct stat st;
    if (stat(path, &st) != 0) {
        const int err = errno;
        if (err == ENOENT) {
            return hd_err(HDMLP_E_NOTFOUND,
                          "%s: keys file missing (a version-2 dataset's sample keys)", path);
        }
        return hd_err(hd_errno_code(err), "%s: stat: %s", path, strerror(err));
    }
    return keys_check_size(ix, path, &st);
}

void ds_keys2_close(ds_private *p)
{
    if (p->keys != NULL) {
        if (p->keys_mapped) {
            munmap((void *)(uintptr_t)p->keys, (size_t)p->pub.ix.h.keys_bytes);
        } else {
            hd_free((void *)(uintptr_t)p->keys);
        }
        p->keys = NULL;
    }
    hd_free(p->keys_ok);
    p->keys_ok = NULL;
}

/* Reads the whole keys file (fd, size bytes) into a new buffer: where it cannot be mapped. */
static int keys_read(int fd, const char *path, size_t size, uint8_t **out)
{
    uint8_t *buf = hd_malloc(size);
    if (buf == NULL) {
        return hd_err(HDMLP_E_NOMEM, "%s: cannot allocate %zu bytes for the keys", path, size);
    }
    const int rc = ds_fd_read(fd, buf, size, 0, path, "keys file");
    if (rc != HDMLP_OK) {
        hd_free(buf);
        return rc;
    }
    *out = buf;
    return HDMLP_OK;
}

/* Maps (or reads) the local keys file into p->keys. */
static int keys_load_local(ds_private *p)
{
    const fmt_index *ix = &p->pub.ix;
    char path[DS_PATH_MAX];
    ds_file_path(&p->pub, FMT_KEYS_NAME, path, sizeof(path));
    if (ix->h.keys_bytes > SIZE_MAX) {
        return hd_err(HDMLP_E_RANGE, "%s: too large to map", path);
    }
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        return hd_err(hd_errno_code(err), "%s: open: %s", path, strerror(err));
    }
    struct stat st;
    int rc = fstat(fd, &st) == 0
                 ? HDMLP_OK
                 : hd_err(hd_errno_code(errno), "%s: stat: %s", path, strerror(errno));
    if (rc == HDMLP_OK) {
        rc = keys_check_size(ix, path, &st); /* again: it may have changed since open */
    }
    uint8_t hdr[FMT_FILE_HEADER_LEN];
    if (rc == HDMLP_OK && pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
        rc = hd_err(HDMLP_E_IO, "%s: cannot read its header", path);
    }
    if (rc == HDMLP_OK) {
        rc = fmt_file_header_check(ix, path, FMT_KEYS_MAGIC, hdr, sizeof(hdr));
    }
    if (rc == HDMLP_OK) {
        const size_t size = (size_t)ix->h.keys_bytes;
        void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            p->keys = map;
            p->keys_mapped = true;
        } else { /* some file systems cannot map files */
            uint8_t *buf = NULL;
            rc = keys_read(fd, path, size, &buf);
            p->keys = buf;
            p->keys_mapped = false;
        }
    }
    close(fd);
    return rc;
}

/* DIR/keys, held from the first call on (*out). */
static int keys_hold(ds_private *p, const uint8_t **out)
{
    hdmlp_dataset *ds = &p->pub;
    int rc = HDMLP_OK;
    pthread_mutex_lock(&ds->fd_lock);
    if (p->keys == NULL) {
        if (ds->store != NULL) {
            uint8_t *buf = NULL;
            rc = ds_remote_fetch(ds, FMT_KEYS_NAME, ds->ix.h.keys_bytes, &buf);
            if (rc == HDMLP_OK) {
                char url[DS_PATH_MAX];
                ds_file_path(ds, FMT_KEYS_NAME, url, sizeof(url));
                rc = fmt_file_header_check(&ds->ix, url, FMT_KEYS_MAGIC, buf,
                                           (size_t)ds->ix.h.keys_bytes);
            }
            if (rc != HDMLP_OK) {
                hd_free(buf);
                buf = NULL;
            }
            p->keys = buf;
            p->keys_mapped = false;
        } else {
            rc = keys_load_local(p);
        }
    }
    *out = p->keys;
    pthread_mutex_unlock(&ds->fd_lock);
    return rc;
}

int ds_chunk_keys(const hdmlp_dataset *ds, uint64_t c, int recheck, ds_keys *out)
{
    const fmt_index *ix = &ds->ix;
    memset(out, 0, sizeof(*out));
    if (c >= ix->h.n_chunks) {
        return hd_err(HDMLP_E_RANGE, "keys of chunk %llu: out of range (%llu chunks)", (ull)c,
                      (ull)ix->h.n_chunks);
    }
    out->chunk = c;
    out->first = c * ix->h.chunk_size;
    if (ix->h.major != 2) {
        const int rc = fmt_index_table(ix, c, &out->t); /* a view into the index */
        out->n = out->t.n;
        out->strings = ix->strings;
        return rc;
    }
    ds_private *p = ds_priv(ds);
    const uint8_t *keys = NULL;
    int rc = keys_hold(p, &keys);
    if (rc != HDMLP_OK) {
        return rc;
    }
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    const uint8_t *blk = keys + ch.keys_offset; /* the index keeps blocks within keys_bytes */
    if (recheck || !atomic_load_explicit(&p->keys_ok[c], memory_order_acquire)) {
        rc = fmt_keys_check(ix, c, blk, ch.keys_length);
        if (rc != HDMLP_OK) {
            char path[DS_PATH_MAX];
            ds_file_path(ds, FMT_KEYS_NAME, path, sizeof(path));
            return hd_err_wrap(rc, "%s: ", path);
        }
        atomic_store_explicit(&p->keys_ok[c], 1, memory_order_release);
    }
    out->blk = blk;
    out->n = ch.n_samples;
    out->pos = 4ull * ch.n_samples;
    return HDMLP_OK;
}

void ds_keys_at(ds_keys *k, uint32_t t, const uint8_t **key, uint32_t *len)
{
    if (k->blk == NULL) {
        fmt_sample s;
        fmt_table_sample(&k->t, t, &s);
        *key = k->strings + s.key_off;
        *len = s.key_len;
        return;
    }
    if (t == k->next) {
        *key = k->blk + k->pos;
        *len = fmt_ld32(k->blk + 4ull * t);
    } else {
        fmt_keys_at(k->blk, k->n, t, key, len);
    }
    k->pos = (uint64_t)(*key - k->blk) + *len;
    k->next = t + 1;
}
