/*
 * I/O engine, common part and the pread engine.
 *
 * The common part checks arguments, dispatches to an engine and turns the first failed
 * read (in request order) into an HDMLP_E_* code with detail. The pread engine issues one
 * request at a time with pread(2). The io_uring engine lives in loader_io_uring.c, the
 * object-store engine in loader_io_store.c (which reports its own failures).
 */
#include "loader_io.h"

#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Bytes asked of one read operation: 1 GiB keeps every count below the kernel's
 * per-call limit (0x7ffff000) and io_uring's 32-bit length, and keeps O_DIRECT
 * continuations 4096-aligned. */
#define IO_OP_MAX (UINT64_C(1) << 30)
#define IO_DEPTH_MAX 1024u

struct io_engine {
    hdmlp_engine kind; /* HDMLP_ENGINE_PREAD or HDMLP_ENGINE_IO_URING, never AUTO */
    unsigned depth;
    uint64_t ops;
    io_store *store; /* a store engine's connections, else NULL */
#ifdef HDMLP_HAVE_IO_URING
    io_ring *ring; /* NULL for the pread engine */
#endif
};

int io_engine_create(hdmlp_engine kind, unsigned depth, io_engine **out)
{
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "io_engine_create: out is NULL");
    }
    *out = NULL;
    if (kind != HDMLP_ENGINE_AUTO && kind != HDMLP_ENGINE_PREAD &&
        kind != HDMLP_ENGINE_IO_URING) {
        return hd_err(HDMLP_E_INVAL, "I/O engine: unknown engine kind %d", (int)kind);
    }
    if (depth < 1 || depth > IO_DEPTH_MAX) {
        return hd_err(HDMLP_E_INVAL, "I/O engine: depth %u out of range 1..%u", depth,
                      IO_DEPTH_MAX);
    }
    io_engine *const e = hd_calloc(1, sizeof(*e));
    if (e == NULL) {
        return hd_err(HDMLP_E_NOMEM, "I/O engine: out of memory");
    }
    e->kind = HDMLP_ENGINE_PREAD;
    e->depth = depth;
#ifdef HDMLP_HAVE_IO_URING
    if (kind != HDMLP_ENGINE_PREAD) {
        const int rc = io_ring_create(depth, &e->ring);
        if (rc == HDMLP_OK) {
            e->kind = HDMLP_ENGINE_IO_URING;
        } else if (kind == HDMLP_ENGINE_IO_URING) {
            hd_free(e);
            return rc;
        } else {
            hd_clear_error(); /* AUTO: the kernel refused a ring, use pread */
        }
    }
#else
    if (kind == HDMLP_ENGINE_IO_URING) {
        hd_free(e);
        return hd_err(HDMLP_E_UNSUPPORTED,
                      "I/O engine: io_uring support was not compiled in (liburing not found)");
    }
#endif
    *out = e;
    return HDMLP_OK;
}

int io_engine_create_store(const struct src_store *store, unsigned depth, io_engine **out)
{
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "io_engine_create_store: out is NULL");
    }
    *out = NULL;
    io_engine *const e = hd_calloc(1, sizeof(*e));
    if (e == NULL) {
        return hd_err(HDMLP_E_NOMEM, "I/O engine: out of memory");
    }
    e->kind = HDMLP_ENGINE_PREAD; /* unused: reads go to the store */
    e->depth = depth;
    const int rc = io_store_create(store, depth, &e->store);
    if (rc != HDMLP_OK) {
        hd_free(e);
        return rc;
    }
    *out = e;
    return HDMLP_OK;
}

void io_engine_free(io_engine *e)
{
    if (e == NULL) {
        return;
    }
    io_store_free(e->store);
#ifdef HDMLP_HAVE_IO_URING
    io_ring_free(e->ring);
#endif
    hd_free(e);
}

const char *io_engine_name(const io_engine *e)
{
    if (e != NULL && e->store != NULL) {
        return io_store_name(e->store);
    }
    return e != NULL && e->kind == HDMLP_ENGINE_IO_URING ? "io_uring" : "pread";
}

