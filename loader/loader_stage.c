/*
 * SSD stager: fills the cache directory with the SSD-placed chunks, in the background, in
 * order of first use, by two routes:
 *   - offers: the first load of an SSD-placed chunk reads it whole from the source; the
 *     worker copies the verified bytes into the stager's buffer when the stager is free
 *     (it never waits for it), so a loader bound by a slow source still stages as it goes;
 *   - its own reads: chunks not staged yet are read from the source while an I/O thread is
 *     idle, so it never takes I/O capacity a refill is waiting for.
 * It never stages chunks this rank does not load (placement covers owned chunks only).
 * Chunks are verified (header) before they are stored; staging stops at the first write
 * error (e.g. a full disk), leaving the rest on the source.
 */
#include "loader_core.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static int read_whole(int fd, uint8_t *buf, uint64_t len, uint64_t off)
{
    uint64_t done = 0;
    while (done < len) {
        const ssize_t r = pread(fd, buf + done, len - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        if (r == 0) {
            break;
        }
        done += (uint64_t)r;
    }
    return done == len ? 0 : -1;
}

int loader_stage_offers_only;

int stage_offer(struct hdmlp_loader *ld, uint64_t chunk, const uint8_t *buf, uint64_t len)
{
    fmt_chunk ch;
    fmt_index_chunk(ld->ix, chunk, &ch);
    const uint64_t aligned = fmt_align_up(ch.length);
    if (len > aligned || tier_ssd_staged(ld->tier, chunk)) {
        return 0;
    }
    pthread_mutex_lock(&ld->lock);
    const int take = ld->stage_box == STAGE_FREE;
    if (take) {
        ld->stage_box = STAGE_FILLING;
    }
    pthread_mutex_unlock(&ld->lock);
    if (!take) {
        return 0;
    }
    /* A cache file holds the chunk with its alignment padding, as the segment does. */
    memcpy(ld->stage_buf, buf, len);
    memset(ld->stage_buf + len, 0, aligned - len);
    pthread_mutex_lock(&ld->lock);
    ld->stage_chunk = chunk;
    ld->stage_len = aligned;
    ld->stage_box = STAGE_FULL;
    pthread_cond_broadcast(&ld->ready_cv);
    pthread_mutex_unlock(&ld->lock);
    return 1;
}

/* Reads a chunk whole from the source into buf and verifies its header. */
static int stage_read(struct hdmlp_loader *ld, uint64_t chunk, uint8_t *buf, uint64_t *len)
{
    fmt_chunk ch;
    fmt_index_chunk(ld->ix, chunk, &ch);
    *len = fmt_align_up(ch.length);
    const int fd = ds_segment_fd(ld->ds, ch.segment, 0);
    return fd >= 0 && read_whole(fd, buf, *len, ch.offset) == 0 &&
           fmt_chunk_header_check(ld->ix, chunk, buf, *len) == HDMLP_OK;
}

void *stage_main(void *arg)
{
    struct hdmlp_loader *ld = arg;
    tier *t = ld->tier;
    uint64_t n = 0;
    const uint64_t *order = tier_ssd_order(t, &n);
    uint8_t *buf = ld->stage_buf;
    /* Own reads: the next chunk in first-use order (none in the tests' offers-only mode,
     * which then ends at shutdown only). */
    uint64_t next = loader_stage_offers_only ? n : 0;
    for (;;) {
        while (next < n && tier_ssd_staged(t, order[next])) {
            next++;
        }
        pthread_mutex_lock(&ld->lock);
        /* An offer being copied in always completes before anything else happens. */
        while (ld->stage_box == STAGE_FILLING ||
               (!ld->shutdown && ld->stage_box == STAGE_FREE &&
                (next < n ? ld->inflight >= ld->n_workers : loader_stage_offers_only))) {
            pthread_cond_wait(&ld->ready_cv, &ld->lock);
        }
        if (ld->stage_box != STAGE_FULL &&
            (ld->shutdown || (next >= n && !loader_stage_offers_only))) {
            break; /* lock held */
        }
        const int offered = ld->stage_box == STAGE_FULL;
        uint64_t chunk = offered ? ld->stage_chunk : order[next++];
        uint64_t len = ld->stage_len;
        const uint64_t epoch = ld->plan_epoch;
        ld->stage_box = STAGE_BUSY;
        pthread_mutex_unlock(&ld->lock);
        /* Own reads that fail leave the chunk on the source; the refill path reports real
         * errors. */
        const int ok = offered || stage_read(ld, chunk, buf, &len);
        if (ok && !offered) {
            pthread_mutex_lock(&ld->lock);
            loader_count_source(ld, epoch, len);
            pthread_mutex_unlock(&ld->lock);
        }
        const int failed = ok && tier_ssd_store(t, chunk, buf, len) != HDMLP_OK;
        pthread_mutex_lock(&ld->lock);
        ld->st.ssd_staged_chunks += ok && !failed;
        ld->stage_box = STAGE_FREE;
        if (failed) {
            break; /* full or failing cache disk: stop staging (lock held) */
        }
        pthread_mutex_unlock(&ld->lock);
    }
    ld->stage_box = STAGE_CLOSED;
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
