/*
 * The chunk sources' shared part (internal to loader_chunksrc*.c): the reader every source
 * uses, and the read of a plan's ranges through an I/O engine that the dataset and SSD
 * sources share.
 */
#ifndef HDMLP_LOADER_CHUNKSRC_PRIVATE_H
#define HDMLP_LOADER_CHUNKSRC_PRIVATE_H

#include "loader_chunksrc.h"

struct chunk_reader {
    const chunk_source *src;
    io_engine *io;     /* the engine reads go through (NULL: the RAM tier lends) */
    io_engine *own_io; /* io when the reader made it (a store engine), else NULL */
    io_read *reads;    /* reads_cap entries */
    uint32_t reads_cap;
    /* What find found for the next read: */
    int fd;              /* the local file holding the chunk (-1: a store object) */
    char object[32];     /* the store object holding it */
    uint64_t base;       /* where the chunk starts in that file or object */
    const uint8_t *lent; /* the RAM tier's cached chunk */
};

/* A reader of s over engine io (owned when `own`); HDMLP_E_NOMEM. */
int chunksrc_reader_new(const chunk_source *s, io_engine *io, int own, chunk_reader **out);

/* Reads plan p's ranges of chunk from the file or object find set (the chunk's byte x at
 * r->base + x) into buf through r's engine, then checks the lengths and (whole plans) the
 * chunk header. Errors are prefixed with `where` (and the chunk). */
int chunksrc_read_ranges(chunk_reader *r, uint64_t chunk, const refill_plan *p, uint8_t *buf,
                         const char *where);

#endif
