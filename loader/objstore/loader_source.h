/*
 * Sources: where a dataset's index and segments live. A local directory is read through
 * the I/O engines (loader_io*.c); an object store (http(s)://host/path/ or s3://bucket/
 * prefix) through connections of loader_source_http.c (libcurl multi: range GETs many in
 * flight, keep-alive, HTTP/2 where offered, bounded retries, SigV4 for s3://).
 *
 * A store is immutable once opened and shared by every thread; a connection belongs to
 * one thread at a time.
 *
 * The folder's layering, bottom up: signing (loader_source_sigv4.c); config and URLs
 * (loader_source.c); the transfers (loader_source_http.c); the operations on them
 * (loader_source_ops.c); dataset/ reads through the URLs and the operations. The uploader
 * (loader_source_upload.c, hdmlp_dataset_upload) is above dataset/: it opens datasets
 * through hdmlp.h and writes through the operations.
 */
#ifndef HDMLP_LOADER_SOURCE_H
#define HDMLP_LOADER_SOURCE_H

#include "hdmlp.h"

#include <stdint.h>

struct hdmlp_source_config {
    char *endpoint;   /* s3: "http(s)://host[:port]"; NULL: AWS's regional endpoint */
    char *region;     /* NULL: us-east-1 */
    char *access_key; /* s3: NULL means unsigned requests */
    char *secret_key;
    char *session_token;
    char *ca_file;  /* NULL: the system's CA store */
    int path_style; /* -1 auto (path style with a custom endpoint), 0 or 1 */
    uint32_t connect_ms;
    uint32_t stall_ms;   /* low-speed limit: a transfer moving under 1 KiB/s over a window
                          * this long fails (and is retried) */
    uint32_t request_ms; /* deadline of a request, its retries included */
    uint32_t retries;    /* further attempts after a retryable failure */
    uint64_t part_size;  /* uploads: objects above it go in multipart parts of this size */
};

typedef enum src_kind { SRC_HTTP = 1, SRC_S3 = 2 } src_kind;

typedef struct src_store {
    src_kind kind;
    char *url;         /* as given (for messages) */
    char *base;        /* scheme://host[:port] */
    char *host;        /* host[:port] as sent in the Host header (signed) */
    char *path_prefix; /* URI-encoded path up to the object names, ending in '/' */
    struct hdmlp_source_config cfg;
} src_store;

/* 1 if path names an object store (http://, https://, s3://), else 0. */
int src_is_url(const char *path);
/* Parses url with cfg (NULL: defaults, unsigned) into a new store. HDMLP_E_INVAL naming
 * the URL when it cannot be parsed. */
int src_store_open(const char *url, const hdmlp_source_config *cfg, src_store **out);
void src_store_free(src_store *s);
/* Full URL of object `name` (relative to the store's prefix) into buf; -1 if too long. */
int src_object_url(const src_store *s, const char *name, char *buf, size_t cap);
/* Canonical URI path of object `name` (for signing). */
int src_object_path(const src_store *s, const char *name, char *buf, size_t cap);

typedef struct src_conn src_conn;

typedef struct src_range {
    const char *object; /* name under the store's prefix, e.g. "segment-000000" */
    uint64_t offset;
    uint64_t len;
    uint8_t *dst; /* len bytes */
} src_range;

/* A connection set able to keep `depth` requests in flight (1..256). */
int src_conn_create(const src_store *s, unsigned depth, src_conn **out);
void src_conn_free(src_conn *c);
/* Reads every range exactly (len bytes each), `depth` at a time, retrying 5xx, 429,
 * timeouts, stalls, dropped connections, short bodies and answers for another range
 * (Content-Range) with backoff up to cfg.retries times, within each read's deadline
 * (cfg.request_ms from its first attempt). Returns HDMLP_OK, or the first failure:
 * HDMLP_E_NOTFOUND (404), HDMLP_E_IO (403, other statuses, transport errors),
 * HDMLP_E_TIMEOUT (stalls, deadline), HDMLP_E_CORRUPT (416 or a Content-Range ending the
 * object inside the range: object shorter than asked), with the URL in the detail. */
int src_conn_read(src_conn *c, const src_range *r, unsigned n);
/* Sizes of n objects (HEAD requests in flight together) into sizes[]. */
int src_conn_sizes(src_conn *c, const char *const *objects, uint64_t *sizes, unsigned n);
/* A whole object into a new buffer (*buf, free with hd_free), at most max bytes. */
int src_conn_get(src_conn *c, const char *object, uint64_t max, uint8_t **buf, uint64_t *len);
/* Writes data[0..len) as object `name` (one PUT; retried like reads). */
int src_conn_put(src_conn *c, const char *object, const void *data, uint64_t len);
/* One part of a multipart upload; etag is filled in by the store's answer. */
typedef struct src_part {
    uint32_t number; /* 1..10000 */
    const void *data;
    uint64_t len;
    char etag[128];
} src_part;
/* PUTs n parts of the multipart upload upload_id of `object`, in flight together. */
int src_conn_put_parts(src_conn *c, const char *object, const char *upload_id, src_part *parts,
                       unsigned n);
/* POST object?query with body; the answer's body into *answer (hd_free; at most 16 MiB). */
int src_conn_post(src_conn *c, const char *object, const char *query, const void *body,
                  uint64_t len, uint8_t **answer, uint64_t *answer_len);
/* DELETE object[?query] (a missing object is not an error). */
int src_conn_delete(src_conn *c, const char *object, const char *query);
/* Requests issued (attempts included) and retries so far. */
uint64_t src_conn_requests(const src_conn *c);
uint64_t src_conn_retries(const src_conn *c);

#endif
