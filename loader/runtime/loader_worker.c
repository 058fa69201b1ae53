/*
 * I/O workers: take refill jobs in queue order, read them from a chunk source
 * (loader_chunksrc.h), check every sample's checksum, decode into the samples' own buffers,
 * and report completion. Errors travel with the job's samples.
 *
 * Policy here, mechanism in the sources: a job asks the cache its chunk is placed in (RAM or
 * SSD tier) first, and the dataset when the cache does not hold the chunk; a bad cached copy
 * is dropped and the dataset read instead (tier_fallbacks); the source that serves the job
 * counts its bytes (RAM, SSD, or the dataset's per-epoch bytes) and, when its read
 * succeeded, teaches its cost model the read's time on its clock; a first load, read whole
 * from the dataset, fills the chunk's cache.
 */
#include "loader_worker.h"
#include "loader_balance_apply.h"
#include "loader_core.h"
#include "loader_exchange.h"
#include "loader_image_pipe.h"
#include "loader_plan.h"
#include "loader_teardown.h"
#include "loader_tier_stage.h"

#include <string.h>

int worker_start(struct hdmlp_loader *ld, ld_worker *w)
{
    w->ld = ld;
    int rc = io_engine_create(ld->cfg.engine, 64, &w->io);
    if (rc != HDMLP_OK) {
        return rc;
    }
    for (int k = 0; k < TIER_KINDS; k++) {
        if (ld->src[k].ops != NULL) {
            rc = chunk_reader_create(&ld->src[k], w->io, &w->rd[k]);
            if (rc != HDMLP_OK) {
                return rc;
            }
        }
    }
    rc = fmt_decoder_create(ld->ix, &w->dec);
    if (rc != HDMLP_OK) {
        return rc;
    }
    /* The worker's read buffer: reserved in the budget (loader_sizing.c), mapped once. */
    w->buf_cap = loader_read_buffer(ld->ix);
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
    for (int k = 0; k < TIER_KINDS; k++) {
        chunk_reader_free(w->rd[k]); /* before the engine they borrow */
    }
    io_engine_free(w->io);
    fmt_decoder_free(w->dec);
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
        fmt_sample_record(job->rec + (size_t)i * FMT_SAMPLE_REC_LEN, &rec);
        if (job->vals != NULL) {
            rec.n_fields = ld->ix->h.n_fields;
            rec.vals = job->vals + (size_t)i * rec.n_fields * FMT_VALUE_REC_LEN;
        }
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

/* What asking one source for a job gave. */
typedef struct job_read {
    int found;   /* the source's find: HDMLP_OK, CHUNK_ABSENT or an error (nothing read) */
    int read_rc; /* the read (bytes, lengths, a whole plan's chunk header) */
    int rc;      /* the read's error, else the samples' decoding */
    double us;   /* the read's time on the source's clock */
} job_read;

/* The job's result: a failed read or chunk header fails every sample of the job (none was
 * decoded); else the samples' (job_result). */
static int job_outcome(const struct hdmlp_loader *ld, const job_read *r)
{
    return r->read_rc != HDMLP_OK ? r->read_rc : job_result(ld, r->rc);
}

/* Asks source k (by TIER_*) for the job: find, then a read timed on the source's clock,
 * then the samples decoded. */
static job_read read_job(ld_worker *w, ld_job *job, int k)
{
    const chunk_source *src = &w->ld->src[k];
    const refill_plan *p = &job->plan;
    job_read r = {chunk_find(w->rd[k], job->chunk, p), HDMLP_OK, HDMLP_OK, 0.0};
    if (r.found != HDMLP_OK) {
        r.read_rc = r.rc = r.found;
        return r;
    }
    const double token = src->clock != NULL ? cost_clock_start(src->clock) : 0.0;
    chunk_bytes bytes;
    r.read_rc = r.rc = chunk_read(w->rd[k], job->chunk, p, w->buf, &bytes);
    r.us = src->clock != NULL ? cost_clock_end(src->clock, token) : 0.0;
    if (r.rc == HDMLP_OK) {
        char where[512];
        src->ops->name(src, p, where, sizeof(where));
        r.rc = decode_samples(w, job, bytes.base, bytes.whole_chunk, where);
    }
    return r;
}

/* Counts the bytes source k served the job with (per planned epoch for the dataset) and,
 * when its read succeeded and is timed, teaches the source's cost model that read (lock
 * taken here). */
static void count_read(struct hdmlp_loader *ld, int k, const ld_job *job, const job_read *r)
{
    const chunk_source *src = &ld->src[k];
    const uint64_t bytes = job->plan.buf_len;
    pthread_mutex_lock(&ld->lock);
    if (r->read_rc == HDMLP_OK && src->clock != NULL && job->plan.requests > 0) {
        loader_learn(ld, src->counter, job->plan.requests, bytes, r->us);
    }
    if (src->counter == TIER_RAM) {
        ld->st.ram_cache_bytes += bytes;
    } else if (src->counter == TIER_SSD) {
        ld->st.ssd_cache_bytes += bytes;
    } else {
        loader_count_source(ld, job->epoch, bytes);
    }
    pthread_mutex_unlock(&ld->lock);
}

/* The cache a job asks before the dataset (policy), by TIER_*: the chunk's placement, but
 * for the first load of a RAM-placed chunk, which reads the dataset to fill the cache (an
 * SSD-placed chunk's file, staged by an earlier run, serves even its first load). */
static int job_cache(const ld_job *job, int place)
{
    return place == TIER_RAM && job->first_load ? TIER_SOURCE : place;
}

/* A first load read the chunk whole from the dataset and verified it: the chunk's cache
 * keeps it for the later loads (a bad one never). */
static void keep_first_load(ld_worker *w, const ld_job *job, int place, int rc)
{
    struct hdmlp_loader *ld = w->ld;
    const refill_plan *p = &job->plan;
    if (!job->first_load || rc != HDMLP_OK || !p->whole) {
        return;
    }
    if (place == TIER_SSD) {
        stage_first_load(ld, job->chunk, w->buf, p->buf_len, w->buf_cap);
    } else if (place == TIER_RAM) {
        uint8_t *copy = hd_map_alloc(p->buf_len);
        if (copy != NULL) {
            memcpy(copy, w->buf, p->buf_len);
        }
        if (copy != NULL && !tier_ram_put(ld->tier, job->chunk, copy, p->buf_len)) {
            hd_map_free(copy, p->buf_len);
        }
    }
}

static int run_job(ld_worker *w, ld_job *job)
{
    struct hdmlp_loader *ld = w->ld;
    const refill_plan *p = &job->plan;
    if (p->buf_len > w->buf_cap) {
        return hd_err(HDMLP_E_STATE,
                      "loader: refill of chunk %llu needs %llu bytes, above the "
                      "%llu-byte read buffer",
                      (unsigned long long)job->chunk, (unsigned long long)p->buf_len,
                      (unsigned long long)w->buf_cap);
    }
    const int place = ld->tier != NULL ? tier_placement(ld->tier, job->chunk) : TIER_SOURCE;
    const int cache = job_cache(job, place);
    if (cache != TIER_SOURCE) {
        const chunk_source *src = &ld->src[cache];
        const job_read r = read_job(w, job, cache);
        if (r.found == HDMLP_OK && (r.rc == HDMLP_OK || src->ops->drop == NULL)) {
            count_read(ld, cache, job, &r);
            return job_outcome(ld, &r);
        }
        if (r.found == HDMLP_OK) {
            /* A bad cached copy is never served: drop it and read the dataset. */
            reset_results(job);
            src->ops->drop(src, job->chunk);
            pthread_mutex_lock(&ld->lock);
            ld->st.tier_fallbacks++;
            pthread_mutex_unlock(&ld->lock);
        }
    }
    const job_read r = read_job(w, job, TIER_SOURCE);
    if (r.found != HDMLP_OK) {
        return r.found; /* the segment cannot be opened: its detail names it */
    }
    count_read(ld, TIER_SOURCE, job, &r);
    keep_first_load(w, job, place, r.rc);
    return job_outcome(ld, &r);
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
    if (!job->prepared) {
        return w->buf_cap; /* its table and its read are not known yet (buffer_fit) */
    }
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
        if (ld->charged + w->buf_cap > budget_plan_limit(&ld->budget)) {
            return 0;
        }
        w->held = w->buf_cap;
    } else {
        const uint64_t need = job_buffer_need(ld, w, job);
        if (ld->io_pool_used + need <= budget_share_bytes(&ld->budget, BUDGET_IO_POOL)) {
            ld->io_pool_used += need;
            w->held = need;
            w->held_pool = 1;
            return 1;
        }
        if (ld->charged + need > budget_plan_limit(&ld->budget)) {
            return 0;
        }
        w->held = need;
    }
    ld->charged += w->held;
    loader_note_peak(ld);
    return 1;
}

