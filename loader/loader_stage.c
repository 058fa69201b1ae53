/*
 * SSD stager: copies the SSD-placed chunks from the dataset into the cache directory in
 * order of first use, in the background. It only reads while an I/O thread is idle, so it
 * never takes I/O capacity a refill is waiting for; it never stages chunks this rank does
 * not load (placement covers owned chunks only). Chunks are verified (header) before they
 * are stored; staging stops at the first write error (e.g. a full disk), leaving the rest
 * on the source.
 */
#include "loader_core.h"

#include <errno.h>
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

void *stage_main(void *arg)
{
    struct hdmlp_loader *ld = arg;
    tier *t = ld->tier;
    uint64_t n = 0;
    const uint64_t *order = tier_ssd_order(t, &n);
    const uint64_t cap = refill_max_buffer(ld->ix);
    uint8_t *buf = hd_map_alloc(cap);
    for (uint64_t i = 0; buf != NULL && i < n; i++) {
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
        if (stop) {
            break;
        }
        fmt_chunk ch;
        fmt_index_chunk(ld->ix, chunk, &ch);
        const uint64_t len = fmt_align_up(ch.length);
        const int fd = ds_segment_fd(ld->ds, ch.segment, 0);
        if (fd < 0 || read_whole(fd, buf, len, ch.offset) != 0 ||
            fmt_chunk_header_check(ld->ix, chunk, buf, len) != HDMLP_OK) {
            continue; /* left on the source; the refill path reports real errors */
        }
        pthread_mutex_lock(&ld->lock);
        loader_count_source(ld, epoch, len);
        pthread_mutex_unlock(&ld->lock);
        if (tier_ssd_store(t, chunk, buf, len) != HDMLP_OK) {
            break; /* full or failing cache disk: stop staging */
        }
        pthread_mutex_lock(&ld->lock);
        ld->st.ssd_staged_chunks++;
        pthread_mutex_unlock(&ld->lock);
    }
    hd_map_free(buf, cap);
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
