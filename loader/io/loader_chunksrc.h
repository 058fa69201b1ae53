/*
 * Chunk sources (mechanism): where the bytes of a refill come from, behind one small ops
 * table, so an I/O thread asks a source and never branches on local, remote or cached.
 *   dataset    the dataset's segments: local files through the thread's I/O engine, or a
 *              remote store's objects through a store engine (loader_io_store.c), chosen
 *              once when the source is made (loader_chunksrc.c);
 *   RAM tier   a chunk the RAM cache holds, lent as it is (loader_chunksrc_tier.c);
 *   SSD tier   a chunk's cache file, read through the thread's I/O engine (the chunk's first
 *              byte at offset 0) (loader_chunksrc_tier.c).
 * Policy stays with the caller (loader_worker.c): which source a job asks (the tiers'
 * placement), what a bad cached copy costs (drop it, read the dataset), what to cache on a
 * first load, and the counting: a source counts nothing itself, it names the bytes counter
 * and the cost clock its reads feed.
 *
 * A job asks a source in two steps, both through the thread's reader:
 *   find  whether the source holds the chunk now (HDMLP_OK), not (CHUNK_ABSENT: ask the
 *         next source), or cannot be read (an error naming the file: the local segment does
 *         not open). Nothing is read; the caller times and counts only what follows;
 *   read  the plan's ranges of what find found, into the caller's buffer in the plan's
 *         layout (or, the RAM tier, lent whole); lengths are checked (a read may stop short
 *         only inside the chunk's final alignment padding) and a whole plan's chunk header
 *         is verified. Errors say where (the name below) and which chunk. Samples are not
 *         decoded here.
 *
 * Threads: a source is immutable once made and shared by every thread; a reader belongs to
 * one thread at a time.
 */
#ifndef HDMLP_LOADER_CHUNKSRC_H
#define HDMLP_LOADER_CHUNKSRC_H

#include "loader_dataset.h"
#include "loader_io.h"
#include "loader_refill.h"
#include "loader_tier.h"

#include <stddef.h>
#include <stdint.h>

struct cost_clock;

/* find: the source does not hold the chunk now. */
enum { CHUNK_ABSENT = 1 };

typedef struct chunk_source chunk_source;
typedef struct chunk_reader chunk_reader;

/* Where a read left the job's bytes. */
typedef struct chunk_bytes {
    const uint8_t *base; /* the caller's buffer, or a chunk the source lends */
    int whole_chunk;     /* base is the whole chunk: a sample's stored bytes start at its
                          * index offset (else at the plan's sample_pos) */
} chunk_bytes;

typedef struct chunk_source_ops {
    /* Per-thread state for reading s. `files` is the calling thread's engine for local
     * files, which the sources reading files use (borrowed: it must outlive the reader);
     * the remote dataset makes its own store engine. */
    int (*reader_create)(const chunk_source *s, io_engine *files, chunk_reader **out);
    /* Finds chunk for the read of plan p: HDMLP_OK, CHUNK_ABSENT or an HDMLP_E_* code. The
     * RAM tier waits here while the chunk's first (caching) load is still running. */
    int (*find)(chunk_reader *r, uint64_t chunk, const refill_plan *p);
    /* Reads plan p of what find found into buf (p->buf_len bytes; with O_DIRECT files
     * 4096-aligned) or lends it; sets *out. HDMLP_OK or an HDMLP_E_* code with detail. */
    int (*read)(chunk_reader *r, uint64_t chunk, const refill_plan *p, uint8_t *buf,
                chunk_bytes *out);
    /* The source's name in error messages: the segment's path or URL for the dataset,
     * "RAM chunk cache", "SSD chunk cache". */
    void (*name)(const chunk_source *s, const refill_plan *p, char *buf, size_t cap);
    /* Forgets a cached copy found bad (a read or a sample failed verification) so it is
     * never served again; NULL when a bad copy is served as it is (the dataset itself, and
     * the RAM tier, which keeps only chunks a verified read decoded). */
    void (*drop)(const chunk_source *s, uint64_t chunk);
} chunk_source_ops;

struct chunk_source {
    const chunk_source_ops *ops; /* NULL: no such source */
    int counter;                 /* the bytes counter its reads feed (and the cost model they
                                  * teach): TIER_SOURCE, TIER_RAM or TIER_SSD */
    struct cost_clock *clock;    /* times its reads for that cost model, or NULL (not timed,
                                  * nothing learnt: the RAM tier) */
    hdmlp_dataset *ds;           /* the dataset (its index; the dataset source's segments) */
    tier *cache;                 /* the tier sources' caches */
    int direct;                  /* the dataset source's local segments: O_DIRECT */
};

/* Makes s the dataset's source: its local segment files (O_DIRECT when direct), or, for a
 * dataset opened from a URL, its store's segment objects. Cannot fail. */
void chunk_source_dataset(chunk_source *s, hdmlp_dataset *ds, int direct,
                          struct cost_clock *clock);
/* Makes s the RAM tier's source over t (placement and cache of ds's chunks). */
void chunk_source_ram(chunk_source *s, hdmlp_dataset *ds, tier *t);
/* Makes s the SSD tier's source over t; its reads are timed on clock. */
void chunk_source_ssd(chunk_source *s, hdmlp_dataset *ds, tier *t, struct cost_clock *clock);

/* A reader of s for the calling thread (see reader_create). */
int chunk_reader_create(const chunk_source *s, io_engine *files, chunk_reader **out);
/* Frees r (NULL is fine). */
void chunk_reader_free(chunk_reader *r);
/* The source r reads. */
const chunk_source *chunk_reader_source(const chunk_reader *r);
/* find and read of r's source (see the ops above). */
int chunk_find(chunk_reader *r, uint64_t chunk, const refill_plan *p);
int chunk_read(chunk_reader *r, uint64_t chunk, const refill_plan *p, uint8_t *buf,
               chunk_bytes *out);

#endif
