/*
 * Public loader API: sizing abstract memory from the budget, the consumer's next(),
 * batch release, stats, and teardown.
 *
 * Budget split (all of it accounted): one whole-chunk read buffer and two batches of the
 * largest sample are reserved so the consumer can always progress while it holds one
 * batch; of the rest, 1/8 is lookahead room (samples planned ahead and refills in flight)
 * and 7/8 caps the bytes held in valid slots. A = that cap / (K × mean raw sample size),
 * between 1 and C.
 */
#include "loader_core.h"
#include "loader_sampler.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void batch_discard(hdmlp_loader *ld, hdmlp_batch *batch);

static void loader_destroy(hdmlp_loader *ld)
{
    pthread_mutex_destroy(&ld->lock);
    pthread_cond_destroy(&ld->work_cv);
    pthread_cond_destroy(&ld->ready_cv);
    hd_free(ld);
}

/* Drops one reference; the last one frees the loader. Called with the lock held; unlocks. */
static void loader_unref_unlock(hdmlp_loader *ld)
{
    const unsigned left = --ld->refs;
    pthread_mutex_unlock(&ld->lock);
    if (left == 0) {
        loader_destroy(ld);
    }
}

/* Frees everything the planner and workers own (workers already joined). */
static void loader_release_all(hdmlp_loader *ld)
{
    for (ld_job *j = ld->q_head; j != NULL;) {
        ld_job *next = j->next;
        job_free(j);
        j = next;
    }
    ld->q_head = ld->q_tail = NULL;
    if (ld->pending != NULL) {
        for (uint32_t i = 0; i < ld->pending->n; i++) {
            sample_free(ld->pending->samples[i]);
        }
        job_free(ld->pending);
        ld->pending = NULL;
    }
    for (uint64_t i = 0; i < ld->ring_count; i++) {
        sample_free(ld->ring[(ld->ring_head + i) % ld->ring_cap].s);
    }
    ld->ring_count = 0;
    if (ld->slot_buf != NULL) {
        const uint64_t slots = sched_abstract_chunks(ld->sch) * ld->ix->h.chunk_size;
        for (uint64_t i = 0; i < slots; i++) {
            sample_free(ld->slot_buf[i]);
        }
    }
    batch_discard(ld, ld->partial);
    ld->partial = NULL;
    hd_free(ld->slot_buf);
    hd_free(ld->ring);
    hd_free(ld->perm);
    hd_free(ld->scratch);
    sched_free(ld->sch);
    for (uint32_t i = 0; i < ld->n_workers; i++) {
        worker_free(&ld->workers[i]);
    }
    hd_free(ld->workers);
    ld->slot_buf = NULL;
    ld->ring = NULL;
    ld->perm = ld->scratch = NULL;
    ld->sch = NULL;
    ld->workers = NULL;
}

static void fmt_bytes(char *buf, size_t cap, uint64_t v)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024.0 && u < 4) {
        d /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", d, units[u]);
}

/* Sizes abstract memory; HDMLP_E_RANGE naming the minimum if the budget is too small. */
static int size_memory(hdmlp_loader *ld, uint64_t *abstract_chunks)
{
    const fmt_index *ix = ld->ix;
    const uint64_t n = ix->h.n_samples;
    const uint32_t k = ix->h.chunk_size;
    uint64_t max_raw = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t raw = fmt_ld64(ix->samples + i * FMT_SAMPLE_REC_LEN + 16);
        max_raw = raw > max_raw ? raw : max_raw;
    }
    const uint64_t mean = ix->h.raw_bytes / n > 0 ? ix->h.raw_bytes / n : 1;
    const uint64_t batch = ld->cfg.batch < n ? ld->cfg.batch : n;
    const uint64_t reserve = refill_max_buffer(ix) + 2 * batch * max_raw;
    const uint64_t one_chunk = (uint64_t)k * mean;
    const uint64_t minimum = reserve + one_chunk + (one_chunk + 6) / 7;
    if (ld->cfg.memory < minimum) {
        char have[32], need[32];
        fmt_bytes(have, sizeof(have), ld->cfg.memory);
        fmt_bytes(need, sizeof(need), minimum);
        return hd_err(
            HDMLP_E_RANGE,
            "memory budget %s (%llu bytes) is too small for this dataset: at least %s "
            "(%llu bytes) is needed for one abstract chunk of %u samples, a chunk read "
            "buffer and two batches of the largest sample",
            have, (unsigned long long)ld->cfg.memory, need, (unsigned long long)minimum, k);
    }
    const uint64_t avail = ld->cfg.memory - reserve;
    ld->slot_cap = avail - avail / 8;
    uint64_t a = ld->slot_cap / one_chunk;
    a = a < 1 ? 1 : a;
    a = a > ix->h.n_chunks ? ix->h.n_chunks : a;
    *abstract_chunks = a;
    return HDMLP_OK;
}

