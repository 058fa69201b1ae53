/*
 * I/O engine, object-store mechanism: the reads of an engine made by io_engine_create_store
 * are range GETs of the store's objects (io_read.object), through one connection set that
 * keeps up to depth requests in flight (keep-alive, HTTP/2 where offered, bounded retries:
 * loader_source.h). A store answers a range exactly or fails, so a completed read's result
 * is its length; a failed batch fails every read (-EIO) and reports the store's code and
 * detail, which name the URL.
 */
#include "loader_io.h"

#include "format.h"
#include "loader_source.h"

#include <errno.h>

/* Called from loader_io.c, which repeats these prototypes. */

struct io_store {
    const src_store *store;
    src_conn *conn;
    src_range *ranges; /* the batch being read, cap entries */
    unsigned cap;
};

int io_store_create(const src_store *store, unsigned depth, io_store **out)
{
    *out = NULL;
    if (store == NULL) {
        return hd_err(HDMLP_E_INVAL, "I/O engine: no store");
    }
    io_store *const s = hd_calloc(1, sizeof(*s));
    if (s == NULL) {
        return hd_err(HDMLP_E_NOMEM, "I/O engine: out of memory");
    }
    s->store = store;
    const int rc = src_conn_create(store, depth, &s->conn);
    if (rc != HDMLP_OK) {
        hd_free(s);
        return rc;
    }
    *out = s;
    return HDMLP_OK;
}

void io_store_free(io_store *s)
{
    if (s == NULL) {
        return;
    }
    src_conn_free(s->conn);
    hd_free(s->ranges);
    hd_free(s);
}

const char *io_store_name(const io_store *s)
{
    return s->store->kind == SRC_S3 ? "s3" : "http";
}

int io_store_read(io_store *s, io_read *reads, unsigned n, uint64_t *ops)
{
    if (n > s->cap) {
        src_range *const r = hd_realloc(s->ranges, n * sizeof(*r));
        if (r == NULL) {
            return hd_err(HDMLP_E_NOMEM, "I/O engine: out of memory for %u reads", n);
        }
        s->ranges = r;
        s->cap = n;
    }
    for (unsigned i = 0; i < n; i++) {
        s->ranges[i] =
            (src_range){reads[i].object, reads[i].offset, reads[i].len, reads[i].dst};
    }
    const uint64_t before = src_conn_requests(s->conn);
    const int rc = src_conn_read(s->conn, s->ranges, n);
    *ops += src_conn_requests(s->conn) - before;
    for (unsigned i = 0; i < n; i++) {
        reads[i].result = rc == HDMLP_OK ? (int64_t)reads[i].len : -EIO;
    }
    return rc;
}
