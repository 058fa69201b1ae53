/*
 * Planning: runs the scheduler ahead of the consumer in sequence order (clairvoyant
 * lookahead) and turns its decisions into delivery items, refill jobs and peers' outbox
 * entries, admitting each only while the memory budget holds. Called with the loader lock held.
 */
#include "loader_plan.h"
#include "loader_balance_apply.h"
#include "loader_core.h"
#include "loader_sampler.h"

#include <string.h>

int sample_data_new(struct hdmlp_loader *ld, ld_sample *s)
{
    peer_mem *pm = ld->mem;
    s->data = pm != NULL ? pm->alloc(pm, s->size) : NULL;
    s->home = s->data != NULL ? pm : NULL;
    s->lender = PEER_MEM_OWN;
    s->pool = NULL;
    if (s->data == NULL) {
        if (ld->pool == NULL) {
            ld->pool = sample_pool_create();
        }
        s->data = ld->pool != NULL ? sample_pool_alloc(ld->pool, s->size) : NULL;
        s->pool = s->data != NULL ? ld->pool : NULL;
    }
    return s->data != NULL ? HDMLP_OK : HDMLP_E_NOMEM;
}

void sample_data_free(ld_sample *s)
{
    if (s->home != NULL) {
        s->home->give_back(s->home, s->data, s->size, s->lender);
    } else if (s->pool != NULL) {
        sample_pool_free(s->pool, s->data);
    } else {
        hd_free(s->data);
    }
    s->data = NULL;
    s->home = NULL;
    s->pool = NULL;
}

void sample_free(ld_sample *s)
{
    if (s != NULL) {
        sample_data_free(s);
        hd_free(s->err);
        hd_free(s);
    }
}

void job_free(ld_job *job)
{
    if (job == NULL) {
        return;
    }
    refill_plan_free(&job->plan);
    hd_free(job->samples);
    hd_free(job->slots);
    hd_free(job->rec);
    hd_free(job->vals);
    hd_free(job);
}

int plan_outbox_push(struct hdmlp_loader *ld, uint32_t peer, const ld_out *o)
{
    ld_outbox *b = &ld->out[peer];
    if (b->count == b->cap) {
        const uint64_t cap = b->cap ? b->cap * 2 : 256;
        ld_out *q = hd_malloc(cap * sizeof(*q));
        if (q == NULL) {
            return hd_err(HDMLP_E_NOMEM, "loader: out of memory for rank %u's outbox", peer);
        }
        for (uint64_t i = 0; i < b->count; i++) {
            q[i] = b->q[(b->head + i) % b->cap];
        }
        hd_free(b->q);
        b->q = q;
        b->cap = cap;
        b->head = 0;
    }
    b->q[(b->head + b->count) % b->cap] = *o;
    b->count++;
    return HDMLP_OK;
}

/* A sample to read: index, of `size` raw bytes (its stored size and label come with its
 * record, plan_records). */
static ld_sample *sample_new(struct hdmlp_loader *ld, uint64_t index, uint64_t size)
{
    ld_sample *s = hd_calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->index = index;
    s->size = size;
    s->state = SAMPLE_PENDING;
    /* The sample's buffer is allocated here, on the planning thread, when it is charged to
     * the budget: I/O threads only fill it. Allocating on the I/O threads would spread
     * samples over one malloc arena per thread, whose freed memory is not shared, and RSS
     * would grow with the thread count while the accounted bytes stay within the budget. */
    if (sample_data_new(ld, s) != HDMLP_OK) {
        hd_free(s);
        return NULL;
    }
    return s;
}

static int ring_push(struct hdmlp_loader *ld, const ld_item *item)
{
    if (ld->ring_count == ld->ring_cap) {
        const uint64_t cap = ld->ring_cap ? ld->ring_cap * 2 : 256;
        ld_item *r = hd_malloc(cap * sizeof(*r));
        if (r == NULL) {
            return hd_err(HDMLP_E_NOMEM, "loader: out of memory for the delivery queue");
        }
        for (uint64_t i = 0; i < ld->ring_count; i++) {
            r[i] = ld->ring[(ld->ring_head + i) % ld->ring_cap];
        }
        hd_free(ld->ring);
        ld->ring = r;
        ld->ring_cap = cap;
        ld->ring_head = 0;
    }
    ld->ring[(ld->ring_head + ld->ring_count) % ld->ring_cap] = *item;
    ld->ring_count++;
    return HDMLP_OK;
}

