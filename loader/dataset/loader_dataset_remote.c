/*
 * Datasets in object storage: the index fetched whole at open (again when it does not
 * decode: an answer cut short without Content-Length), every segment's size checked
 * with HEAD requests (in flight together), and reads of the dataset's own (non-loader)
 * paths (hdmlp_dataset_read_sample, hdmlp_dataset_verify, SSD staging) through one shared
 * connection set. The loader's I/O threads read through their own (loader_worker.c).
 * Version 2's tables and keys objects are sized and fetched whole through the same set
 * (for loader_dataset_tables2.c and loader_dataset_keys.c).
 */
#include "loader_dataset.h"
#include "loader_source.h"

#include <stdio.h>
#include <string.h>

typedef unsigned long long ull;

/* Indexes above this are refused before they are fetched (the format's sample table of
 * 2^32 samples stays well below). */
#define DS_INDEX_MAX (UINT64_C(1) << 36)
#define DS_REMOTE_DEPTH 16u

int ds_remote_load(hdmlp_dataset *ds, const char *url, const hdmlp_source_config *cfg)
{
    int rc = src_store_open(url, cfg, &ds->store);
    if (rc == HDMLP_OK) {
        rc = src_conn_create(ds->store, DS_REMOTE_DEPTH, &ds->conn);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    /* An answer without Content-Length that the server cuts short looks complete to HTTP:
     * an index that does not decode is fetched again (as many times as a failed request
     * would be) before it is called corrupt. */
    const uint32_t fetches = ds->store->cfg.retries + 1;
    uint8_t *buf = NULL;
    uint64_t len = 0;
    for (uint32_t f = 0; f < fetches; f++) {
        hd_free(buf);
        buf = NULL;
        rc = src_conn_get(ds->conn, FMT_INDEX_NAME, DS_INDEX_MAX, &buf, &len);
        if (rc == HDMLP_E_NOTFOUND) {
            return hd_err_wrap(rc, "%s: no index object: not an hdmlp dataset: ", url);
        }
        if (rc != HDMLP_OK) {
            return rc;
        }
        if (len == 0) {
            hd_free(buf);
            return hd_err(HDMLP_E_CORRUPT, "%s/%s: empty object: not an hdmlp dataset", url,
                          FMT_INDEX_NAME);
        }
        fmt_index ix;
        rc = fmt_index_decode(buf, (size_t)len, &ix);
        if (rc != HDMLP_E_CORRUPT) {
            break;
        }
        if (f + 1 == fetches) {
            hd_free(buf);
            return hd_err_wrap(rc, "%s/%s (the same in %u fetches): ", url, FMT_INDEX_NAME,
                               fetches);
        }
    }
    ds->index_map = buf;
    ds->index_size = (size_t)len;
    return HDMLP_OK;
}

int ds_remote_check_sizes(hdmlp_dataset *ds, const char *const *names, const uint64_t *want,
                          unsigned n)
{
    if (n == 0) {
        return HDMLP_OK;
    }
    uint64_t *sizes = hd_malloc((size_t)n * sizeof(uint64_t));
    if (sizes == NULL) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for %u object sizes", n);
    }
    int rc = src_conn_sizes(ds->conn, names, sizes, n);
    if (rc == HDMLP_E_NOTFOUND) {
        hd_err_wrap(rc, "object of the dataset missing: ");
    }
    for (unsigned i = 0; rc == HDMLP_OK && i < n; i++) {
        if (sizes[i] != want[i]) {
            rc = hd_err(HDMLP_E_CORRUPT,
                        "%s/%s: object has %llu bytes, the index says %llu (%s)", ds->path,
                        names[i], (ull)sizes[i], (ull)want[i],
                        sizes[i] < want[i] ? "truncated" : "wrong object");
        }
    }
    hd_free(sizes);
    return rc;
}

int ds_remote_check_segments(hdmlp_dataset *ds)
{
    const uint32_t n = ds->ix.h.n_segments;
    if (n == 0) {
        return HDMLP_OK;
    }
    char *names = hd_malloc((size_t)n * 32);
    const char **ptr = hd_malloc((size_t)n * sizeof(char *));
    uint64_t *want = hd_malloc((size_t)n * sizeof(uint64_t));
    int rc = HDMLP_OK;
    if (names == NULL || ptr == NULL || want == NULL) {
        rc = hd_err(HDMLP_E_NOMEM, "out of memory for %u segments", n);
    }
    for (uint32_t s = 0; rc == HDMLP_OK && s < n; s++) {
        snprintf(names + (size_t)s * 32, 32, FMT_SEGMENT_NAME_FMT, s);
        ptr[s] = names + (size_t)s * 32;
        fmt_segment seg;
        fmt_index_segment(&ds->ix, s, &seg);
        want[s] = seg.size;
    }
    if (rc == HDMLP_OK) {
        rc = ds_remote_check_sizes(ds, ptr, want, n);
    }
    hd_free(names);
    hd_free(ptr);
    hd_free(want);
    return rc;
}

int ds_remote_fetch(hdmlp_dataset *ds, const char *name, uint64_t want, uint8_t **out)
{
    *out = NULL;
    if (want == 0) {
        return HDMLP_OK;
    }
    if (want > SIZE_MAX) {
        return hd_err(HDMLP_E_NOMEM, "%s/%s: %llu bytes cannot be held", ds->path, name,
                      (ull)want);
    }
    uint8_t *buf = NULL;
    uint64_t len = 0;
    const int rc = src_conn_get(ds->conn, name, want, &buf, &len);
    if (rc != HDMLP_OK) {
        return rc; /* the detail names the URL */
    }
    if (len != want) {
        hd_free(buf);
        return hd_err(HDMLP_E_CORRUPT, "%s/%s: object has %llu bytes, the index says %llu (%s)",
                      ds->path, name, (ull)len, (ull)want,
                      len < want ? "truncated" : "wrong object");
    }
    *out = buf;
    return HDMLP_OK;
}

int ds_remote_read_object(hdmlp_dataset *ds, const char *name, void *buf, uint64_t len,
                          uint64_t off)
{
    const src_range r = {name, off, len, buf};
    pthread_mutex_lock(&ds->fd_lock);
    const int rc = src_conn_read(ds->conn, &r, 1);
    pthread_mutex_unlock(&ds->fd_lock);
    return rc;
}

int ds_remote_read(hdmlp_dataset *ds, uint32_t s, void *buf, uint64_t len, uint64_t off)
{
    char name[32];
    snprintf(name, sizeof(name), FMT_SEGMENT_NAME_FMT, s);
    return ds_remote_read_object(ds, name, buf, len, off);
}

void ds_remote_close(hdmlp_dataset *ds)
{
    src_conn_free(ds->conn);
    src_store_free(ds->store);
    ds->conn = NULL;
    ds->store = NULL;
}
