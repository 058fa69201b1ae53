/* Opening a packed dataset: mapped, validated index; lazily opened segment files; single
 * sample reads and whole-dataset verification. */
#include "loader_dataset.h"
#include "loader_source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long long ull;

#define DS_POOL_MAX 16u
#define DS_PATH_MAX 4096u

/* The public struct plus what only this file uses. `pub` comes first so a dataset pointer
 * converts to its container. */
typedef struct ds_private {
    struct hdmlp_dataset pub;
    bool index_mapped;   /* index_map is an mmap (else a heap copy) */
    char *label_names;   /* L NUL-terminated copies of the label names, back to back */
    uint64_t *label_pos; /* L + 1 start offsets into label_names */
    pthread_mutex_t pool_lock;
    fmt_decoder *pool[DS_POOL_MAX]; /* idle decoders */
    unsigned pool_n;
} ds_private;

static ds_private *ds_priv(const hdmlp_dataset *ds) { return (ds_private *)(uintptr_t)ds; }

void ds_segment_path(const hdmlp_dataset *ds, uint32_t s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/" FMT_SEGMENT_NAME_FMT, ds->path, s);
}

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
    uint8_t *p = buf;
    uint64_t done = 0;
    while (done < len) {
        uint64_t want = len - done;
        if (want > (uint64_t)1 << 30) {
            want = (uint64_t)1 << 30;
        }
        const ssize_t r = pread(fd, p + done, (size_t)want, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            const int err = errno;
            char path[DS_PATH_MAX];
            ds_segment_path(ds, s, path, sizeof(path));
            return hd_err(hd_errno_code(err),
                          "%s: read of %llu bytes at offset %llu failed: %s", path, (ull)len,
                          (ull)off, strerror(err));
        }
        if (r == 0) {
            char path[DS_PATH_MAX];
            ds_segment_path(ds, s, path, sizeof(path));
            return hd_err(HDMLP_E_CORRUPT,
                          "%s: unexpected end of file at offset %llu (segment truncated after "
                          "open?)",
                          path, (ull)(off + done));
        }
        done += (uint64_t)r;
    }
    return HDMLP_OK;
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

/* Maps (or, where mmap is not possible, reads) DIR/index into ds. */
static int ds_load_index(ds_private *p, const char *path)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        if (err == ENOENT) {
            return hd_err(HDMLP_E_NOTFOUND, "%s: no index file: not an hdmlp dataset", path);
        }
        return hd_err(hd_errno_code(err), "%s: open: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int err = errno;
        close(fd);
        return hd_err(hd_errno_code(err), "%s: stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return hd_err(HDMLP_E_CORRUPT, "%s: not a regular file: not an hdmlp dataset", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return hd_err(HDMLP_E_CORRUPT, "%s: empty file: not an hdmlp dataset", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return hd_err(HDMLP_E_RANGE, "%s: too large to map", path);
    }
    const size_t size = (size_t)st.st_size;
    int flags = MAP_PRIVATE;
#ifdef MAP_POPULATE
    flags |= MAP_POPULATE; /* the decoder touches every page right away */
#endif
    void *map = mmap(NULL, size, PROT_READ, flags, fd, 0);
    if (map != MAP_FAILED) {
        close(fd);
        p->pub.index_map = map;
        p->pub.index_size = size;
        p->index_mapped = true;
        return HDMLP_OK;
    }
    /* Some file systems cannot map files: read the index instead. */
    uint8_t *buf = hd_malloc(size);
    if (buf == NULL) {
        close(fd);
        return hd_err(HDMLP_E_NOMEM, "%s: cannot allocate %zu bytes for the index", path, size);
    }
    size_t done = 0;
    while (done < size) {
        const ssize_t r = pread(fd, buf + done, size - done, (off_t)done);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            const int err = r < 0 ? errno : 0;
            close(fd);
            hd_free(buf);
            if (r == 0) {
                return hd_err(HDMLP_E_CORRUPT, "%s: shrank while being read", path);
            }
            return hd_err(hd_errno_code(err), "%s: read: %s", path, strerror(err));
        }
        done += (size_t)r;
    }
    close(fd);
    p->pub.index_map = buf;
    p->pub.index_size = size;
    p->index_mapped = false;
    return HDMLP_OK;
}

