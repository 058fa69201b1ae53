/*
 * I/O workers: take refill jobs in queue order, read them through the I/O engine, check
 * the chunk header (whole reads) and every sample's checksum, decode into the samples'
 * own buffers, and report completion. Errors travel with the job's samples.
 */
#include "loader_core.h"

#include <string.h>

void job_free(ld_job *job)
{
    if (job == NULL) {
        return;
    }
    refill_plan_free(&job->plan);
    hd_free(job->samples);
    hd_free(job->slots);
    hd_free(job);
}

int worker_start(struct hdmlp_loader *ld, ld_worker *w)
{
    w->ld = ld;
    int rc = io_engine_create(ld->cfg.engine, 64, &w->io);
    if (rc != HDMLP_OK) {
        return rc;
    }
    rc = fmt_decoder_create(ld->ix, &w->dec);
    if (rc != HDMLP_OK) {
        return rc;
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
    fmt_decoder_free(w->dec);
    hd_free(w->reads);
}

static int run_job(ld_worker *w, ld_job *job)
{
    struct hdmlp_loader *ld = w->ld;
    const refill_plan *p = &job->plan;
    const int direct = ld->cfg.direct;
    char seg[512];
    ds_segment_path(ld->ds, p->segment, seg, sizeof(seg));
    const int fd = ds_segment_fd(ld->ds, p->segment, direct);
    if (fd < 0) {
        return fd;
    }
    uint8_t *buf = direct ? hd_aligned_alloc(FMT_ALIGN, p->buf_len) : hd_malloc(p->buf_len);
    if (buf == NULL) {
        return hd_err(HDMLP_E_NOMEM,
                      "loader: out of memory for a %llu-byte refill of chunk %llu",
                      (unsigned long long)p->buf_len, (unsigned long long)job->chunk);
    }
    if (w->reads_cap < p->n_ranges) {
        io_read *r = hd_realloc(w->reads, p->n_ranges * sizeof(io_read));
        if (r == NULL) {
            hd_free(buf);
            return hd_err(HDMLP_E_NOMEM, "loader: out of memory");
        }
        w->reads = r;
        w->reads_cap = p->n_ranges;
    }
    for (uint32_t i = 0; i < p->n_ranges; i++) {
        w->reads[i] = (io_read){fd, p->ranges[i].seg_off, p->ranges[i].len,
                                buf + p->ranges[i].buf_off, 0};
    }
    int rc = io_engine_read(w->io, w->reads, p->n_ranges);
    if (rc != HDMLP_OK) {
        hd_err_wrap(rc, "%s, chunk %llu: ", seg, (unsigned long long)job->chunk);
        hd_free(buf);
        return rc;
    }
    fmt_chunk ch;
    fmt_index_chunk(ld->ix, job->chunk, &ch);
    for (uint32_t i = 0; i < p->n_ranges; i++) {
        /* Direct reads may stop short inside the final alignment padding only. */
        const uint64_t need_end = ch.offset + ch.length;
        const uint64_t end = p->ranges[i].seg_off + (uint64_t)w->reads[i].result;
        if ((uint64_t)w->reads[i].result < p->ranges[i].len && end < need_end) {
            hd_free(buf);
            return hd_err(HDMLP_E_CORRUPT,
                          "%s, chunk %llu: segment truncated (read %lld of %llu bytes at %llu)",
                          seg, (unsigned long long)job->chunk, (long long)w->reads[i].result,
                          (unsigned long long)p->ranges[i].len,
                          (unsigned long long)p->ranges[i].seg_off);
        }
    }
    if (p->whole) {
        rc = fmt_chunk_header_check(ld->ix, job->chunk, buf, p->buf_len);
        if (rc != HDMLP_OK) {
            hd_err_wrap(rc, "%s: ", seg);
            hd_free(buf);
            return rc;
        }
    }
    for (uint32_t i = 0; i < job->n; i++) {
        ld_sample *s = job->samples[i];
        fmt_sample rec;
        fmt_index_sample(ld->ix, s->index, &rec);
        s->data = hd_malloc(s->size ? s->size : 1);
        if (s->data == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "loader: out of memory for sample %llu",
                        (unsigned long long)s->index);
            break;
        }
        rc =
            fmt_sample_decode(w->dec, s->index, &rec, buf + p->sample_pos[i], s->data, s->size);
        if (rc != HDMLP_OK) {
            hd_err_wrap(rc, "%s: ", seg);
            break;
        }
    }
    hd_free(buf);
    return rc;
}

void *worker_main(void *arg)
{
    ld_worker *w = arg;
    struct hdmlp_loader *ld = w->ld;
    pthread_mutex_lock(&ld->lock);
    for (;;) {
        while (!ld->shutdown && ld->q_head == NULL) {
            pthread_cond_wait(&ld->work_cv, &ld->lock);
        }
        if (ld->shutdown) {
            break;
        }
        ld_job *job = ld->q_head;
        ld->q_head = job->next;
        if (ld->q_head == NULL) {
            ld->q_tail = NULL;
        }
        pthread_mutex_unlock(&ld->lock);

        const int rc = run_job(w, job);

        pthread_mutex_lock(&ld->lock);
        const char *detail = rc == HDMLP_OK ? NULL : hdmlp_last_error();
        for (uint32_t i = 0; i < job->n; i++) {
            ld_sample *s = job->samples[i];
            s->state = rc == HDMLP_OK ? SAMPLE_READY : rc;
            if (detail != NULL) {
                const size_t len = strlen(detail);
                s->err = hd_malloc(len + 1);
                if (s->err != NULL) {
                    memcpy(s->err, detail, len + 1);
                }
            }
        }
        ld->charged -= job->plan.buf_len;
        ld->inflight--;
        pthread_cond_broadcast(&ld->ready_cv);
        job_free(job);
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