int hdmlp_loader_create(hdmlp_dataset *ds, const hdmlp_config *cfg, hdmlp_loader **out)
{
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "loader: out is NULL");
    }
    *out = NULL;
    if (ds == NULL || cfg == NULL) {
        return hd_err(HDMLP_E_INVAL, "loader: dataset and config are required");
    }
    if (cfg->world != 1) {
        return hd_err(HDMLP_E_UNSUPPORTED,
                      "loader: world size %u needs the cross-rank exchange, which this build "
                      "does not have yet; use world 1",
                      cfg->world);
    }
    hdmlp_loader *ld = hd_calloc(1, sizeof(*ld));
    if (ld == NULL) {
        return hd_err(HDMLP_E_NOMEM, "loader: out of memory");
    }
    ld->ds = ds;
    ld->ix = &ds->ix;
    ld->cfg = *cfg;
    ld->cost = (refill_cost){cfg->op_us, cfg->bytes_per_s};
    ld->refs = 1;
    pthread_mutex_init(&ld->lock, NULL);
    pthread_cond_init(&ld->work_cv, NULL);
    pthread_cond_init(&ld->ready_cv, NULL);

    uint64_t a = 0;
    int rc = size_memory(ld, &a);
    if (rc == HDMLP_OK) {
        const sched_params sp = {a, cfg->policy, cfg->seed, ld->slot_cap};
        rc = sched_create(ld->ix, &sp, &ld->sch);
    }
    const uint64_t n = ld->ix->h.n_samples;
    if (rc == HDMLP_OK) {
        ld->epoch_len = sampler_rank_count(n, cfg->rank, cfg->world);
        ld->perm = hd_malloc(n * sizeof(uint64_t));
        ld->scratch = hd_malloc(n * sizeof(uint64_t));
        ld->slot_buf = hd_calloc(a * ld->ix->h.chunk_size, sizeof(ld_sample *));
        ld->workers = hd_calloc(cfg->threads, sizeof(ld_worker));
        if (!ld->perm || !ld->scratch || !ld->slot_buf || !ld->workers) {
            rc = hd_err(HDMLP_E_NOMEM, "loader: out of memory for %llu samples",
                        (unsigned long long)n);
        }
    }
    ld->st.memory_budget = cfg->memory;
    ld->st.abstract_chunks = a;
    ld->st.chunk_groups = a;
    for (uint32_t i = 0; rc == HDMLP_OK && i < cfg->threads; i++) {
        rc = worker_start(ld, &ld->workers[i]);
        ld->n_workers = i + 1;
    }
    if (rc != HDMLP_OK) {
        hdmlp_loader_free(ld);
        return rc;
    }
    *out = ld;
    return HDMLP_OK;
}

void hdmlp_loader_free(hdmlp_loader *ld)
{
    if (ld == NULL) {
        return;
    }
    pthread_mutex_lock(&ld->lock);
    ld->shutdown = 1;
    pthread_cond_broadcast(&ld->work_cv);
    pthread_mutex_unlock(&ld->lock);
    for (uint32_t i = 0; i < ld->n_workers; i++) {
        if (ld->workers[i].started) {
            pthread_join(ld->workers[i].thread, NULL);
        }
    }
    pthread_mutex_lock(&ld->lock);
    loader_release_all(ld);
    loader_unref_unlock(ld);
}

uint64_t loader_slots_occupied(const hdmlp_loader *ld)
{
    hdmlp_loader *m = (hdmlp_loader *)ld;
    pthread_mutex_lock(&m->lock);
    const uint64_t v = sched_slots_occupied(m->sch);
    pthread_mutex_unlock(&m->lock);
    return v;
}

static int fail(hdmlp_loader *ld, int code, const char *detail)
{
    if (ld->failed == 0) {
        ld->failed = code;
        snprintf(ld->fail_detail, sizeof(ld->fail_detail), "%s", detail);
    }
    return hd_err(ld->failed, "%s", ld->fail_detail);
}

