/*
 * Uploading a packed dataset directory to an s3:// store: the old index is deleted first
 * (a dataset being replaced never opens half-replaced), then every segment (one PUT, or a
 * multipart upload in parts of part_size, `depth` parts in flight), a version-2 dataset's
 * tables and keys files the same way, then the index last, so a half-finished upload never
 * opens; finally the store's copy is opened and checked (index, every segment's size, the
 * tables' and keys' sizes).
 *
 * Why here, in the object store, and not in dataset/: the uploader is the one writer of
 * objects (PUT, multipart POST and parts, DELETE, SigV4-encoded upload ids), and dataset/
 * is the read path, which never writes. Why not with the packer: hdmlp_dataset_upload is
 * public API of libhdmlp (tests call it; `hdmlp-pack --upload` is one caller),
 * and the packing library is not part of libhdmlp. Like the rest of this folder it is in
 * the data library hdmlp-pack links (README "Layout").
 *
 * Its place in the folder's layering: the one file above dataset/. It opens the local
 * dataset (every check of hdmlp_dataset_open) and the uploaded copy through the public
 * API (hdmlp.h) and reads the index's segment sizes with format/; it does not include
 * dataset/'s headers, which include this folder's (no include circle).
 */
#include "loader_source.h"

#include "format.h"
#include "hd_base.h"
#include "loader_source_sigv4.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long long ull;

#define UP_DEPTH 4u

typedef struct upload {
    src_conn *conn;
    const char *url;
    uint64_t part;
    uint64_t done, total;
    void (*progress)(void *arg, uint64_t done, uint64_t total);
    void *arg;
} upload;

static int read_at(int fd, uint8_t *buf, uint64_t len, uint64_t off, const char *path)
{
    uint64_t got = 0;
    while (got < len) {
        const ssize_t r = pread(fd, buf + got, (size_t)(len - got), (off_t)(off + got));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return hd_err(r < 0 ? hd_errno_code(errno) : HDMLP_E_CORRUPT, "%s: read: %s", path,
                          r < 0 ? strerror(errno) : "file shrank while uploading");
        }
        got += (uint64_t)r;
    }
    return HDMLP_OK;
}

static void advance(upload *u, uint64_t bytes)
{
    u->done += bytes;
    if (u->progress != NULL) {
        u->progress(u->arg, u->done, u->total);
    }
}

/* The text between <tag> and </tag> of an XML answer into out. */
static int xml_value(const uint8_t *xml, uint64_t len, const char *tag, char *out, size_t cap)
{
    char open[64], close[64];
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    char *text = hd_malloc((size_t)len + 1);
    if (text == NULL) {
        return -1;
    }
    memcpy(text, xml, (size_t)len);
    text[len] = '\0';
    const char *a = strstr(text, open);
    const char *b = a != NULL ? strstr(a, close) : NULL;
    int rc = -1;
    if (b != NULL && (size_t)(b - a - strlen(open)) < cap) {
        const size_t n = (size_t)(b - a - strlen(open));
        memcpy(out, a + strlen(open), n);
        out[n] = '\0';
        rc = n > 0 ? 0 : -1;
    }
    hd_free(text);
    return rc;
}

