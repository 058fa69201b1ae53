/* Opening and closing a packed dataset: the index mapped (or read) and validated, the table
 * source chosen by its version (version 2's: loader_dataset_tables2.c), the label names
 * copied, every segment checked; local directories and URLs. */
#include "loader_dataset_private.h"
#include "loader_source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
    const int rc = ds_fd_read(fd, buf, size, 0, path, "index");
    if (rc != HDMLP_OK) {
        close(fd);
        hd_free(buf);
        return rc;
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
    if (ds->ix.h.major == 2) {
        /* Version 2: a chunk's sample table is read from DIR/tables and checked. */
        rc = ds_tables2_open(p);
        if (rc != HDMLP_OK) {
            return rc;
        }
    } else {
        /* Version 1: a chunk's sample records are a view into the index. */
        ds->tables = fmt_index_tables(&ds->ix);
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
    if (pthread_mutex_init(&p->rec_lock, NULL) != 0) {
        pthread_mutex_destroy(&p->pool_lock);
        pthread_mutex_destroy(&p->pub.fd_lock);
        hd_free(p);
        return hd_err(HDMLP_E_NOMEM, "dataset open: cannot create a mutex");
    }
    if (pthread_mutex_init(&p->hold_lock, NULL) != 0) {
        pthread_mutex_destroy(&p->rec_lock);
        pthread_mutex_destroy(&p->pool_lock);
        pthread_mutex_destroy(&p->pub.fd_lock);
        hd_free(p);
        return hd_err(HDMLP_E_NOMEM, "dataset open: cannot create a mutex");
    }
    p->tables_fd = -1;
    p->rec_chunk = UINT64_MAX;
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
    ds_tables2_close(p); /* before the index: it sizes the keys' mapping */
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
    pthread_mutex_destroy(&p->hold_lock);
    pthread_mutex_destroy(&p->rec_lock);
    pthread_mutex_destroy(&p->pool_lock);
    pthread_mutex_destroy(&ds->fd_lock);
    hd_free(p);
}