/* Waits (lock held) until the next planned item is ready and pops it into *out. */
static int take_item(hdmlp_loader *ld, ld_item *out, const struct timespec *deadline)
{
    for (;;) {
        if (ld->ring_count == 0) {
            const int rc = plan_advance(ld);
            if (rc != HDMLP_OK) {
                return fail(ld, rc, hdmlp_last_error());
            }
        }
        if (ld->ring_count > 0) {
            ld_item *it = &ld->ring[ld->ring_head];
            if (it->s->state != SAMPLE_PENDING) {
                *out = *it;
                ld->ring_head = (ld->ring_head + 1) % ld->ring_cap;
                ld->ring_count--;
                if (out->s->state < 0) {
                    const int code = out->s->state;
                    char detail[1024];
                    snprintf(detail, sizeof(detail), "%s", out->s->err ? out->s->err : "");
                    sample_free(out->s);
                    return fail(ld, code, detail);
                }
                return HDMLP_OK;
            }
        } else if (ld->plan_done) {
            return HDMLP_END;
        } else if (plan_stuck(ld)) {
            char detail[512];
            snprintf(detail, sizeof(detail),
                     "loader: memory budget exhausted (%llu of %llu bytes accounted) while "
                     "%llu batches are still held; release batches before asking for more",
                     (unsigned long long)ld->charged, (unsigned long long)ld->cfg.memory,
                     (unsigned long long)ld->outstanding_batches);
            return hd_err(HDMLP_E_NOMEM, "%s", detail);
        }
        if (ld->interrupt) {
            ld->interrupt = 0;
            return hd_err(HDMLP_E_INTERRUPTED, "loader: interrupted while waiting for data");
        }
        const uint64_t t0 = now_ns();
        int wrc = 0;
        if (deadline != NULL) {
            wrc = pthread_cond_timedwait(&ld->ready_cv, &ld->lock, deadline);
        } else {
            pthread_cond_wait(&ld->ready_cv, &ld->lock);
        }
        ld->st.stall_ns += now_ns() - t0;
        if (wrc == ETIMEDOUT) {
            return hd_err(HDMLP_E_TIMEOUT, "loader: no data within the timeout");
        }
        const int rc = plan_advance(ld);
        if (rc != HDMLP_OK) {
            return fail(ld, rc, hdmlp_last_error());
        }
    }
}

static void uncharge_samples(hdmlp_loader *ld, ld_sample **s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ld->charged -= s[i]->size;
    }
}

/* Frees an undelivered batch and its samples (lock held). */
static void batch_discard(hdmlp_loader *ld, hdmlp_batch *batch)
{
    if (batch == NULL) {
        return;
    }
    uncharge_samples(ld, batch->samples, batch->n);
    for (size_t i = 0; i < batch->n; i++) {
        sample_free(batch->samples[i]);
    }
    hd_free(batch);
}

int hdmlp_loader_next(hdmlp_loader *ld, hdmlp_batch **out)
{
    return hdmlp_loader_next_timeout(ld, out, 0);
}