static int put_multipart(upload *u, const char *name, int fd, uint64_t size, const char *path)
{
    uint8_t *answer = NULL;
    uint64_t alen = 0;
    int rc = src_conn_post(u->conn, name, "uploads=", NULL, 0, &answer, &alen);
    if (rc != HDMLP_OK) {
        return rc;
    }
    char id[256];
    const int bad = xml_value(answer, alen, "UploadId", id, sizeof(id));
    hd_free(answer);
    if (bad) {
        return hd_err(HDMLP_E_IO,
                      "%s/%s: the store's answer to starting a multipart upload "
                      "has no UploadId",
                      u->url, name);
    }
    const uint64_t n_parts = (size + u->part - 1) / u->part;
    if (n_parts > 10000) {
        return hd_err(HDMLP_E_RANGE, "%s: %llu parts of %llu bytes exceed S3's 10000", path,
                      (ull)n_parts, (ull)u->part);
    }
    src_part *parts = hd_calloc((size_t)n_parts, sizeof(src_part));
    uint8_t *buf = hd_malloc((size_t)(u->part * UP_DEPTH));
    if (parts == NULL || buf == NULL) {
        hd_free(parts);
        hd_free(buf);
        return hd_err(HDMLP_E_NOMEM, "upload: out of memory for %u parts of %llu bytes",
                      UP_DEPTH, (ull)u->part);
    }
    for (uint64_t first = 0; rc == HDMLP_OK && first < n_parts; first += UP_DEPTH) {
        const unsigned wave =
            (unsigned)(n_parts - first < UP_DEPTH ? n_parts - first : UP_DEPTH);
        uint64_t bytes = 0;
        for (unsigned k = 0; rc == HDMLP_OK && k < wave; k++) {
            const uint64_t off = (first + k) * u->part;
            const uint64_t len = size - off < u->part ? size - off : u->part;
            rc = read_at(fd, buf + (size_t)k * u->part, len, off, path);
            parts[first + k] =
                (src_part){(uint32_t)(first + k + 1), buf + (size_t)k * u->part, len, ""};
            bytes += len;
        }
        if (rc == HDMLP_OK) {
            rc = src_conn_put_parts(u->conn, name, id, parts + first, wave);
        }
        if (rc == HDMLP_OK) {
            advance(u, bytes);
        }
    }
    hd_free(buf);
    if (rc == HDMLP_OK) {
        /* CompleteMultipartUpload: every part's number and ETag, in order. */
        const size_t cap = 64 + (size_t)n_parts * 200;
        char *xml = hd_malloc(cap);
        if (xml == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "upload: out of memory");
        } else {
            size_t pos = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
            for (uint64_t i = 0; i < n_parts; i++) {
                pos +=
                    (size_t)snprintf(xml + pos, cap - pos,
                                     "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                                     parts[i].number, parts[i].etag);
            }
            pos += (size_t)snprintf(xml + pos, cap - pos, "</CompleteMultipartUpload>");
            char query[300], enc[280];
            if (sigv4_uri_encode(id, strlen(id), 0, enc, sizeof(enc)) < 0) {
                rc = hd_err(HDMLP_E_INVAL, "upload: upload id too long");
            } else {
                snprintf(query, sizeof(query), "uploadId=%s", enc);
                rc = src_conn_post(u->conn, name, query, xml, pos, &answer, &alen);
                if (rc == HDMLP_OK && alen > 0 &&
                    strstr((const char *)answer, "<Error>") != NULL) {
                    /* S3 may answer 200 and report the failure in the body. */
                    rc = hd_err(HDMLP_E_IO,
                                "%s/%s: completing the multipart upload failed: "
                                "%.*s",
                                u->url, name, (int)(alen > 300 ? 300 : alen), answer);
                }
                hd_free(answer);
            }
            hd_free(xml);
        }
    }
    if (rc != HDMLP_OK) {
        /* Best effort: abort, so the store drops the parts. */
        char query[300], enc[280];
        if (sigv4_uri_encode(id, strlen(id), 0, enc, sizeof(enc)) >= 0) {
            snprintf(query, sizeof(query), "uploadId=%s", enc);
            (void)src_conn_delete(u->conn, name, query);
        }
    }
    hd_free(parts);
    return rc;
}

/* What to upload besides the index: the files of dir its index names. */
typedef struct up_files {
    uint64_t *sizes; /* the segments' (n entries, hd_free) */
    uint32_t n;
    int v2;                            /* a version-2 dataset: also DIR/tables and DIR/keys */
    uint64_t tables_bytes, keys_bytes; /* their sizes (version 2) */
    uint64_t index_size;
} up_files;

/* The files of dir as its index gives them into *f. The index was validated by
 * hdmlp_dataset_open just before; it is read again here because dataset/'s view of it is
 * internal to dataset/. */
static int index_sizes(const char *dir, up_files *f)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, FMT_INDEX_NAME);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return hd_err(hd_errno_code(errno), "%s: open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int err = errno;
        close(fd);
        return hd_err(hd_errno_code(err), "%s: stat: %s", path, strerror(err));
    }
    const uint64_t size = (uint64_t)st.st_size;
    uint8_t *buf = size <= SIZE_MAX ? hd_malloc(size ? (size_t)size : 1) : NULL;
    int rc = buf == NULL ? hd_err(HDMLP_E_NOMEM, "upload: out of memory")
                         : read_at(fd, buf, size, 0, path);
    close(fd);
    fmt_index ix;
    if (rc == HDMLP_OK) {
        rc = fmt_index_decode(buf, (size_t)size, &ix);
    }
    if (rc == HDMLP_OK) {
        f->n = ix.h.n_segments;
        f->v2 = ix.h.major == 2;
        f->tables_bytes = ix.h.tables_bytes;
        f->keys_bytes = ix.h.keys_bytes;
        f->sizes = hd_calloc(f->n ? f->n : 1, sizeof(uint64_t));
        if (f->sizes == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "upload: out of memory");
        }
    }
    for (uint32_t s = 0; rc == HDMLP_OK && s < f->n; s++) {
        fmt_segment seg;
        fmt_index_segment(&ix, s, &seg);
        f->sizes[s] = seg.size;
    }
    f->index_size = size;
    hd_free(buf);
    return rc;
}