/* Once the job w took unprepared has its plan (lock held): a pooled charge comes down to
 * what its read touches. */
static void buffer_fit(ld_worker *w, const ld_job *job)
{
    struct hdmlp_loader *ld = w->ld;
    if (!ld->io_pooled) {
        return;
    }
    const uint64_t need = job_buffer_need(ld, w, job);
    if (need < w->held) {
        if (w->held_pool) {
            ld->io_pool_used -= w->held - need;
        } else {
            ld->charged -= w->held - need;
        }
        w->held = need;
    }
}

/* Prepares a job planning left to the I/O thread (lock not held): its records read with w's
 * buffer (charged: the job's read has not started), then its plan made under the lock. */
static int prepare_job(ld_worker *w, ld_job *job)
{
    struct hdmlp_loader *ld = w->ld;
    int rc = plan_records(ld, job, w->buf, w->buf_cap);
    pthread_mutex_lock(&ld->lock);
    if (rc == HDMLP_OK) {
        rc = plan_prepared(ld, job);
    }
    if (rc == HDMLP_OK) {
        plan_count_reads(ld, job);
        buffer_fit(w, job);
    }
    pthread_mutex_unlock(&ld->lock);
    return rc;
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

        int rc = job->prepared ? HDMLP_OK : prepare_job(w, job);
        rc = rc == HDMLP_OK ? run_job(w, job) : rc;
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
