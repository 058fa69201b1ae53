/*
 * Chunk sources over the tiers' caches (loader_tier.c): the RAM tier lends the chunk it
 * holds; the SSD tier reads the chunk's cache file through the thread's I/O engine, the
 * chunk's first byte at offset 0, and drops a file found bad.
 */
#include "loader_chunksrc_private.h"

#include <stdio.h>

/* ---- RAM --------------------------------------------------------------------------------- */

static int ram_reader_create(const chunk_source *s, io_engine *files, chunk_reader **out)
{
    (void)files;
    return chunksrc_reader_new(s, NULL, 0, out);
}

/* Waits while the chunk's first (caching) load is still running. */
static int ram_find(chunk_reader *r, uint64_t chunk, const refill_plan *p)
{
    (void)p;
    r->lent = tier_ram_wait(r->src->cache, chunk);
    return r->lent != NULL ? HDMLP_OK : CHUNK_ABSENT;
}

static int ram_read(chunk_reader *r, uint64_t chunk, const refill_plan *p, uint8_t *buf,
                    chunk_bytes *out)
{
    (void)chunk;
    (void)p;
    (void)buf;
    *out = (chunk_bytes){r->lent, 1};
    return HDMLP_OK;
}

static void ram_name(const chunk_source *s, const refill_plan *p, char *buf, size_t cap)
{
    (void)s;
    (void)p;
    snprintf(buf, cap, "RAM chunk cache");
}

static const chunk_source_ops ram_ops = {
    .reader_create = ram_reader_create,
    .find = ram_find,
    .read = ram_read,
    .name = ram_name,
    .drop = NULL,
};

void chunk_source_ram(chunk_source *s, hdmlp_dataset *ds, tier *t)
{
    *s = (chunk_source){.ops = &ram_ops, .counter = TIER_RAM, .ds = ds, .cache = t};
}

/* ---- SSD --------------------------------------------------------------------------------- */

static int ssd_reader_create(const chunk_source *s, io_engine *files, chunk_reader **out)
{
    return chunksrc_reader_new(s, files, 0, out);
}

/* The chunk's staged file, opened on first use; absent until staged (or once dropped). */
static int ssd_find(chunk_reader *r, uint64_t chunk, const refill_plan *p)
{
    (void)p;
    r->fd = tier_ssd_fd(r->src->cache, chunk);
    r->base = 0;
    return r->fd >= 0 ? HDMLP_OK : CHUNK_ABSENT;
}

static void ssd_name(const chunk_source *s, const refill_plan *p, char *buf, size_t cap)
{
    (void)s;
    (void)p;
    snprintf(buf, cap, "SSD chunk cache");
}

static int ssd_read(chunk_reader *r, uint64_t chunk, const refill_plan *p, uint8_t *buf,
                    chunk_bytes *out)
{
    *out = (chunk_bytes){buf, 0};
    return chunksrc_read_ranges(r, chunk, p, buf, "SSD chunk cache");
}

static void ssd_drop(const chunk_source *s, uint64_t chunk) { tier_ssd_bad(s->cache, chunk); }

static const chunk_source_ops ssd_ops = {
    .reader_create = ssd_reader_create,
    .find = ssd_find,
    .read = ssd_read,
    .name = ssd_name,
    .drop = ssd_drop,
};

void chunk_source_ssd(chunk_source *s, hdmlp_dataset *ds, tier *t, struct cost_clock *clock)
{
    *s = (chunk_source){
        .ops = &ssd_ops, .counter = TIER_SSD, .clock = clock, .ds = ds, .cache = t};
}