int hdmlp_loader_next_timeout(hdmlp_loader *ld, hdmlp_batch **out, uint32_t timeout_ms)
{
    if (out == NULL || ld == NULL) {
        return hd_err(HDMLP_E_INVAL, "loader_next: loader and out are required");
    }
    *out = NULL;
    pthread_mutex_lock(&ld->lock);
    if (ld->failed) {
        const int code = hd_err(ld->failed, "%s", ld->fail_detail);
        pthread_mutex_unlock(&ld->lock);
        return code;
    }
    struct timespec deadline;
    if (timeout_ms != 0) {
        clock_gettime(CLOCK_REALTIME, &deadline);
        const uint64_t ns = (uint64_t)deadline.tv_nsec + (uint64_t)timeout_ms * 1000000ull;
        deadline.tv_sec += (time_t)(ns / 1000000000ull);
        deadline.tv_nsec = (long)(ns % 1000000000ull);
    }
    const uint64_t b = ld->cfg.batch;
    hdmlp_batch *batch = NULL;
    int rc = HDMLP_OK;
    for (;;) {
        if (ld->partial == NULL) {
            if ((ld->cfg.epochs != 0 && ld->deliver_epoch >= ld->cfg.epochs) ||
                ld->epoch_len == 0) {
                rc = HDMLP_END;
                break;
            }
            const uint64_t left = ld->epoch_len - ld->deliver_pos;
            const uint64_t n = left < b ? left : b;
            ld->partial = hd_calloc(
                1, sizeof(*batch) + n * (sizeof(hdmlp_sample_view) + sizeof(ld_sample *)));
            if (ld->partial == NULL) {
                rc = hd_err(HDMLP_E_NOMEM, "loader: out of memory for a batch");
                break;
            }
            ld->partial->views = (hdmlp_sample_view *)(ld->partial + 1);
            ld->partial->samples = (ld_sample **)(ld->partial->views + n);
            ld->partial->cap = n;
            ld->partial->epoch = ld->deliver_epoch;
        }
        batch = ld->partial;
        while (batch->n < batch->cap) {
            ld_item it;
            rc = take_item(ld, &it, timeout_ms != 0 ? &deadline : NULL);
            if (rc != HDMLP_OK) {
                break;
            }
            batch->samples[batch->n++] = it.s;
        }
        if ((rc == HDMLP_E_NOMEM || rc == HDMLP_E_INTERRUPTED || rc == HDMLP_E_TIMEOUT) &&
            !ld->failed) {
            batch = NULL; /* budget held by the caller's batches: resume on the next call */
            break;
        }
        ld->partial = NULL;
        if (rc != HDMLP_OK) {
            if (rc == HDMLP_END) {
                rc = fail(ld, HDMLP_E_STATE, "loader: planner ended inside an epoch");
            }
            batch_discard(ld, batch);
            batch = NULL;
            break;
        }
        const int drop = ld->cfg.drop_last && batch->cap < b;
        ld->deliver_pos += batch->n;
        if (ld->deliver_pos == ld->epoch_len) {
            ld->deliver_pos = 0;
            ld->deliver_epoch++;
            ld->st.epochs++;
        }
        if (!drop) {
            break;
        }
        batch_discard(ld, batch);
        batch = NULL;
        pthread_cond_broadcast(&ld->ready_cv);
    }
    if (batch != NULL) {
        for (size_t i = 0; i < batch->n; i++) {
            const ld_sample *s = batch->samples[i];
            batch->views[i] = (hdmlp_sample_view){s->data, s->size, s->index, s->label, 0};
            ld->st.bytes_delivered += s->size;
            ld->st.stored_bytes_delivered += s->stored;
        }
        ld->st.samples += batch->n;
        ld->st.batches++;
        ld->outstanding_batches++;
        ld->refs++;
        batch->ld = ld;
        /* Keep the lookahead going while the consumer works on this batch. */
        const int prc = plan_advance(ld);
        if (prc != HDMLP_OK) {
            fail(ld, prc, hdmlp_last_error());
        }
        *out = batch;
    }
    pthread_mutex_unlock(&ld->lock);
    return rc;
}

void hdmlp_loader_interrupt(hdmlp_loader *ld)
{
    if (ld == NULL) {
        return;
    }
    pthread_mutex_lock(&ld->lock);
    ld->interrupt = 1;
    pthread_cond_broadcast(&ld->ready_cv);
    pthread_mutex_unlock(&ld->lock);
}

void hdmlp_batch_release(hdmlp_batch *batch)
{
    if (batch == NULL) {
        return;
    }
    hdmlp_loader *ld = batch->ld;
    pthread_mutex_lock(&ld->lock);
    uncharge_samples(ld, batch->samples, batch->n);
    ld->outstanding_batches--;
    pthread_cond_broadcast(&ld->ready_cv);
    loader_unref_unlock(ld);
    for (size_t i = 0; i < batch->n; i++) {
        sample_free(batch->samples[i]);
    }
    hd_free(batch);
}

size_t hdmlp_batch_size(const hdmlp_batch *batch) { return batch ? batch->n : 0; }

uint64_t hdmlp_batch_epoch(const hdmlp_batch *batch) { return batch ? batch->epoch : 0; }

const hdmlp_sample_view *hdmlp_batch_samples(const hdmlp_batch *batch)
{
    return batch ? batch->views : NULL;
}

int hdmlp_loader_stats(hdmlp_loader *ld, hdmlp_stats *out)
{
    if (ld == NULL || out == NULL) {
        return hd_err(HDMLP_E_INVAL, "loader_stats: loader and out are required");
    }
    pthread_mutex_lock(&ld->lock);
    *out = ld->st;
    pthread_mutex_unlock(&ld->lock);
    return HDMLP_OK;
}