/* NUL-terminated copies of the label names. */
static int ds_copy_labels(ds_private *p)
{
    const fmt_index *ix = &p->pub.ix;
    const uint32_t n = ix->h.n_labels;
    p->label_pos = hd_malloc(((size_t)n + 1) * sizeof(uint64_t));
    if (p->label_pos == NULL) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for %u label names", n);
    }
    uint64_t total = 0;
    for (uint32_t l = 0; l < n; l++) {
        fmt_label lab;
        fmt_index_label(ix, l, &lab);
        p->label_pos[l] = total;
        total += (uint64_t)lab.name_len + 1; /* < 2^32 * (2^32 + 1): no overflow */
    }
    p->label_pos[n] = total;
    if (total > SIZE_MAX) {
        return hd_err(HDMLP_E_NOMEM, "label names need %llu bytes", (ull)total);
    }
    p->label_names = hd_malloc((size_t)total);
    if (p->label_names == NULL) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for label names (%llu bytes)", (ull)total);
    }
    for (uint32_t l = 0; l < n; l++) {
        fmt_label lab;
        fmt_index_label(ix, l, &lab);
        char *dst = p->label_names + p->label_pos[l];
        if (lab.name_len) {
            memcpy(dst, ix->strings + lab.name_off, lab.name_len);
        }
        dst[lab.name_len] = '\0';
    }
    return HDMLP_OK;
}

/* Every segment file must exist with exactly the size the index gives. */
static int ds_check_segments(const hdmlp_dataset *ds)
{
    char path[DS_PATH_MAX];
    for (uint32_t s = 0; s < ds->ix.h.n_segments; s++) {
        fmt_segment seg;
        fmt_index_segment(&ds->ix, s, &seg);
        ds_segment_path(ds, s, path, sizeof(path));
        struct stat st;
        if (stat(path, &st) != 0) {
            const int err = errno;
            if (err == ENOENT) {
                return hd_err(HDMLP_E_NOTFOUND, "%s: segment file missing", path);
            }
            return hd_err(hd_errno_code(err), "%s: stat: %s", path, strerror(err));
        }
        if (!S_ISREG(st.st_mode)) {
            return hd_err(HDMLP_E_CORRUPT, "%s: segment is not a regular file", path);
        }
        if ((uint64_t)st.st_size != seg.size) {
            return hd_err(HDMLP_E_CORRUPT,
                          "%s: segment file has %llu bytes, the index says %llu (%s)", path,
                          (ull)st.st_size, (ull)seg.size,
                          (uint64_t)st.st_size < seg.size ? "truncated" : "wrong file");
        }
    }
    return HDMLP_OK;
}

/* Opens a local directory (remote == 0) or the URL `path` with cfg. */
static int ds_open_checked(ds_private *p, const char *path, int remote,
                           const hdmlp_source_config *cfg)
{
    hdmlp_dataset *ds = &p->pub;
    struct stat st;
    if (!remote && stat(path, &st) != 0) {
        const int err = errno;
        return hd_err(hd_errno_code(err), "%s: cannot open dataset directory: %s", path,
                      strerror(err));
    }
    if (!remote && !S_ISDIR(st.st_mode)) {
        return hd_err(HDMLP_E_NOTFOUND, "%s: not a directory: not an hdmlp dataset", path);
    }
    size_t plen = strlen(path);
    if (plen + 32 > DS_PATH_MAX) {
        return hd_err(HDMLP_E_RANGE, "%s: path too long", path);
    }
    while (remote && plen > 0 && path[plen - 1] == '/') {
        plen--; /* URLs name segments as URL/segment-N */
    }
    ds->path = hd_malloc(plen + 1);
    if (ds->path == NULL) {
        return hd_err(HDMLP_E_NOMEM, "out of memory");
    }
    memcpy(ds->path, path, plen);
    ds->path[plen] = '\0';
    int rc;
    if (remote) {
        rc = ds_remote_load(ds, path, cfg);
        p->index_mapped = false;
    } else {
        char ipath[DS_PATH_MAX];
        snprintf(ipath, sizeof(ipath), "%s/%s", path, FMT_INDEX_NAME);
        rc = ds_load_index(p, ipath);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    rc = fmt_index_decode(ds->index_map, ds->index_size, &ds->ix);
    if (rc != HDMLP_OK) {
        return hd_err_wrap(rc, "%s: ", path);
    }
    const uint32_t n_seg = ds->ix.h.n_segments;
    ds->seg_fd = hd_malloc((size_t)n_seg * sizeof(int));
    ds->seg_fd_direct = hd_malloc((size_t)n_seg * sizeof(int));
    if (ds->seg_fd == NULL || ds->seg_fd_direct == NULL) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for %u segments", n_seg);
    }
    for (uint32_t s = 0; s < n_seg; s++) {
        ds->seg_fd[s] = -1;
        ds->seg_fd_direct[s] = -1;
    }
    rc = ds_copy_labels(p);
    if (rc != HDMLP_OK) {
        return rc;
    }
    rc = remote ? ds_remote_check_segments(ds) : ds_check_segments(ds);
    if (rc != HDMLP_OK) {
        return rc;
    }
    /* One decoder now: it also checks that the dictionary is usable. */
    rc = fmt_decoder_create(&ds->ix, &p->pool[0]);
    if (rc != HDMLP_OK) {
        return hd_err_wrap(rc, "%s: ", path);
    }
    p->pool_n = 1;
    return HDMLP_OK;
}

