/*
 * Chunk tiers (DESIGN.md §6): placement by forecast load count (policy) and the RAM and
 * SSD chunk caches (mechanism). The most-loaded chunks of this rank go to RAM, the next to
 * the SSD directory, the rest stay on the source. Only chunks this rank loads (its owned
 * groups) are placed. Thread-safe.
 */
#ifndef HDMLP_LOADER_TIER_H
#define HDMLP_LOADER_TIER_H

#include "format.h"

#include <pthread.h>

enum { TIER_SOURCE = 0, TIER_RAM = 1, TIER_SSD = 2, TIER_KINDS = 3 };

typedef struct tier tier;

typedef struct tier_params {
    uint64_t ram_bytes; /* capacity for whole chunks (aligned lengths) */
    const char *ssd_dir;
    uint64_t ssd_bytes;
    uint64_t dataset_id;
    int direct; /* read cache files with O_DIRECT (where the file system allows it) */
} tier_params;

/* Places chunks: sorted by loads (descending), ties by first use; RAM while it fits, then
 * SSD while it fits. loads/first_use have one entry per chunk. Creates ssd_dir if needed
 * (HDMLP_E_IO naming it on failure). */
int tier_create(const fmt_index *ix, const tier_params *p, const uint64_t *loads,
                const uint64_t *first_use, tier **out);
void tier_free(tier *t);

int tier_placement(const tier *t, uint64_t chunk);
/* The cached whole chunk (aligned length), or NULL. Valid until tier_free. */
const uint8_t *tier_ram_get(tier *t, uint64_t chunk);
/* Keeps buf (hd_map_alloc of len bytes: a whole chunk from a verified read) for a
 * RAM-placed chunk not cached yet; returns 1 if it took ownership, 0 if the caller keeps
 * it. */
int tier_ram_put(tier *t, uint64_t chunk, uint8_t *buf, uint64_t len);
/* Planning (one thread): returns 1 the first time it is asked about a RAM- or SSD-placed
 * chunk, so that load reads the chunk whole and fills its cache (RAM, or the SSD stager when
 * it is free); 0 otherwise. */
int tier_first_plan(tier *t, uint64_t chunk);
/* The first load of a chunk has finished, whether or not it filled the cache; loads
 * waiting for it go on (to the cache or the source). */
void tier_first_done(tier *t, uint64_t chunk);
/* Blocks while the chunk's first (caching) load is planned but not finished; returns the
 * cached chunk or NULL. Later loads use it instead of reading the source again. */
const uint8_t *tier_ram_wait(tier *t, uint64_t chunk);
uint64_t tier_ram_chunks(const tier *t);
/* Bytes of the tiers' per-chunk state (placement, cache entries, SSD descriptors, order),
 * not counting the cached chunks themselves. */
uint64_t tier_state_bytes(const tier *t);

/* SSD: an fd of chunk's staged file (offset 0 = the chunk's first byte), or -1. */
int tier_ssd_fd(tier *t, uint64_t chunk);
/* Marks a staged file bad (verification failed): it is removed and not used again. */
void tier_ssd_bad(tier *t, uint64_t chunk);
/* SSD-placed chunks in order of first use (count in *n); for the stager. */
const uint64_t *tier_ssd_order(const tier *t, uint64_t *n);
/* Writes chunk's bytes (len, aligned) to its cache file atomically and marks it staged; one
 * thread at a time per chunk. Returns 1 when it wrote the file, 0 when the chunk is staged
 * or being written by another thread, HDMLP_E_NOSPC/E_IO with detail on failure (after
 * which staging stops for good). */
int tier_ssd_store(tier *t, uint64_t chunk, const uint8_t *buf, uint64_t len);
/* 1 once the chunk's file is complete. */
int tier_ssd_staged(tier *t, uint64_t chunk);
/* 1 after a write failed: no more staging. */
int tier_ssd_stopped(tier *t);
uint64_t tier_ssd_chunks(const tier *t);

#endif
