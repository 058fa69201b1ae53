/*
 * Internal to the object-store connections: one HTTP transfer (xfer) and the runner that
 * takes a batch of them through the multi handle (loader_source_http.c); the operations
 * built on it live in loader_source_ops.c.
 */
#ifndef HDMLP_LOADER_SOURCE_XFER_H
#define HDMLP_LOADER_SOURCE_XFER_H

#include "loader_source.h"

#include <curl/curl.h>

#include <stdint.h>

enum { X_GET, X_HEAD, X_PUT, X_POST, X_DELETE };

typedef struct xfer {
    int method;
    const char *object;
    const char *query;    /* canonical query string (sorted, encoded) or NULL */
    char etag[128];       /* ETag of the answer (PUT of a part) */
    uint64_t offset, len; /* ranged GET when len > 0 */
    uint8_t *dst;
    uint8_t **grow; /* whole GET: growing buffer, at most max bytes */
    uint64_t max;
    const uint8_t *body; /* PUT */
    uint64_t body_len, body_pos;
    uint64_t got, cap, size;
    int overflow;
    long status;
    char errbody[512]; /* start of an error response's body */
    size_t errbody_len;
    unsigned attempt;
    double not_before; /* ms on the monotonic clock */
    double moved_ms;   /* start of the current low-speed window (stall detection) */
    curl_off_t moved;  /* bytes moved by then, both ways */
    double stall_ms;
    int stalled;
    double deadline;        /* ms on the monotonic clock: the request fails after it (retries
                             * included); set at its first attempt */
    int range_bad;          /* a 206 whose Content-Range is not the range asked for */
    char content_range[96]; /* the answer's Content-Range ("" when none) */
    char canon[65];         /* SHA-256 of the canonical request signed (s3://), or "" */
    int active, done;
    struct curl_slist *hdrs;
    CURL *easy;
    char errbuf[CURL_ERROR_SIZE];
} xfer;

/* Runs n transfers to completion, `depth` at a time, retrying as the store's answers
 * allow; stops at the first failure (its code, detail naming the URL). */
int src_run(src_conn *c, xfer *xs, unsigned n);

#endif
