/*
 * I/O engine (mechanism): performs batches of positional reads, of local files (pread or
 * io_uring) or of a remote store's objects (range GETs). One engine per worker thread; an
 * engine is not thread-safe. Policy (what to read) lives in loader_refill.c.
 *
 * Files of loader/io/, each calling only those below it:
 *   loader_chunksrc_tier.c             the tiers' chunk sources
 *   loader_chunksrc.c                  readers, the dataset's sources (loader_chunksrc.h)
 *   loader_io.c                        the engine: arguments, dispatch, pread
 *   loader_io_uring.c, loader_io_store.c  the io_uring and object-store mechanisms
 *   loader_iomode.c                    buffered or direct reads (alone)
 */
#ifndef HDMLP_LOADER_IO_H
#define HDMLP_LOADER_IO_H

#include "hdmlp.h"

#include <stdint.h>

struct src_store;

typedef struct io_read {
    int fd;
    uint64_t offset;
    uint64_t len;
    uint8_t *dst;       /* len bytes; with O_DIRECT fds: offset, len and dst 4096-aligned */
    int64_t result;     /* out: bytes read (less than len only at end of file) or -errno */
    const char *object; /* store engines: the object's name under the store's prefix (fd
                         * unused); file engines ignore it */
} io_read;

typedef struct io_engine io_engine;

/* Creates an engine of `kind` able to keep up to `depth` reads in flight (1..1024).
 * HDMLP_ENGINE_AUTO picks io_uring when compiled in and the kernel accepts a ring, else
 * pread. HDMLP_ENGINE_IO_URING fails with HDMLP_E_UNSUPPORTED when unavailable. */
int io_engine_create(hdmlp_engine kind, unsigned depth, io_engine **out);
/* Creates an engine whose reads are range GETs of `store`'s objects (io_read.object), up to
 * `depth` in flight (1..256) over kept-alive connections, retried as src_conn_read says.
 * The store must outlive the engine. */
int io_engine_create_store(const struct src_store *store, unsigned depth, io_engine **out);
void io_engine_free(io_engine *e);
/* "pread", "io_uring", or the store's scheme ("http", "s3"). */
const char *io_engine_name(const io_engine *e);
/* Reads all n requests (any n ≥ 0; more than depth are issued in waves) and returns when
 * every one has completed. Short reads and EINTR are retried until len bytes or end of
 * file. Sets each result; returns HDMLP_OK, or the HDMLP_E_* code of the first failed read
 * (hd_errno_code of its errno) with detail "read of N bytes at offset O failed: strerror".
 * A store engine reads every range exactly (an object ending inside one is HDMLP_E_CORRUPT)
 * and returns src_conn_read's code and detail (naming the URL); when it fails, every result
 * is -EIO. */
int io_engine_read(io_engine *e, io_read *reads, unsigned n);
/* Number of read system calls / submitted operations (store engines: HTTP requests,
 * retries included) so far (for stats). */
uint64_t io_engine_ops(const io_engine *e);

/* The io_uring mechanism behind the io_uring engine (loader_io_uring.c). io_ring_create
 * returns HDMLP_E_UNSUPPORTED when io_uring is not compiled in or the kernel refuses. */
typedef struct io_ring io_ring;
int io_ring_create(unsigned depth, io_ring **out);
void io_ring_free(io_ring *r);
int io_ring_read(io_ring *r, io_read *reads, unsigned n, uint64_t *ops);

/* The object-store mechanism behind store engines (loader_io_store.c). */
typedef struct io_store io_store;
int io_store_create(const struct src_store *store, unsigned depth, io_store **out);
void io_store_free(io_store *s);
const char *io_store_name(const io_store *s);
int io_store_read(io_store *s, io_read *reads, unsigned n, uint64_t *ops);

#endif