static int ds_open(const char *path, int remote, const hdmlp_source_config *cfg,
                   hdmlp_dataset **out)
{
    ds_private *p = hd_calloc(1, sizeof(*p));
    if (p == NULL) {
        return hd_err(HDMLP_E_NOMEM, "dataset open: out of memory");
    }
    if (pthread_mutex_init(&p->pub.fd_lock, NULL) != 0) {
        hd_free(p);
        return hd_err(HDMLP_E_NOMEM, "dataset open: cannot create a mutex");
    }
    if (pthread_mutex_init(&p->pool_lock, NULL) != 0) {
        pthread_mutex_destroy(&p->pub.fd_lock);
        hd_free(p);
        return hd_err(HDMLP_E_NOMEM, "dataset open: cannot create a mutex");
    }
    const int rc = ds_open_checked(p, path, remote, cfg);
    if (rc != HDMLP_OK) {
        hdmlp_dataset_close(&p->pub);
        return rc;
    }
    *out = &p->pub;
    return HDMLP_OK;
}

int hdmlp_dataset_open_source(const char *url, const hdmlp_source_config *cfg,
                              hdmlp_dataset **out)
{
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "dataset open: NULL out");
    }
    *out = NULL;
    if (!src_is_url(url)) {
        return hd_err(HDMLP_E_INVAL,
                      "dataset open: \"%s\" is not an http://, https:// or "
                      "s3:// URL",
                      url != NULL ? url : "(null)");
    }
    return ds_open(url, 1, cfg, out);
}

int hdmlp_dataset_open(const char *path, hdmlp_dataset **out)
{
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "dataset open: NULL out");
    }
    *out = NULL;
    if (path == NULL || path[0] == '\0') {
        return hd_err(HDMLP_E_INVAL, "dataset open: empty path");
    }
    if (!src_is_url(path)) {
        return ds_open(path, 0, NULL, out);
    }
    hdmlp_source_config *cfg = NULL;
    int rc = hdmlp_source_config_create(&cfg);
    if (rc == HDMLP_OK && strncmp(path, "s3://", 5) == 0) {
        rc = hdmlp_source_config_load_aws(cfg);
    }
    if (rc == HDMLP_OK) {
        rc = ds_open(path, 1, cfg, out);
    }
    hdmlp_source_config_free(cfg);
    return rc;
}

void hdmlp_dataset_close(hdmlp_dataset *ds)
{
    if (ds == NULL) {
        return;
    }
    ds_private *p = ds_priv(ds);
    const uint32_t n_seg = ds->ix.h.n_segments;
    for (uint32_t s = 0; s < n_seg; s++) {
        if (ds->seg_fd != NULL && ds->seg_fd[s] >= 0) {
            close(ds->seg_fd[s]);
        }
        if (ds->seg_fd_direct != NULL && ds->seg_fd_direct[s] >= 0) {
            close(ds->seg_fd_direct[s]);
        }
    }
    for (unsigned i = 0; i < p->pool_n; i++) {
        fmt_decoder_free(p->pool[i]);
    }
    if (ds->index_map != NULL) {
        if (p->index_mapped) {
            munmap(ds->index_map, ds->index_size);
        } else {
            hd_free(ds->index_map);
        }
    }
    ds_remote_close(ds);
    hd_free(ds->seg_fd);
    hd_free(ds->seg_fd_direct);
    hd_free(p->label_names);
    hd_free(p->label_pos);
    hd_free(ds->path);
    pthread_mutex_destroy(&p->pool_lock);
    pthread_mutex_destroy(&ds->fd_lock);
    hd_free(p);
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
    fmt_index_sample(&ds->ix, index, &s);
    info->index = index;
    info->chunk = index / ds->ix.h.chunk_size;
    info->slot = (uint32_t)(index % ds->ix.h.chunk_size);
    info->label = s.label;
    info->raw_size = s.raw_len;
    info->stored_size = s.stored_len;
    info->codec = s.codec;
    info->key_size = s.key_len;
    info->key = (const char *)ds->ix.strings + s.key_off;
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
        for (uint64_t i = 0; i < ix->h.n_samples; i++) {
            const uint8_t *r = ix->samples + i * FMT_SAMPLE_REC_LEN;
            if (fmt_ld16(r + 36) != key_size) {
                continue;
            }
            if (key_size == 0 || memcmp(ix->strings + fmt_ld32(r + 32), key, key_size) == 0) {
                *index = i;
                return HDMLP_OK;
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
    fmt_index_sample(&ds->ix, index, &s);
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
    int rc;
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
    int rc = HDMLP_OK;
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
        const uint64_t first = c * ix->h.chunk_size;
        for (uint32_t j = 0; j < ch.n_samples; j++) {
            fmt_sample s;
            fmt_index_sample(ix, first + j, &s);
            rc = fmt_sample_verify(first + j, &s, buf + s.offset);
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
    hd_free(buf);
    return rc;
}