/* Auto refill with a learnt model: the cheapest of three shapes under the model's cautious
 * prices — whole (preferred within 1 %: it also verifies the chunk header), ranges merged
 * where the gap costs less than a request, and the span (every gap read, in as few requests
 * as the device takes) — or, with `explore` (cost_explore), the next cheapest when the model
 * cannot tell them apart and the exploration budget allows. Reads of one shape only (single
 * samples, say) cannot tell an operation's cost from a byte's; the span is the cheap other
 * shape that teaches it. Sets *span; returns the mode to build with. */
static hdmlp_refill plan_shape_choice(struct hdmlp_loader *ld, const ld_job *job, int explore,
                                      int *explored, int *span)
{
    refill_shape sh[3];
    const refill_cost sc = refill_span_cost(&ld->cost);
    const refill_reads rd = {.rec = job->rec, .n = job->n};
    const uint64_t chunk = job->chunk;
    refill_plan_shape(ld->ix, chunk, &rd, HDMLP_REFILL_WHOLE, &ld->cost, ld->cfg.direct,
                      &sh[0]);
    refill_plan_shape(ld->ix, chunk, &rd, HDMLP_REFILL_RANGES, &ld->cost, ld->cfg.direct,
                      &sh[1]);
    refill_plan_shape(ld->ix, chunk, &rd, HDMLP_REFILL_RANGES, &sc, ld->cfg.direct, &sh[2]);
    /* The shapes are compared at the model's estimates: the doubt that keeps merging from
     * buying bytes (refill_cost) would price every request at nothing while the op cost is
     * still uncertain, and so choose many small reads where requests are what is scarce. */
    refill_cost point = ld->cost;
    point.op_us_doubt = 0.0;
    point.mb_us_doubt = 0.0;
    double c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = refill_shape_cost(&point, &sh[i]);
    }
    c[0] /= 1.01;
    int best = 0;
    for (int i = 1; i < 3; i++) {
        best = c[i] < c[best] ? i : best;
    }
    int other = best == 0 ? 1 : 0;
    for (int i = 0; i < 3; i++) {
        other = i != best && c[i] < c[other] ? i : other;
    }
    *explored = 0;
    if (explore &&
        cost_explore(&ld->explorer, &ld->src_model, sh[best].requests, (double)sh[best].buf_len,
                     sh[other].requests, (double)sh[other].buf_len)) {
        ld->st.cost_explorations++;
        *explored = 1;
        best = other;
    }
    *span = best == 2;
    return best == 0 ? HDMLP_REFILL_WHOLE : HDMLP_REFILL_RANGES;
}

/* The jobs plan_job let the learnt model shape (the others read whole or as configured). */
static int plan_learnt(const struct hdmlp_loader *ld, const ld_job *job)
{
    return ld->learn && ld->cfg.refill == HDMLP_REFILL_AUTO &&
           ld->cfg.order == HDMLP_ORDER_STRICT && !job->first_load && job->n > 0;
}

/* Builds job->plan in `mode` (as a span when job->span). */
static int plan_build(struct hdmlp_loader *ld, ld_job *job, hdmlp_refill mode, refill_plan *out)
{
    const refill_cost sc = refill_span_cost(&ld->cost);
    const refill_reads rd = {.rec = job->rec, .n = job->n};
    return refill_plan_build(ld->ix, job->chunk, &rd, mode, job->span ? &sc : &ld->cost,
                             ld->cfg.direct, out);
}

void plan_refresh(struct hdmlp_loader *ld, ld_job *job)
{
    if (!job->prepared || !plan_learnt(ld, job) ||
        job->planned_at == ld->src_model.observations) {
        return;
    }
    /* An exploration keeps its shape (it was paid for); otherwise the model picks again. */
    hdmlp_refill mode = job->plan.whole ? HDMLP_REFILL_WHOLE : HDMLP_REFILL_RANGES;
    if (!job->explored) {
        int explored;
        mode = plan_shape_choice(ld, job, 0, &explored, &job->span);
    }
    refill_plan plan;
    if (plan_build(ld, job, mode, &plan) != HDMLP_OK) {
        return; /* out of memory: the plan it has still reads the right samples */
    }
    refill_plan_free(&job->plan);
    job->plan = plan;
    job->planned_at = ld->src_model.observations;
    ld->st.cost_replans++;
}