uint64_t io_engine_ops(const io_engine *e) { return e != NULL ? e->ops : 0; }

/* One request with pread: retries EINTR and short reads until len bytes or end of file. */
static int64_t pread_one(const io_read *r, uint64_t *ops)
{
    uint64_t done = 0;
    while (done < r->len) {
        const uint64_t left = r->len - done;
        const size_t ask = (size_t)(left < IO_OP_MAX ? left : IO_OP_MAX);
        const ssize_t got = pread(r->fd, r->dst + done, ask, (off_t)(r->offset + done));
        (*ops)++;
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EINVAL && done > 0) {
                /* An O_DIRECT read that stopped at an unaligned end of file cannot be
                 * continued at that offset: the short read was the end of file. */
                break;
            }
            return -(int64_t)errno;
        }
        if (got == 0) {
            break; /* end of file */
        }
        done += (uint64_t)got;
    }
    return (int64_t)done;
}

static int io_report(const io_read *reads, unsigned n)
{
    unsigned first = n;
    unsigned failed = 0;
    for (unsigned i = 0; i < n; i++) {
        if (reads[i].result < 0) {
            if (first == n) {
                first = i;
            }
            failed++;
        }
    }
    if (failed == 0) {
        return HDMLP_OK;
    }
    const io_read *const r = &reads[first];
    const int err = (int)-r->result;
    char buf[128];
    const char *msg = strerror_r(err, buf, sizeof(buf));
    const char *what = "";
    if (err == EINVAL) {
        const int fl = fcntl(r->fd, F_GETFL);
        if (fl != -1 && (fl & O_DIRECT) != 0) {
            what = "O_DIRECT read misaligned or unsupported by the filesystem: ";
        }
    }
    char more[48] = "";
    if (failed > 1) {
        snprintf(more, sizeof(more), " (and %u more failed)", failed - 1);
    }
    return hd_err(hd_errno_code(err), "read of %llu bytes at offset %llu failed: %s%s%s",
                  (unsigned long long)r->len, (unsigned long long)r->offset, what, msg, more);
}

int io_engine_read(io_engine *e, io_read *reads, unsigned n)
{
    if (e == NULL || (reads == NULL && n > 0)) {
        return hd_err(HDMLP_E_INVAL, "io_engine_read: %s is NULL",
                      e == NULL ? "engine" : "reads");
    }
    for (unsigned i = 0; i < n; i++) {
        io_read *const r = &reads[i];
        if ((r->dst == NULL && r->len > 0) || r->offset > (uint64_t)INT64_MAX ||
            r->len > (uint64_t)INT64_MAX - r->offset) {
            r->result = -EINVAL;
            return hd_err(HDMLP_E_INVAL,
                          "read %u of %llu bytes at offset %llu: %s; nothing was read", i,
                          (unsigned long long)r->len, (unsigned long long)r->offset,
                          r->dst == NULL ? "no buffer" : "range beyond the largest offset");
        }
        if (e->store != NULL && r->object == NULL && r->len > 0) {
            r->result = -EINVAL;
            return hd_err(HDMLP_E_INVAL,
                          "read %u of %llu bytes at offset %llu: no object named; nothing was "
                          "read",
                          i, (unsigned long long)r->len, (unsigned long long)r->offset);
        }
    }
    if (e->store != NULL) {
        return io_store_read(e->store, reads, n, &e->ops);
    }
#ifdef HDMLP_HAVE_IO_URING
    if (e->ring != NULL) {
        const int rc = io_ring_read(e->ring, reads, n, &e->ops);
        if (rc != HDMLP_OK) {
            return rc;
        }
        return io_report(reads, n);
    }
#endif
    for (unsigned i = 0; i < n; i++) {
        reads[i].result = pread_one(&reads[i], &e->ops);
    }
    return io_report(reads, n);
}
