/*
 * I/O engine (mechanism): performs batches of positional reads. One engine per worker
 * thread; an engine is not thread-safe. Policy (what to read) lives in loader_refill.c.
 */
#ifndef HDMLP_LOADER_IO_H
#define HDMLP_LOADER_IO_H

#include "hdmlp.h"

#include <stdint.h>

typedef struct io_read {
    int fd;
    uint64_t offset;
    uint64_t len;
    uint8_t *dst;   /* len bytes; with O_DIRECT fds: offset, len and dst 4096-aligned */
    int64_t result; /* out: bytes read (less than len only at end of file) or -errno */
} io_read;

typedef struct io_engine io_engine;

/* Creates an engine of `kind` able to keep up to `depth` reads in flight (1..1024).
 * HDMLP_ENGINE_AUTO picks io_uring when compiled in and the kernel accepts a ring, else
 * pread. HDMLP_ENGINE_IO_URING fails with HDMLP_E_UNSUPPORTED when unavailable. */
int io_engine_create(hdmlp_engine kind, unsigned depth, io_engine **out);
void io_engine_free(io_engine *e);
/* "pread" or "io_uring". */
const char *io_engine_name(const io_engine *e);
/* Reads all n requests (any n ≥ 0; more than depth are issued in waves) and returns when
 * every one has completed. Short reads and EINTR are retried until len bytes or end of
 * file. Sets each result; returns HDMLP_OK, or the HDMLP_E_* code of the first failed read
 * (hd_errno_code of its errno) with detail "read of N bytes at offset O failed: strerror". */
int io_engine_read(io_engine *e, io_read *reads, unsigned n);
/* Number of read system calls / submitted operations so far (for stats). */
uint64_t io_engine_ops(const io_engine *e);

/* The io_uring mechanism behind the io_uring engine (loader_io_uring.c). io_ring_create
 * returns HDMLP_E_UNSUPPORTED when io_uring is not compiled in or the kernel refuses. */
typedef struct io_ring io_ring;
int io_ring_create(unsigned depth, io_ring **out);
void io_ring_free(io_ring *r);
int io_ring_read(io_ring *r, io_read *reads, unsigned n, uint64_t *ops);

#endif