void loader_learn(struct hdmlp_loader *ld, int tier_kind, uint32_t ops, uint64_t bytes,
                  double service_us)
{
    if (!ld->learn) {
        return;
    }
    if (tier_kind == TIER_SSD) {
        cost_model_add_read(&ld->ssd_model, ops, (double)bytes, service_us);
        refill_cost c;
        cost_model_get(&ld->ssd_model, &c);
        ld->st.ssd_op_ns = (uint64_t)(c.op_us * 1000.0);
        ld->st.ssd_bytes_per_s = (uint64_t)c.bytes_per_s;
        return;
    }
    const uint64_t seen = ld->src_model.observations;
    cost_model_add_read(&ld->src_model, ops, (double)bytes, service_us);
    ld->st.cost_reads = ld->src_model.reads;
    if (ld->src_model.observations == seen) {
        return; /* the read went into the bin: the estimate has not moved */
    }
    cost_model_get(&ld->src_model, &ld->cost);
    ld->cost.op_us_doubt = 2.0 * cost_model_diff_stderr(&ld->src_model, 1.0, 0.0, 0.0, 0.0);
    ld->cost.mb_us_doubt = 2.0 * cost_model_diff_stderr(&ld->src_model, 0.0, 1e6, 0.0, 0.0);
    cost_history_note(&ld->src_hist, &ld->src_model);
    ld->st.source_op_ns = (uint64_t)(ld->cost.op_us * 1000.0);
    ld->st.source_bytes_per_s = (uint64_t)ld->cost.bytes_per_s;
    ld->st.cost_changes = ld->src_model.changes;
}

/* Sets each sample's stored size and label from job->rec; a record whose raw size is not
 * the one planned fails. */
static int check_records(ld_job *job)
{
    for (uint32_t i = 0; i < job->n; i++) {
        fmt_sample rec;
        fmt_sample_record(job->rec + (size_t)i * FMT_SAMPLE_REC_LEN, &rec);
        ld_sample *s = job->samples[i];
        if (rec.raw_len != s->size) {
            return hd_err(HDMLP_E_CORRUPT,
                          "sample table of chunk %llu: sample %llu has %llu raw bytes, %llu "
                          "when it was planned (the table changed since)",
                          (unsigned long long)job->chunk, (unsigned long long)s->index,
                          (unsigned long long)rec.raw_len, (unsigned long long)s->size);
        }
        s->stored = rec.stored_len;
        s->label = rec.label;
    }
    return HDMLP_OK;
}

/* Copies the records of job->slots of chunk's table into job->rec (check_records): from a
 * view's records or offsets, or summed from a sizes view's block offsets. */
static int copy_records(const struct hdmlp_loader *ld, ld_job *job, const fmt_table *table)
{
    const size_t sample_vals = (size_t)ld->ix->h.n_fields * FMT_VALUE_REC_LEN;
    for (uint32_t i = 0; job->vals != NULL && i < job->n; i++) {
        memcpy(job->vals + i * sample_vals, table->val + (size_t)job->slots[i] * table->stride,
               sample_vals);
    }
    if (table->rec == NULL && table->off == NULL) {
        const int rc = fmt_table2_records(ld->ix, job->chunk, table->val, table->blk,
                                          job->slots, job->n, job->rec);
        if (rc != HDMLP_OK) {
            return hd_err_wrap(rc, "%s/%s: ", ld->ds->path, FMT_TABLES_NAME);
        }
        return check_records(job);
    }
    for (uint32_t i = 0; i < job->n; i++) {
        uint8_t *const dst = job->rec + (size_t)i * FMT_SAMPLE_REC_LEN;
        memmove(dst, fmt_table_record(table, job->slots[i], dst), FMT_SAMPLE_REC_LEN);
    }
    return check_records(job);
}

int plan_records(struct hdmlp_loader *ld, ld_job *job, void *buf, size_t cap)
{
    fmt_table t;
    const int rc = fmt_tables_get(&ld->job_tables, job->chunk, buf, cap, &t);
    return rc != HDMLP_OK ? rc : copy_records(ld, job, &t);
}

