/*
 * I/O workers: take refill jobs in queue order, read them through the I/O engine, check
 * the chunk header (whole reads) and every sample's checksum, decode into the samples'
 * own buffers, and report completion. Errors travel with the job's samples.
 */
#include "loader_core.h"
#include "loader_image_pipe.h"
#include "loader_source.h"

#include <stdio.h>
#include <string.h>

int worker_start(struct hdmlp_loader *ld, ld_worker *w)
{
    w->ld = ld;
    int rc = io_engine_create(ld->cfg.engine, 64, &w->io);
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (ld->ds->store != NULL) {
        rc = src_conn_create(ld->ds->store, 64, &w->src);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    rc = fmt_decoder_create(ld->ix, &w->dec);
    if (rc != HDMLP_OK) {
        return rc;
    }
    /* The worker's read buffer: reserved in the budget (loader_sizing.c), mapped once. */
    w->buf_cap = refill_max_buffer(ld->ix);
    w->buf = hd_map_alloc(w->buf_cap);
    if (w->buf == NULL) {
        return hd_err(HDMLP_E_NOMEM, "loader: cannot map a %llu-byte read buffer",
                      (unsigned long long)w->buf_cap);
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        return hd_err(HDMLP_E_NOMEM, "loader: cannot start an I/O thread");
    }
    w->started = 1;
    return HDMLP_OK;
}

void worker_free(ld_worker *w)
{
    io_engine_free(w->io);
    src_conn_free(w->src);
    hd_free(w->src_ranges);
    fmt_decoder_free(w->dec);
    hd_free(w->reads);
    hd_map_free(w->buf, w->buf_cap);
}

/* Decodes the job's samples from `base`, where the plan's buffer layout starts (or, with
 * whole_chunk set, where the whole chunk starts). */
static int decode_samples(ld_worker *w, ld_job *job, const uint8_t *base, int whole_chunk,
                          const char *where)
{
    struct hdmlp_loader *ld = w->ld;
    int first = HDMLP_OK;
    for (uint32_t i = 0; i < job->n; i++) {
        ld_sample *s = job->samples[i];
        fmt_sample rec;
        fmt_index_sample(ld->ix, s->index, &rec);
        if (s->data == NULL) {
            s->data = hd_malloc(s->size ? s->size : 1);
        }
        if (s->data == NULL) {
            return hd_err(HDMLP_E_NOMEM, "loader: out of memory for sample %llu",
                          (unsigned long long)s->index);
        }
        const uint64_t pos = whole_chunk ? rec.offset : job->plan.sample_pos[i];
        s->result = fmt_sample_decode(w->dec, s->index, &rec, base + pos, s->data, s->size);
        if (s->result != HDMLP_OK) {
            hd_err_wrap(s->result, "%s: ", where);
            s->err = hd_malloc(strlen(hdmlp_last_error()) + 1);
            if (s->err != NULL) {
                strcpy(s->err, hdmlp_last_error());
            }
            if (first == HDMLP_OK) {
                first = s->result;
            }
            if (!ld->cfg.skip_corrupt) {
                return first; /* failing anyway: the first error names the sample */
            }
        }
    }
    return first;
}

/* With skip_corrupt a bad sample fails alone (its own result) and the job succeeds. */
static int job_result(const struct hdmlp_loader *ld, int decode_rc)
{
    return ld->cfg.skip_corrupt && decode_rc == HDMLP_E_CORRUPT ? HDMLP_OK : decode_rc;
}

/* Forgets per-sample decode failures before decoding again from another copy. */
static void reset_results(ld_job *job)
{
    for (uint32_t i = 0; i < job->n; i++) {
        hd_free(job->samples[i]->err);
        job->samples[i]->err = NULL;
        job->samples[i]->result = HDMLP_OK;
    }
}

/* Reads the plan's ranges from fd, where the chunk starts at `chunk_base` (its segment
 * offset for the dataset, 0 for an SSD cache file), into the worker's buffer and checks
 * lengths and (whole reads) the chunk header. */
static int read_plan(ld_worker *w, ld_job *job, int fd, uint64_t chunk_base, const char *where)
{
    struct hdmlp_loader *ld = w->ld;
    const refill_plan *p = &job->plan;
    fmt_chunk ch;
    fmt_index_chunk(ld->ix, job->chunk, &ch);
    int rc;
    if (fd < 0) {
        /* A remote dataset: the ranges of the segment object, all in flight at once. */
        char name[32];
        snprintf(name, sizeof(name), FMT_SEGMENT_NAME_FMT, p->segment);
        for (uint32_t i = 0; i < p->n_ranges; i++) {
            w->src_ranges[i] = (src_range){name, p->ranges[i].seg_off, p->ranges[i].len,
                                           w->buf + p->ranges[i].buf_off};
            w->reads[i] = (io_read){.fd = fd,
                                    .offset = p->ranges[i].seg_off,
                                    .len = p->ranges[i].len,
                                    .dst = w->buf + p->ranges[i].buf_off,
                                    .result = (int64_t)p->ranges[i].len};
        }
        rc = src_conn_read(w->src, w->src_ranges, p->n_ranges);
    } else {
        for (uint32_t i = 0; i < p->n_ranges; i++) {
            w->reads[i] = (io_read){.fd = fd,
                                    .offset = p->ranges[i].seg_off - ch.offset + chunk_base,
                                    .len = p->ranges[i].len,
                                    .dst = w->buf + p->ranges[i].buf_off};
        }
        rc = io_engine_read(w->io, w->reads, p->n_ranges);
    }
    if (rc != HDMLP_OK) {
        hd_err_wrap(rc, "%s, chunk %llu: ", where, (unsigned long long)job->chunk);
        return rc;
    }
    for (uint32_t i = 0; i < p->n_ranges; i++) {
        /* Direct reads may stop short inside the final alignment padding only. */
        const uint64_t need_end = ch.length;
        const uint64_t end = p->ranges[i].seg_off - ch.offset + (uint64_t)w->reads[i].result;
        if ((uint64_t)w->reads[i].result < p->ranges[i].len && end < need_end) {
            return hd_err(HDMLP_E_CORRUPT,
                          "%s, chunk %llu: file truncated (read %lld of %llu bytes at %llu)",
                          where, (unsigned long long)job->chunk, (long long)w->reads[i].result,
                          (unsigned long long)p->ranges[i].len,
                          (unsigned long long)w->reads[i].offset);
        }
    }
    if (p->whole) {
        rc = fmt_chunk_header_check(ld->ix, job->chunk, w->buf, p->buf_len);
        if (rc != HDMLP_OK) {
            hd_err_wrap(rc, "%s: ", where);
        }
    }
    return rc;
}

/* Counts bytes read by tier, per planned epoch for the source, and (ops > 0) teaches the
 * tier's cost model a read that took service_us (lock taken here). */
static void count_read(struct hdmlp_loader *ld, int tier_kind, uint64_t epoch,
                       const refill_plan *p, uint32_t ops, double service_us)
{
    const uint64_t bytes = p->buf_len;
    pthread_mutex_lock(&ld->lock);
    if (ops > 0) {
        loader_learn(ld, tier_kind, ops, bytes, service_us);
    }
    if (tier_kind == TIER_RAM) {
        ld->st.ram_cache_bytes += bytes;
    } else if (tier_kind == TIER_SSD) {
        ld->st.ssd_cache_bytes += bytes;
    } else {
        loader_count_source(ld, epoch, bytes);
    }
    pthread_mutex_unlock(&ld->lock);
}

static int run_job(ld_worker *w, ld_job *job)
{
    struct hdmlp_loader *ld = w->ld;
    const refill_plan *p = &job->plan;
    tier *t = ld->tier;
    const int place = t != NULL ? tier_placement(t, job->chunk) : TIER_SOURCE;
    if (place == TIER_RAM && !job->first_load) {
        /* Waits while the chunk's first (caching) load is still running. */
        const uint8_t *ram = tier_ram_wait(t, job->chunk);
        if (ram != NULL) {
            count_read(ld, TIER_RAM, job->epoch, p, 0, 0.0);
            return job_result(ld, decode_samples(w, job, ram, 1, "RAM chunk cache"));
        }
    }
    if (p->buf_len > w->buf_cap) {
        return hd_err(HDMLP_E_STATE,
                      "loader: refill of chunk %llu needs %llu bytes, above the "
                      "%llu-byte read buffer",
                      (unsigned long long)job->chunk, (unsigned long long)p->buf_len,
                      (unsigned long long)w->buf_cap);
    }
    if (w->reads_cap < p->n_ranges) {
        io_read *r = hd_realloc(w->reads, p->n_ranges * sizeof(io_read));
        if (r == NULL) {
            return hd_err(HDMLP_E_NOMEM, "loader: out of memory");
        }
        w->reads = r;
        if (w->src != NULL) {
            src_range *sr = hd_realloc(w->src_ranges, p->n_ranges * sizeof(src_range));
            if (sr == NULL) {
                return hd_err(HDMLP_E_NOMEM, "loader: out of memory");
            }
            w->src_ranges = sr;
        }
        w->reads_cap = p->n_ranges;
    }
    if (place == TIER_SSD) {
        const int fd = tier_ssd_fd(t, job->chunk);
        if (fd >= 0) {
            const double token = cost_clock_start(&ld->ssd_clock);
            int rc = read_plan(w, job, fd, 0, "SSD chunk cache");
            const double us = cost_clock_end(&ld->ssd_clock, token);
            if (rc == HDMLP_OK) {
                rc = decode_samples(w, job, w->buf, 0, "SSD chunk cache");
            }
            if (rc == HDMLP_OK) {
                count_read(ld, TIER_SSD, job->epoch, p, p->requests, us);
                return HDMLP_OK;
            }
            /* A bad cache file is never served: drop it and read the dataset. */
            reset_results(job);
            tier_ssd_bad(t, job->chunk);
            pthread_mutex_lock(&ld->lock);
            ld->st.tier_fallbacks++;
            pthread_mutex_unlock(&ld->lock);
        }
    }
    char seg[512];
    ds_segment_path(ld->ds, p->segment, seg, sizeof(seg));
    const int fd = w->src != NULL ? -1 : ds_segment_fd(ld->ds, p->segment, ld->cfg.direct);
    if (fd < 0 && w->src == NULL) {
        return fd;
    }
    fmt_chunk ch;
    fmt_index_chunk(ld->ix, job->chunk, &ch);
    const double token = cost_clock_start(&ld->src_clock);
    int rc = read_plan(w, job, fd, ch.offset, seg);
    const double us = cost_clock_end(&ld->src_clock, token);
    const int read_failed = rc != HDMLP_OK;
    count_read(ld, TIER_SOURCE, job->epoch, p, read_failed ? 0 : p->requests, us);
    if (rc == HDMLP_OK) {
        rc = decode_samples(w, job, w->buf, 0, seg);
    }
    if (job->first_load && place == TIER_SSD && rc == HDMLP_OK && p->whole) {
        stage_first_load(ld, job->chunk, w->buf, p->buf_len, w->buf_cap);
    }
    if (job->first_load && place == TIER_RAM) {
        /* A verified whole chunk is kept for the later loads; a bad one never is. */
        uint8_t *copy = rc == HDMLP_OK && p->whole ? hd_map_alloc(p->buf_len) : NULL;
        if (copy != NULL) {
            memcpy(copy, w->buf, p->buf_len);
        }
        if (copy != NULL && !tier_ram_put(t, job->chunk, copy, p->buf_len)) {
            hd_map_free(copy, p->buf_len);
        }
    }
    /* A failed read or chunk header fails every sample of the job (none was decoded). */
    return read_failed ? rc : job_result(ld, rc);
}

/* Read buffers and the budget. Local sources: the first two I/O threads' buffers are
 * reserved (loader_sizing.c) and stay resident; threads beyond them charge a whole buffer
 * only while they run a job, when the budget has room, and give its pages back after it, so
 * neither the order nor the budget depends on the thread count. Remote sources (io_pooled):
 * every thread charges what its job touches (a ranged refill's bytes, not a whole chunk's),
 * first from the reserved bytes (io_pool), then from the budget's room, and gives the pages
 * back after it; with requests that wait tens of milliseconds, the reserve then runs several
 * refills at once instead of two. A job always fits an empty pool. */
static int extra_worker(const ld_worker *w) { return w - w->ld->workers >= LOADER_IO_RESERVED; }

/* Bytes of the read buffer a job touches: its plan's buffer, rounded to whole 4 KiB pages,
 * or the aligned chunk for a whole read (the SSD tier stages it with its padding). */
static uint64_t job_buffer_need(const struct hdmlp_loader *ld, const ld_worker *w,
                                const ld_job *job)
{
    uint64_t need = fmt_align_up(job->plan.buf_len);
    if (job->plan.whole) {
        fmt_chunk ch;
        fmt_index_chunk(ld->ix, job->chunk, &ch);
        const uint64_t aligned = fmt_align_up(ch.length);
        need = aligned > need ? aligned : need;
    }
    return need < w->buf_cap ? need : w->buf_cap;
}

/* Charges the head job's read buffer for w (lock held); 0 when it does not fit now. */
static int buffer_take(ld_worker *w, const ld_job *job)
{
    struct hdmlp_loader *ld = w->ld;
    w->held = 0;
    w->held_pool = 0;
    if (!ld->io_pooled) {
        if (!extra_worker(w)) {
            return 1;
        }
        if (ld->charged + w->buf_cap > ld->plan_limit) {
            return 0;
        }
        w->held = w->buf_cap;
    } else {
        const uint64_t need = job_buffer_need(ld, w, job);
        if (ld->io_pool_used + need <= ld->io_pool) {
            ld->io_pool_used += need;
            w->held = need;
            w->held_pool = 1;
            return 1;
        }
        if (ld->charged + need > ld->plan_limit) {
            return 0;
        }
        w->held = need;
    }
    ld->charged += w->held;
    loader_note_peak(ld);
    return 1;
}

/* Gives back the pages of w's buffer a job was charged for (lock not held). */
static void buffer_release_pages(const ld_worker *w)
{
    if (w->held != 0) {
        hd_map_release_pages(w->buf, w->held);
    }
}

/* Uncharges them (lock held). */
static void buffer_give(ld_worker *w)
{
    struct hdmlp_loader *ld = w->ld;
    if (w->held_pool) {
        ld->io_pool_used -= w->held;
    } else {
        ld->charged -= w->held;
    }
    w->held = 0;
    w->held_pool = 0;
}

void *worker_main(void *arg)
{
    ld_worker *w = arg;
    struct hdmlp_loader *ld = w->ld;
    pthread_mutex_lock(&ld->lock);
    for (;;) {
        for (;;) {
            if (ld->shutdown) {
                break;
            }
            if (!image_pipe_io_allowed(ld, (uint32_t)(w - ld->workers))) {
                /* The image pipeline gave this thread's turn to decoding: pass on any
                 * wake-up it took and wait for the split to change. */
                pthread_cond_signal(&ld->work_cv);
                image_pipe_io_wait(ld);
            } else if (!node_balance_io_allowed(ld, (uint32_t)(w - ld->workers))) {
                /* The node board holds this rank back for a starved local rank: the same
                 * gate, on the board's condition variable. */
                pthread_cond_signal(&ld->work_cv);
                node_balance_io_wait(ld);
            } else if (ld->q_head == NULL) {
                pthread_cond_wait(&ld->work_cv, &ld->lock);
            } else {
                plan_refresh(ld, ld->q_head);
                if (buffer_take(w, ld->q_head)) {
                    break;
                }
                /* Leave the job to another thread: pass on the wake-up this one took. */
                pthread_cond_signal(&ld->work_cv);
                pthread_cond_wait(&ld->ready_cv, &ld->lock);
            }
        }
        if (ld->shutdown) {
            break;
        }
        if (++ld->reading > ld->st.refills_in_flight_peak) {
            ld->st.refills_in_flight_peak = ld->reading;
        }
        ld_job *job = ld->q_head;
        ld->q_head = job->next;
        if (ld->q_head == NULL) {
            ld->q_tail = NULL;
        }
        pthread_mutex_unlock(&ld->lock);

        const int rc = run_job(w, job);
        if (job->first_load) {
            tier_first_done(ld->tier, job->chunk); /* however it went: release waiters */
        }
        buffer_release_pages(w);

        pthread_mutex_lock(&ld->lock);
        const char *detail = rc == HDMLP_OK ? NULL : hdmlp_last_error();
        for (uint32_t i = 0; i < job->n; i++) {
            ld_sample *s = job->samples[i];
            s->state = rc != HDMLP_OK ? rc : s->result != HDMLP_OK ? s->result : SAMPLE_READY;
            if (detail != NULL && s->err == NULL) {
                const size_t len = strlen(detail);
                s->err = hd_malloc(len + 1);
                if (s->err != NULL) {
                    memcpy(s->err, detail, len + 1);
                }
            }
        }
        image_pipe_io_done(ld, job->n);
        ld->inflight--;
        buffer_give(w); /* its pages went back before the lock was taken */
        ld->reading--;
        pthread_cond_broadcast(&ld->ready_cv);
        job_free(job);
        node_balance_tick(ld);
        if (ld->net != NULL) {
            exchange_serve(ld); /* answers that waited for this refill */
            if (ld->send_head != NULL) {
                pthread_mutex_unlock(&ld->lock);
                exchange_flush(ld);
                pthread_mutex_lock(&ld->lock);
            }
        }
    }
    pthread_mutex_unlock(&ld->lock);
    return NULL;
}