static int put_file(upload *u, const char *dir, const char *name, uint64_t want)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return hd_err(hd_errno_code(errno), "%s: open: %s", path, strerror(errno));
    }
    struct stat st;
    int rc = HDMLP_OK;
    if (fstat(fd, &st) != 0 || (want != UINT64_MAX && (uint64_t)st.st_size != want)) {
        rc = hd_err(HDMLP_E_CORRUPT, "%s: not the size the index gives", path);
    } else if ((uint64_t)st.st_size > u->part) {
        rc = put_multipart(u, name, fd, (uint64_t)st.st_size, path);
    } else {
        const uint64_t size = (uint64_t)st.st_size;
        uint8_t *buf = hd_malloc(size ? (size_t)size : 1);
        rc = buf == NULL ? hd_err(HDMLP_E_NOMEM, "%s: out of memory", path)
                         : read_at(fd, buf, size, 0, path);
        if (rc == HDMLP_OK) {
            rc = src_conn_put(u->conn, name, buf, size);
        }
        if (rc == HDMLP_OK) {
            advance(u, size);
        }
        hd_free(buf);
    }
    close(fd);
    return rc;
}

int hdmlp_dataset_upload(const char *dir, const char *url, const hdmlp_source_config *cfg,
                         void (*progress)(void *arg, uint64_t bytes_done, uint64_t bytes_total),
                         void *arg)
{
    if (dir == NULL || url == NULL) {
        return hd_err(HDMLP_E_INVAL, "upload: NULL argument");
    }
    if (strncmp(url, "s3://", 5) != 0) {
        return hd_err(HDMLP_E_UNSUPPORTED, "upload: %s: uploading needs an s3:// URL", url);
    }
    if (src_is_url(dir)) {
        return hd_err(HDMLP_E_INVAL, "upload: %s: the source must be a local directory", dir);
    }
    hdmlp_dataset *ds = NULL;
    int rc = hdmlp_dataset_open(dir, &ds);
    if (rc != HDMLP_OK) {
        return rc;
    }
    upload u = {.url = url, .progress = progress, .arg = arg};
    u.part = cfg != NULL ? cfg->part_size : 0;
    if (u.part == 0) {
        u.part = UINT64_C(64) << 20;
    }
    src_store *store = NULL;
    rc = src_store_open(url, cfg, &store);
    if (rc == HDMLP_OK) {
        rc = src_conn_create(store, UP_DEPTH, &u.conn);
    }
    up_files f = {0};
    if (rc == HDMLP_OK) {
        rc = index_sizes(dir, &f);
    }
    for (uint32_t s = 0; rc == HDMLP_OK && s < f.n; s++) {
        u.total += f.sizes[s];
    }
    u.total += f.index_size + (f.v2 ? f.tables_bytes + f.keys_bytes : 0);
    if (rc == HDMLP_OK) {
        /* The old index goes first: until the new one is written, nothing opens. */
        rc = src_conn_delete(u.conn, FMT_INDEX_NAME, NULL);
    }
    char name[32];
    for (uint32_t s = 0; rc == HDMLP_OK && s < f.n; s++) {
        snprintf(name, sizeof(name), FMT_SEGMENT_NAME_FMT, s);
        rc = put_file(&u, dir, name, f.sizes[s]);
    }
    if (rc == HDMLP_OK && f.v2) { /* version 2: the sample tables and keys */
        rc = put_file(&u, dir, FMT_TABLES_NAME, f.tables_bytes);
        if (rc == HDMLP_OK) {
            rc = put_file(&u, dir, FMT_KEYS_NAME, f.keys_bytes);
        }
    }
    if (rc == HDMLP_OK) {
        rc = put_file(&u, dir, FMT_INDEX_NAME, UINT64_MAX);
    }
    hd_free(f.sizes);
    src_conn_free(u.conn);
    src_store_free(store);
    hdmlp_dataset_close(ds);
    if (rc != HDMLP_OK) {
        return rc;
    }
    /* The store's copy opens: index checksum, every segment's size (version 2: the tables'
     * and keys' too, the tables read whole). */
    hdmlp_dataset *remote = NULL;
    rc = hdmlp_dataset_open_source(url, cfg, &remote);
    hdmlp_dataset_close(remote);
    return rc == HDMLP_OK ? HDMLP_OK
                          : hd_err_wrap(rc, "upload: the uploaded copy does not open: ");
}