int plan_prepared(struct hdmlp_loader *ld, ld_job *job)
{
    hdmlp_refill mode = job->mode;
    if (plan_learnt(ld, job)) {
        mode = plan_shape_choice(ld, job, 1, &job->explored, &job->span);
        job->planned_at = ld->src_model.observations;
    }
    const int rc = plan_build(ld, job, mode, &job->plan);
    if (rc != HDMLP_OK) {
        return rc;
    }
    job->prepared = 1;
    return HDMLP_OK;
}

void plan_count_reads(struct hdmlp_loader *ld, const ld_job *job)
{
    if (!job->prepared) {
        return;
    }
    ld->st.read_ops += job->plan.n_ranges;
    ld->st.bytes_read += job->plan.buf_len;
    if (job->miss && job->plan.whole) {
        ld->st.whole_refills++;
    } else if (job->miss) {
        ld->st.ranged_refills++;
    }
}

/* Chunk's table as planning's source gives it (its buffer in *buf, hd_free). */
static int planning_table(struct hdmlp_loader *ld, uint64_t chunk, void **buf, fmt_table *out)
{
    const fmt_tables *ts = &ld->tables;
    *buf = ts->scratch != 0 ? hd_malloc(ts->scratch) : NULL;
    if (*buf == NULL && ts->scratch != 0) {
        return hd_err(HDMLP_E_NOMEM, "loader: out of memory for a sample table");
    }
    return fmt_tables_get(ts, chunk, *buf, ts->scratch, out);
}

int plan_job(struct hdmlp_loader *ld, uint64_t chunk, const fmt_table *table,
             const uint32_t *slots, uint32_t n, ld_job **out)
{
    const uint32_t k = ld->ix->h.chunk_size;
    *out = NULL;
    void *buf = NULL;
    fmt_table own;
    int rc = table == NULL ? planning_table(ld, chunk, &buf, &own) : HDMLP_OK;
    table = table == NULL ? &own : table;
    ld_job *job = rc == HDMLP_OK ? hd_calloc(1, sizeof(*job)) : NULL;
    if (job != NULL) {
        job->chunk = chunk;
        job->samples = hd_calloc(n ? n : 1, sizeof(ld_sample *));
        job->slots = hd_malloc((n ? n : 1) * sizeof(uint32_t));
        job->rec = hd_malloc((n ? n : 1) * (size_t)FMT_SAMPLE_REC_LEN);
        if (ld->ix->fielded) {
            job->vals = hd_malloc((n ? n : 1) * (size_t)ld->ix->h.n_fields * FMT_VALUE_REC_LEN);
        }
    }
    if (rc == HDMLP_OK && (job == NULL || job->samples == NULL || job->slots == NULL ||
                           job->rec == NULL || (ld->ix->fielded && job->vals == NULL))) {
        rc = hd_err(HDMLP_E_NOMEM, "loader: out of memory for a refill");
    }
    for (uint32_t i = 0; rc == HDMLP_OK && i < n; i++) {
        job->slots[i] = slots[i];
        job->samples[i] =
            sample_new(ld, chunk * k + slots[i], fmt_table_raw_len(table, slots[i]));
        job->n = job->samples[i] != NULL ? i + 1 : i;
        if (job->samples[i] == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "loader: out of memory for a refill");
        }
    }
    if (rc == HDMLP_OK) {
        /* The first load of a RAM- or SSD-placed chunk reads it whole, to fill its cache. */
        job->first_load = ld->tier != NULL && tier_first_plan(ld->tier, chunk);
        job->mode = job->first_load ? HDMLP_REFILL_WHOLE
                                    : sched_load_mode(ld->sch, chunk, n, ld->cfg.refill);
        job->epoch = ld->plan_epoch;
        /* A view with records, offsets or block offsets prepares the job here; a sizes view
         * alone leaves its records and read plan to the I/O thread that takes it. */
        if (table->rec != NULL || table->off != NULL || table->blk != NULL) {
            rc = copy_records(ld, job, table);
            rc = rc == HDMLP_OK ? plan_prepared(ld, job) : rc;
        }
    }
    hd_free(buf);
    if (rc != HDMLP_OK) {
        for (uint32_t i = 0; job != NULL && i < job->n; i++) {
            sample_free(job->samples[i]);
        }
        job_free(job);
        return rc;
    }
    *out = job;
    return HDMLP_OK;
}

