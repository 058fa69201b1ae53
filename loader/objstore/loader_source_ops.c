/*
 * Object-store operations over the transfer runner (loader_source_http.c): range reads,
 * sizes (HEAD), whole objects, PUT, multipart parts, POST and DELETE.
 */
#include "loader_source_xfer.h"

#include "hd_base.h"
#include "loader_source_sigv4.h"

#include <stdio.h>
#include <string.h>

int src_conn_read(src_conn *c, const src_range *r, unsigned n)
{
    if (c == NULL || (r == NULL && n > 0)) {
        return hd_err(HDMLP_E_INVAL, "source read: NULL argument");
    }
    xfer *xs = hd_calloc(n ? n : 1, sizeof(*xs));
    if (xs == NULL) {
        return hd_err(HDMLP_E_NOMEM, "source read: out of memory");
    }
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++) {
        if (r[i].len == 0) {
            continue;
        }
        if (r[i].dst == NULL || r[i].offset > UINT64_MAX - r[i].len) {
            hd_free(xs);
            return hd_err(HDMLP_E_INVAL, "source read %u: no buffer or range overflows", i);
        }
        xs[m++] = (xfer){.method = X_GET,
                         .object = r[i].object,
                         .offset = r[i].offset,
                         .len = r[i].len,
                         .dst = r[i].dst};
    }
    const int rc = src_run(c, xs, m);
    hd_free(xs);
    return rc;
}

int src_conn_sizes(src_conn *c, const char *const *objects, uint64_t *sizes, unsigned n)
{
    if (c == NULL || ((objects == NULL || sizes == NULL) && n > 0)) {
        return hd_err(HDMLP_E_INVAL, "source sizes: NULL argument");
    }
    xfer *xs = hd_calloc(n ? n : 1, sizeof(*xs));
    if (xs == NULL) {
        return hd_err(HDMLP_E_NOMEM, "source sizes: out of memory");
    }
    for (unsigned i = 0; i < n; i++) {
        xs[i] = (xfer){.method = X_HEAD, .object = objects[i]};
    }
    const int rc = src_run(c, xs, n);
    for (unsigned i = 0; rc == HDMLP_OK && i < n; i++) {
        sizes[i] = xs[i].size;
    }
    hd_free(xs);
    return rc;
}

int src_conn_get(src_conn *c, const char *object, uint64_t max, uint8_t **buf, uint64_t *len)
{
    if (c == NULL || object == NULL || buf == NULL || len == NULL) {
        return hd_err(HDMLP_E_INVAL, "source get: NULL argument");
    }
    *buf = NULL;
    *len = 0;
    xfer x = {.method = X_GET, .object = object, .grow = buf, .max = max};
    const int rc = src_run(c, &x, 1);
    if (rc != HDMLP_OK) {
        hd_free(*buf);
        *buf = NULL;
        return rc;
    }
    *len = x.size;
    return HDMLP_OK;
}

int src_conn_put(src_conn *c, const char *object, const void *data, uint64_t len)
{
    if (c == NULL || object == NULL || (data == NULL && len > 0)) {
        return hd_err(HDMLP_E_INVAL, "source put: NULL argument");
    }
    xfer x = {.method = X_PUT, .object = object, .body = data, .body_len = len};
    return src_run(c, &x, 1);
}

int src_conn_put_parts(src_conn *c, const char *object, const char *upload_id, src_part *parts,
                       unsigned n)
{
    if (c == NULL || object == NULL || upload_id == NULL || (parts == NULL && n > 0)) {
        return hd_err(HDMLP_E_INVAL, "source put parts: NULL argument");
    }
    char id[300];
    if (sigv4_uri_encode(upload_id, strlen(upload_id), 0, id, sizeof(id)) < 0) {
        return hd_err(HDMLP_E_INVAL, "source put parts: upload id too long");
    }
    xfer *xs = hd_calloc(n ? n : 1, sizeof(*xs));
    char *queries = hd_malloc((size_t)(n ? n : 1) * 340);
    if (xs == NULL || queries == NULL) {
        hd_free(xs);
        hd_free(queries);
        return hd_err(HDMLP_E_NOMEM, "source put parts: out of memory");
    }
    for (unsigned i = 0; i < n; i++) {
        char *q = queries + (size_t)i * 340;
        snprintf(q, 340, "partNumber=%u&uploadId=%s", parts[i].number, id);
        xs[i] = (xfer){.method = X_PUT,
                       .object = object,
                       .query = q,
                       .body = parts[i].data,
                       .body_len = parts[i].len};
    }
    int rc = src_run(c, xs, n);
    for (unsigned i = 0; rc == HDMLP_OK && i < n; i++) {
        if (xs[i].etag[0] == '\0') {
            rc = hd_err(HDMLP_E_IO, "PUT %s part %u: the answer has no ETag", object,
                        parts[i].number);
        }
        memcpy(parts[i].etag, xs[i].etag, sizeof(parts[i].etag));
    }
    hd_free(xs);
    hd_free(queries);
    return rc;
}

int src_conn_post(src_conn *c, const char *object, const char *query, const void *body,
                  uint64_t len, uint8_t **answer, uint64_t *answer_len)
{
    if (c == NULL || object == NULL || answer == NULL || answer_len == NULL) {
        return hd_err(HDMLP_E_INVAL, "source post: NULL argument");
    }
    *answer = NULL;
    *answer_len = 0;
    xfer x = {.method = X_POST,
              .object = object,
              .query = query,
              .body = body,
              .body_len = len,
              .grow = answer,
              .max = UINT64_C(1) << 24};
    const int rc = src_run(c, &x, 1);
    if (rc != HDMLP_OK) {
        hd_free(*answer);
        *answer = NULL;
        return rc;
    }
    *answer_len = x.got;
    return HDMLP_OK;
}

int src_conn_delete(src_conn *c, const char *object, const char *query)
{
    if (c == NULL || object == NULL) {
        return hd_err(HDMLP_E_INVAL, "source delete: NULL argument");
    }
    xfer x = {.method = X_DELETE, .object = object, .query = query};
    return src_run(c, &x, 1);
}
