/*
 * SSD staging: fills the cache directory with the SSD-placed chunks, in order of first use,
 * by two routes:
 *   - first loads: the first load of an SSD-placed chunk reads it whole from the source
 *     (the consumer needs it anyway); the I/O thread writes the verified bytes to the cache
 *     (a page-cache write, no sync), so a loader bound by a slow source stages as it goes;
 *   - the stager thread: chunks not staged yet (their first load is far ahead, or a cache
 *     file went bad) are read while an I/O thread is idle, so it never takes I/O capacity
 *     a refill is waiting for.
 * Only chunks this rank loads are staged (placement covers owned chunks only). Chunks are
 * verified (header) before they are stored; staging stops at the first write error (e.g. a
 * full disk), leaving the rest on the source.
 */
#include "loader_tier_stage.h"
#include "loader_core.h"
#include "loader_teardown.h"
#include "loader_testing.h"

#include <string.h>

void loader_testing_stager_off(hdmlp_config *cfg, int off) { cfg->stager_off = off != 0; }

void stage_first_load(struct hdmlp_loader *ld, uint64_t chunk, uint8_t *buf, uint64_t len,
                      uint64_t cap)
{
    fmt_chunk ch;
    fmt_index_chunk(ld->ix, chunk, &ch);
    const uint64_t aligned = fmt_align_up(ch.length);
    if (len > aligned || aligned > cap || tier_ssd_staged(ld->tier, chunk)) {
        return;
    }
    /* A cache file holds the chunk with its alignment padding, as the segment does. */
    memset(buf + len, 0, aligned - len);
    if (tier_ssd_store(ld->tier, chunk, buf, aligned) == 1) {
        pthread_mutex_lock(&ld->lock);
        ld->st.ssd_staged_chunks++;
        pthread_mutex_unlock(&ld->lock);
    }
}

/* Reads a chunk whole (aligned) from the dataset through rd into buf, verifying its header;
 * the alignment padding is zero in buf, as stage_first_load leaves it. */
static int stage_read(chunk_reader *rd, const fmt_index *ix, uint64_t chunk, uint8_t *buf,
                      uint64_t *len)
{
    fmt_chunk ch;
    fmt_index_chunk(ix, chunk, &ch);
    *len = fmt_align_up(ch.length);
    refill_range whole = {ch.offset, *len, 0};
    const refill_plan p = {.segment = ch.segment,
                           .whole = 1,
                           .n_ranges = 1,
                           .requests = 1,
                           .ranges = &whole,
                           .buf_len = *len};
    chunk_bytes out;
    if (chunk_find(rd, chunk, &p) != HDMLP_OK ||
        chunk_read(rd, chunk, &p, buf, &out) != HDMLP_OK) {
        return 0;
    }
    memset(buf + ch.length, 0, *len - ch.length);
    return 1;
}

/* The stager's reader of the dataset: a source of its own, buffered as the stager always
 * read (its reads are not refills: not timed, nothing learnt), over a pread engine for local
 * files. 0 when out of memory. */
static int stage_reader(struct hdmlp_loader *ld, chunk_source *src, io_engine **io,
                        chunk_reader **rd)
{
    *rd = NULL;
    chunk_source_dataset(src, ld->ds, 0, NULL);
    if (io_engine_create(HDMLP_ENGINE_PREAD, 1, io) != HDMLP_OK) {
        return 0;
    }
    return chunk_reader_create(src, *io, rd) == HDMLP_OK;
}

void *stage_main(void *arg)
{
    struct hdmlp_loader *ld = arg;
    tier *t = ld->tier;
    uint64_t n = 0;
    const uint64_t *order = tier_ssd_order(t, &n);
    chunk_source src;
    io_engine *io = NULL;
    chunk_reader *rd = NULL;
    if (!stage_reader(ld, &src, &io, &rd)) {
        n = 0; /* out of memory: the chunks stay on the source (first loads still stage) */
    }
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t chunk = order[i];
        if (tier_ssd_staged(t, chunk)) {
            continue;
        }
        pthread_mutex_lock(&ld->lock);
        while (!ld->shutdown && ld->inflight >= ld->n_workers) {
            pthread_cond_wait(&ld->ready_cv, &ld->lock);
        }
        const int stop = ld->shutdown;
        const uint64_t epoch = ld->plan_epoch;
        pthread_mutex_unlock(&ld->lock);
        if (stop || tier_ssd_stopped(t)) {
            break;
        }
        uint64_t len = 0;
        if (tier_ssd_staged(t, chunk) || !stage_read(rd, ld->ix, chunk, ld->stage_buf, &len)) {
            continue; /* staged meanwhile, or left on the source (refills report errors) */
        }
        pthread_mutex_lock(&ld->lock);
        loader_count_source(ld, epoch, len);
        pthread_mutex_unlock(&ld->lock);
        const int rc = tier_ssd_store(t, chunk, ld->stage_buf, len);
        if (rc < 0) {
            break; /* full or failing cache disk: staging stops */
        }
        pthread_mutex_lock(&ld->lock);
        ld->st.ssd_staged_chunks += (uint64_t)rc;
        pthread_mutex_unlock(&ld->lock);
    }
    chunk_reader_free(rd);
    io_engine_free(io);
    pthread_mutex_lock(&ld->lock);
    ld->stage_done = 1;
    pthread_cond_broadcast(&ld->ready_cv);
    pthread_mutex_unlock(&ld->lock);
    return NULL;
}

void loader_wait_staged(hdmlp_loader *ld)
{
    pthread_mutex_lock(&ld->lock);
    while (ld->stager_started && !ld->stage_done) {
        pthread_cond_wait(&ld->ready_cv, &ld->lock);
    }
    pthread_mutex_unlock(&ld->lock);
}