/* Bytes a refill adds to the budget: its samples (read buffers are reserved per worker). */
uint64_t job_bytes(const ld_job *job)
{
    uint64_t b = 0;
    for (uint32_t i = 0; i < job->n; i++) {
        b += loader_sample_charge(job->samples[i]->size);
    }
    return b;
}

static void charge(struct hdmlp_loader *ld, uint64_t bytes)
{
    ld->charged += bytes;
    loader_note_peak(ld);
}

void plan_enqueue(struct hdmlp_loader *ld, ld_job *job)
{
    job->next = NULL;
    if (ld->q_tail != NULL) {
        ld->q_tail->next = job;
    } else {
        ld->q_head = job;
    }
    ld->q_tail = job;
    ld->inflight++;
    pthread_cond_signal(&ld->work_cv);
}

uint32_t plan_owner(const struct hdmlp_loader *ld, uint64_t group)
{
    return (uint32_t)(group % ld->world);
}

uint64_t plan_sample_at(struct hdmlp_loader *ld, uint64_t pos)
{
    if (ld->order_at == UINT64_MAX || pos < ld->order_at || pos - ld->order_at >= SAMPLER_RUN) {
        const uint64_t n = ld->order.n;
        sampler_run(&ld->order, pos, (uint32_t)(n - pos < SAMPLER_RUN ? n - pos : SAMPLER_RUN),
                    ld->order_run);
        ld->order_at = pos;
    }
    return ld->order_run[pos - ld->order_at];
}

/* Moves the frontier to a valid position, starting epochs as needed. Returns 1 if there is
 * a position to plan, 0 when every epoch is planned, or an error. */
static int frontier(struct hdmlp_loader *ld)
{
    const uint64_t n = ld->ix->h.n_samples;
    while (!ld->plan_started || ld->plan_pos == n) {
        if (ld->plan_started) {
            ld->plan_epoch++;
        }
        if ((ld->cfg.epochs != 0 && ld->plan_epoch >= ld->cfg.epochs) || ld->epoch_len == 0) {
            ld->plan_done = 1;
            return 0;
        }
        const int rc = sched_begin_epoch(ld->sch, ld->plan_epoch);
        if (rc != HDMLP_OK) {
            return rc;
        }
        sampler_init(&ld->order, ld->cfg.seed, ld->plan_epoch, n);
        ld->order_at = UINT64_MAX;
        ld->plan_pos = 0;
        ld->plan_started = 1;
    }
    return 1;
}

/* Whether the frontier should move on: the local lookahead wants more, or a peer waits for
 * a position not decided yet. The lookahead is at most one epoch of this rank's positions
 * (at least one, so a rank without samples still reaches the end): the budget is a ceiling,
 * and samples planned further ahead would only hold memory (with a budget above the
 * dataset, epoch after epoch of it) while the I/O has long caught up. */
static int want_more(const struct hdmlp_loader *ld)
{
    uint64_t ahead = ld->epoch_len > 0 ? ld->epoch_len : 1;
    if (ld->cfg.lookahead != 0 && ld->cfg.lookahead < ahead) {
        ahead = ld->cfg.lookahead;
    }
    if (ld->ring_count < ahead) {
        return 1;
    }
    for (uint32_t q = 0; q < ld->world; q++) {
        const ld_outbox *o = &ld->out[q];
        if (q != ld->rank && o->want &&
            (o->want_epoch > ld->plan_epoch ||
             (o->want_epoch == ld->plan_epoch && o->want_position >= ld->plan_pos))) {
            return 1;
        }
    }
    return 0;
}

/* Admits the pending step if the budget allows. Returns 1 if admitted, 0 if not. */
static int admit_pending(struct hdmlp_loader *ld)
{
    const sched_step *st = &ld->pending_step;
    const uint32_t k = ld->ix->h.chunk_size;
    const uint32_t dest = (uint32_t)(ld->plan_pos % ld->world);
    ld_job *job = ld->pending;
    uint64_t need = 0;
    if (!st->hit) {
        need = job_bytes(job);
        /* Peers' prefetches held for later positions have their own part of the budget
         * (the planning limit leaves the remote cap out): counting them here too would let
         * them take planning's room, and when the slots are full, as the pool and
         * clairvoyant keep them, the position the consumer waits for could never be
         * planned. */
        if (ld->charged - ld->remote_charged + need > budget_plan_limit(&ld->budget)) {
            return 0;
        }
    }
    /* The delivered sample comes from its slot, or is one of those read (which go to their
     * slots below, once the decision is recorded). */
    ld_sample *delivered = ld->slot_buf[st->slot];
    for (uint32_t i = 0; !st->hit && i < job->n; i++) {
        if (st->load_place[i] == st->slot) {
            delivered = job->samples[i];
        }
    }
    const uint64_t group = st->slot / k;
    const uint32_t slot = (uint32_t)(st->slot % k);
    int rc;
    if (dest == ld->rank) {
        const ld_item it = {delivered, ld->plan_epoch, ld->plan_pos, group, slot, ld->rank, 0,
                            0};
        rc = ring_push(ld, &it);
    } else {
        const ld_out o = {delivered, ld->plan_epoch, ld->plan_pos, group, slot, 0};
        rc = plan_outbox_push(ld, dest, &o);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    ld->st.requests++;
    for (uint32_t i = 0; !st->hit && i < job->n; i++) {
        ld->slot_buf[st->load_place[i]] = job->samples[i];
    }
    ld->slot_buf[st->slot] = NULL;
    if (st->hit) {
        ld->st.hits++;
    } else {
        charge(ld, need);
        ld->st.misses++;
        ld->st.chunk_loads++;
        ld->st.samples_filled += job->n;
        job->miss = 1;
        plan_count_reads(ld, job);
        const uint64_t bucket = (uint64_t)job->n * 10 / k;
        ld->st.fill_hist[bucket > 10 ? 10 : bucket]++;
        plan_enqueue(ld, job);
        ld->pending = NULL;
    }
    ld->have_pending = 0;
    ld->plan_pos++;
    return 1;
}

int plan_advance(struct hdmlp_loader *ld)
{
    const uint32_t k = ld->ix->h.chunk_size;
    node_balance_tick(ld);
    for (;;) {
        if (!want_more(ld)) {
            return HDMLP_OK;
        }
        int rc;
        if (ld->have_pending) {
            rc = admit_pending(ld);
            if (rc <= 0) {
                return rc;
            }
            continue;
        }
        rc = frontier(ld);
        if (rc <= 0) {
            return rc;
        }
        const uint64_t x = plan_sample_at(ld, ld->plan_pos);
        const uint64_t group = sched_group_of_chunk(ld->sch, x / k);
        const uint32_t owner = plan_owner(ld, group);
        const uint32_t requester = (uint32_t)(ld->plan_pos % ld->world);
        if (owner != ld->rank) {
            if (requester == ld->rank) {
                const ld_item it = {
                    NULL, ld->plan_epoch, ld->plan_pos, group, (uint32_t)(x % k), owner, 0, 0};
                rc = ring_push(ld, &it);
                if (rc != HDMLP_OK) {
                    return rc;
                }
            }
            ld->plan_pos++;
            continue;
        }
        rc = sched_request(ld->sch, x, &ld->pending_step);
        if (rc != HDMLP_OK) {
            return rc;
        }
        if (!ld->pending_step.hit) {
            rc = plan_job(ld, ld->pending_step.chunk, ld->pending_step.table,
                          ld->pending_step.load_slot, ld->pending_step.n_load, &ld->pending);
            if (rc != HDMLP_OK) {
                return rc;
            }
        }
        ld->have_pending = 1;
    }
}

int plan_stuck(const struct hdmlp_loader *ld)
{
    if (ld->ring_count != 0 || !ld->have_pending || ld->inflight != 0) {
        return 0;
    }
    for (uint32_t q = 0; q < ld->world; q++) {
        if (q != ld->rank && ld->out[q].count != 0 && !ld->out[q].done) {
            return 0; /* the peer will take these and free memory */
        }
    }
    return 1; /* what a finished peer's outbox holds is never taken (exchange_departed) */
}
