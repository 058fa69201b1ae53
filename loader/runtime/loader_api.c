/*
 * Loader lifetime: sizing abstract memory from the budget, creation, teardown, stats.
 *
 * Memory sizing is in loader_sizing.c.
 */
#include "loader_balance_apply.h"
#include "loader_core.h"
#include "loader_exchange.h"
#include "loader_forecast.h"
#include "loader_image_pipe.h"
#include "loader_iomode.h"
#include "loader_next.h"
#include "loader_plan.h"
#include "loader_probe.h"
#include "loader_resume.h"
#include "loader_sampler.h"
#include "loader_teardown.h"
#include "loader_tier_stage.h"
#include "loader_worker.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define REMOTE_BUCKETS 4096

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
    exchange_free(ld);
    hd_free(ld->slot_buf);
    hd_free(ld->ring);
    hd_free(ld->epoch_len_of);
    hd_free(ld->epoch_source);
    tier_free(ld->tier);
    ld->tier = NULL;
    hd_map_free(ld->stage_buf, ld->stage_cap);
    ld->stage_buf = NULL;
    ld->epoch_source = NULL;
    sched_free(ld->sch);
    for (uint32_t i = 0; i < ld->n_workers; i++) {
        worker_free(&ld->workers[i]);
    }
    hd_free(ld->workers);
    ld->slot_buf = NULL;
    ld->ring = NULL;
    ld->epoch_len_of = NULL;
    ld->sch = NULL;
    ld->workers = NULL;
}

static int check_distributed(const struct hdmlp_config *cfg, peer_transport_factory factory)
{
    if (cfg->world == 1) {
        return HDMLP_OK;
    }
    if (factory == NULL) {
        return hd_err(HDMLP_E_UNSUPPORTED,
                      "loader: world size %u needs a peer transport, and none is available",
                      cfg->world);
    }
    if (cfg->peers == NULL || cfg->n_peers != cfg->world) {
        return hd_err(
            HDMLP_E_INVAL,
            "loader: world size %u needs %u peer endpoints (hdmlp_config_set_peers or "
            "hdmlp_config_bootstrap_mpi), got %u",
            cfg->world, cfg->world, cfg->n_peers);
    }
    return HDMLP_OK;
}

static int loader_alloc(hdmlp_loader *ld, uint64_t a)
{
    const uint64_t n = ld->ix->h.n_samples;
    const uint32_t world = ld->world;
    ld->epoch_len = sampler_rank_count(n, ld->rank, world);
    ld->order_at = UINT64_MAX; /* no run of the order computed yet */
    ld->slot_buf = hd_calloc(a * ld->ix->h.chunk_size, sizeof(ld_sample *));
    ld->workers = hd_calloc(ld->cfg.threads, sizeof(ld_worker));
    ld->out = hd_calloc(world, sizeof(ld_outbox));
    ld->epoch_len_of = hd_calloc(world, sizeof(uint64_t));
    ld->remote_buckets = REMOTE_BUCKETS;
    ld->remote = hd_calloc(ld->remote_buckets, sizeof(ld_remote *));
    if (!ld->slot_buf || !ld->workers || !ld->out || !ld->epoch_len_of || !ld->remote) {
        return hd_err(HDMLP_E_NOMEM, "loader: out of memory for %llu samples",
                      (unsigned long long)n);
    }
    for (uint32_t q = 0; q < world; q++) {
        ld->epoch_len_of[q] = sampler_rank_count(n, q, world);
    }
    return HDMLP_OK;
}

int loader_create_with(hdmlp_dataset *ds, const hdmlp_config *cfg,
                       peer_transport_factory factory, hdmlp_loader **out)
{
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "loader: out is NULL");
    }
    *out = NULL;
    if (ds == NULL || cfg == NULL) {
        return hd_err(HDMLP_E_INVAL, "loader: dataset and config are required");
    }
    int rc = check_distributed(cfg, factory);
    if (rc == HDMLP_OK && cfg->epochs != 0 && cfg->start_epoch >= cfg->epochs) {
        rc = hd_err(HDMLP_E_INVAL, "loader: start epoch %llu is not below the %llu epochs",
                    (unsigned long long)cfg->start_epoch, (unsigned long long)cfg->epochs);
    }
    if (rc == HDMLP_OK && cfg->image != NULL) {
        uint32_t field;
        rc = image_field_of(ds, cfg->image, &field); /* named before anything starts */
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    int direct = 0;
    uint64_t cache_room = 0;
    rc = iomode_resolve(ds, cfg, &direct, &cache_room);
    if (rc != HDMLP_OK) {
        return rc;
    }
    /* Storage calibration: measured figures replace the defaults (not an explicit cost). */
    probe_limits lim;
    probe_limits_default(&lim);
    lim.seed = cfg->seed;
    probe_result cal;
    int calibrated = 0;
    if (cfg->calibrate && !cfg->cost_set) {
        const int prc = probe_dataset(ds, direct, &lim, &cal);
        if (prc == HDMLP_OK) {
            calibrated = 1;
        } else if (prc != HDMLP_E_RANGE) { /* E_RANGE: too small to measure, keep defaults */
            return prc;
        }
    }
    hdmlp_loader *ld = hd_calloc(1, sizeof(*ld));
    if (ld == NULL) {
        return hd_err(HDMLP_E_NOMEM, "loader: out of memory");
    }
    rc = config_copy(&ld->cfg, cfg);
    if (rc != HDMLP_OK) {
        hd_free(ld);
        return rc;
    }
    ld->ds = ds;
    ld->ix = &ds->ix;
    ld->cfg.policy = loader_policy(ld->ix, cfg);
    ld->rank = cfg->rank;
    ld->world = cfg->world;
    if (calibrated) {
        ld->cfg.op_us = cal.op_us;
        ld->cfg.bytes_per_s = cal.bytes_per_s;
    }
    ld->cfg.direct = direct;
    ld->cfg.max_request = iomode_max_request(ds);
    ld->cost = (refill_cost){ld->cfg.op_us, ld->cfg.bytes_per_s, ld->cfg.max_request, 0.0, 0.0};
    ld->learn = cfg->learn && !cfg->cost_set;
    cost_model_init(&ld->src_model, &ld->cost);
    cost_model_init(&ld->ssd_model, &(refill_cost){100.0, 1e9, 0, 0.0, 0.0});
    cost_history_init(&ld->src_hist, &ld->cost);
    ld->refs = 1;
    ld->plan_epoch = cfg->start_epoch;
    ld->deliver_epoch = cfg->start_epoch;
    pthread_mutex_init(&ld->lock, NULL);
    cost_clock_init(&ld->src_clock);
    cost_clock_init(&ld->ssd_clock);
    pthread_cond_init(&ld->work_cv, NULL);
    pthread_cond_init(&ld->ready_cv, NULL);

    uint64_t a = 0;
    loader_sizing sz;
    rc = loader_size(ld->ix, &ds->tables, &ld->cfg, &sz);
    if (rc == HDMLP_OK) {
        ld->cfg.memory = sz.memory; /* raised to the least that works (memory_raise) */
        rc = iomode_check_budget(sz.memory);
    }
    if (rc == HDMLP_OK) {
        rc = budget_init(&ld->budget, &sz, cfg->threads);
    }
    if (rc == HDMLP_OK) {
        a = sz.abstract_chunks;
        /* The reserved workers' read buffers (the budget's I/O pool), held for the loader's
         * life (the others are charged per job). */
        ld->charged = budget_share_bytes(&ld->budget, BUDGET_IO_POOL);
        ld->io_pooled = ds->store != NULL;
        ld->st.peak_memory_bytes = ld->charged;
        /* Sample tables: held in memory when sizing held them (their share), else read
         * from the dataset a chunk at a time. Planning reads a miss's candidates' sizes and,
         * where sizing kept the tables' block offsets, its samples' records from their
         * blocks (ds_tables_plan); without them it leaves the records to the I/O thread
         * that serves the job (job_tables). The clairvoyant policy weighs offsets too: its
         * scheduler views whole tables, mapped one at a time where it can be. */
        fmt_tables held = ds->tables;
        if (sz.tables_held) {
            rc = ds_tables_hold(ds, &held);
        }
        if (rc == HDMLP_OK) {
            rc = ds_tables_plan(ds, sz.tables_held, sz.table_blocks != 0, &ld->tables,
                                &ld->job_tables);
        }
        if (rc == HDMLP_OK && ld->cfg.order == HDMLP_ORDER_STRICT &&
            ld->cfg.policy == HDMLP_POLICY_CLAIRVOYANT) {
            ld->tables = sz.tables_held ? held : ds_tables_mapped(ds);
        }
    }
    if (rc == HDMLP_OK) {
        const sched_params sp = {.abstract_chunks = a,
                                 .policy = ld->cfg.policy,
                                 .seed = cfg->seed,
                                 .slot_cap_bytes = sz.slot_cap,
                                 .order = cfg->order,
                                 .pool_unit = sz.pool_unit,
                                 .window_bytes = loader_read_window(&ld->cfg),
                                 .rank = cfg->rank,
                                 .world = cfg->world,
                                 .tables = ld->tables,
                                 .table_entries = sz.table_entries};
        rc = sched_create(ld->ix, &sp, &ld->sch);
    }
    if (rc == HDMLP_OK) {
        rc = loader_alloc(ld, a);
    }
    ld->st.memory_budget = ld->cfg.memory;
    ld->st.memory_configured = cfg->memory;
    ld->st.source_op_ns = (uint64_t)(ld->cfg.op_us * 1000.0);
    ld->st.source_bytes_per_s = (uint64_t)ld->cfg.bytes_per_s;
    ld->st.calibrated = (uint64_t)calibrated;
    ld->st.source_op_ns_start = ld->st.source_op_ns;
    ld->st.source_bytes_per_s_start = ld->st.source_bytes_per_s;
    ld->st.cost_learning = (uint64_t)ld->learn;
    ld->st.direct_io = (uint64_t)direct;
    ld->st.page_cache_room = cache_room;
    if (rc == HDMLP_OK) {
        ld->st.budget_read_buffers = sz.read_buffers;
        ld->st.budget_batches = sz.batches;
        ld->st.budget_remote = sz.remote_cap;
        ld->st.budget_ram_cache = sz.ram_cache;
        ld->st.budget_lookahead = sz.lookahead;
        ld->st.budget_slots = sz.slot_cap + sz.slot_tables;
        ld->st.budget_images = sz.images;
        ld->st.budget_sample_tables = sz.sample_tables;
    }
    ld->st.abstract_chunks = a;
    ld->st.chunk_groups = a;
    ld->st.order = (uint64_t)cfg->order;
    ld->st.pool_unit = rc == HDMLP_OK ? sz.pool_unit : 0;
    ld->st.policy = (uint64_t)ld->cfg.policy;
    if (rc == HDMLP_OK && (sz.ram_cache > 0 || ld->cfg.ssd_dir != NULL)) {
        rc = loader_place_tiers(ld->ix, &ds->tables, &ld->cfg, &sz, &ld->tier);
    }
    if (rc == HDMLP_OK && cfg->calibrate && ld->tier != NULL && ld->cfg.ssd_dir != NULL) {
        probe_result sp;
        if (probe_directory(ld->cfg.ssd_dir, &lim, &sp) == HDMLP_OK) {
            ld->st.ssd_op_ns = (uint64_t)(sp.op_us * 1000.0);
            ld->st.ssd_bytes_per_s = (uint64_t)sp.bytes_per_s;
            cost_model_init(&ld->ssd_model,
                            &(refill_cost){sp.op_us, sp.bytes_per_s, 0, 0.0, 0.0});
        }
    }
    if (rc == HDMLP_OK && ld->tier != NULL && ld->cfg.ssd_dir != NULL) {
        /* The stager's read buffer (reserved in the budget). */
        ld->stage_cap = refill_max_buffer(ld->ix);
        ld->stage_buf = hd_map_alloc(ld->stage_cap);
        if (ld->stage_buf == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "loader: cannot map the SSD stager's %llu-byte buffer",
                        (unsigned long long)ld->stage_cap);
        }
    }
    if (rc == HDMLP_OK) {
        /* Where refills read from: the dataset's segments, local or remote (decided here,
         * once), and the tiers' caches. */
        chunk_source_dataset(&ld->src[TIER_SOURCE], ds, ld->cfg.direct, &ld->src_clock);
        if (ld->tier != NULL) {
            chunk_source_ram(&ld->src[TIER_RAM], ds, ld->tier);
            chunk_source_ssd(&ld->src[TIER_SSD], ds, ld->tier, &ld->ssd_clock);
        }
    }
    for (uint32_t i = 0; rc == HDMLP_OK && i < cfg->threads; i++) {
        rc = worker_start(ld, &ld->workers[i]);
        ld->n_workers = i + 1;
    }
    if (rc == HDMLP_OK) {
        rc = resume_apply(ld);
    }
    if (rc == HDMLP_OK && ld->cfg.image != NULL) {
        rc = image_pipe_start(ld);
    }
    if (rc == HDMLP_OK && ld->tier != NULL && ld->cfg.ssd_dir != NULL && !ld->cfg.stager_off) {
        if (pthread_create(&ld->stager, NULL, stage_main, ld) != 0) {
            rc = hd_err(HDMLP_E_NOMEM, "loader: cannot start the SSD stager");
        } else {
            ld->stager_started = 1;
        }
    }
    if (rc == HDMLP_OK && ld->world > 1) {
        const peer_handler h = {ld, exchange_on_msg, exchange_on_error};
        ld->last_peer_ns = loader_now_ns();
        /* The transport's server may deliver a peer's request (and queue answers) before
         * the factory returns: ld->net is published under the lock, and what was queued
         * meanwhile is sent right after. */
        peer_transport *net = NULL;
        /* The transport's sample arena is sized from the budget, by its owner. */
        ld->cfg.peer_arena = budget_transport_arena(&ld->budget);
        rc = factory(&ld->cfg, &h, &net);
        if (rc == HDMLP_OK) {
            pthread_mutex_lock(&ld->lock);
            ld->net = net;
            ld->mem = net->mem;
            ld->st.peers_same_host = net->peers_same_host;
            pthread_mutex_unlock(&ld->lock);
            exchange_flush(ld);
        }
    }
    if (rc == HDMLP_OK) {
        rc = node_balance_start(ld, sz.lookahead);
    }
    if (rc != HDMLP_OK) {
        hdmlp_loader_free(ld);
        return rc;
    }
    *out = ld;
    return HDMLP_OK;
}

/* With peers: keeps serving until every peer has finished (or failed, or gone silent for
 * longer than max(4 × peer timeout, 30 s) while it still needed nothing from us). */
static void wait_for_peers(hdmlp_loader *ld);

int hdmlp_loader_finish(hdmlp_loader *ld)
{
    if (ld == NULL) {
        return hd_err(HDMLP_E_INVAL, "loader_finish: loader is NULL");
    }
    if (ld->net == NULL) {
        return HDMLP_OK;
    }
    pthread_mutex_lock(&ld->lock);
    loader_announce_done(ld);
    pthread_mutex_unlock(&ld->lock);
    exchange_flush(ld);
    wait_for_peers(ld);
    pthread_mutex_lock(&ld->lock);
    const int rc = ld->failed ? hd_err(ld->failed, "%s", ld->fail_detail) : HDMLP_OK;
    pthread_mutex_unlock(&ld->lock);
    return rc;
}

static void wait_for_peers(hdmlp_loader *ld)
{
    const uint64_t quiet_ns =
        (uint64_t)(ld->cfg.peer_timeout_ms * 4ull > 30000 ? ld->cfg.peer_timeout_ms * 4ull
                                                          : 30000) *
        1000000ull;
    pthread_mutex_lock(&ld->lock);
    while (ld->peers_done < ld->world - 1 && !ld->failed) {
        if (loader_now_ns() - ld->last_peer_ns > quiet_ns) {
            break;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&ld->ready_cv, &ld->lock, &until);
    }
    pthread_mutex_unlock(&ld->lock);
}

void hdmlp_loader_free(hdmlp_loader *ld)
{
    if (ld == NULL) {
        return;
    }
    if (ld->net != NULL) {
        /* Whatever this rank still wanted, it is leaving: tell the peers, keep serving. */
        hdmlp_loader_finish(ld);
        peer_transport *net = exchange_close(ld);
        net->destroy(net);
    }
    image_pipe_stop(ld); /* before the I/O threads: some may wait for the split */
    pthread_mutex_lock(&ld->lock);
    ld->shutdown = 1;
    node_balance_release(ld);
    pthread_cond_broadcast(&ld->work_cv);
    pthread_cond_broadcast(&ld->ready_cv); /* I/O threads beyond two may wait there */
    pthread_mutex_unlock(&ld->lock);
    for (uint32_t i = 0; i < ld->n_workers; i++) {
        if (ld->workers[i].started) {
            pthread_join(ld->workers[i].thread, NULL);
        }
    }
    node_balance_free(ld);
    pthread_mutex_lock(&ld->lock);
    pthread_cond_broadcast(&ld->ready_cv); /* the stager waits there */
    pthread_mutex_unlock(&ld->lock);
    if (ld->stager_started) {
        pthread_join(ld->stager, NULL);
    }
    pthread_mutex_lock(&ld->lock);
    loader_release_all(ld);
    loader_unref_unlock(ld);
}

int hdmlp_loader_epoch_source_bytes(hdmlp_loader *ld, uint64_t *out, size_t n, size_t *count)
{
    if (ld == NULL || (out == NULL && n > 0)) {
        return hd_err(HDMLP_E_INVAL, "epoch_source_bytes: loader and out are required");
    }
    pthread_mutex_lock(&ld->lock);
    for (size_t i = 0; i < n; i++) {
        out[i] = i < ld->epoch_source_known ? ld->epoch_source[i] : 0;
    }
    if (count != NULL) {
        *count = ld->epoch_source_known;
    }
    pthread_mutex_unlock(&ld->lock);
    return HDMLP_OK;
}

uint64_t loader_slots_occupied(const hdmlp_loader *ld)
{
    hdmlp_loader *m = (hdmlp_loader *)ld;
    pthread_mutex_lock(&m->lock);
    const uint64_t v = sched_slots_occupied(m->sch);
    pthread_mutex_unlock(&m->lock);
    return v;
}

void hdmlp_loader_last_skip(hdmlp_loader *ld, char *buf, size_t cap)
{
    if (ld == NULL || buf == NULL || cap == 0) {
        return;
    }
    pthread_mutex_lock(&ld->lock);
    snprintf(buf, cap, "%s", ld->last_skip);
    pthread_mutex_unlock(&ld->lock);
}

uint64_t hdmlp_loader_epoch_size(const hdmlp_loader *ld) { return ld ? ld->epoch_len : 0; }

uint64_t hdmlp_loader_batches_per_epoch(const hdmlp_loader *ld)
{
    if (ld == NULL) {
        return 0;
    }
    const uint64_t b = ld->cfg.batch;
    return ld->cfg.drop_last ? ld->epoch_len / b : (ld->epoch_len + b - 1) / b;
}

size_t hdmlp_batch_size(const hdmlp_batch *batch) { return batch ? batch->n : 0; }

uint64_t hdmlp_batch_epoch(const hdmlp_batch *batch) { return batch ? batch->epoch : 0; }

const hdmlp_sample_view *hdmlp_batch_samples(const hdmlp_batch *batch)
{
    return batch ? batch->views : NULL;
}

int hdmlp_loader_cost_history(hdmlp_loader *ld, hdmlp_cost_point *out, size_t n, size_t *count)
{
    if (ld == NULL || count == NULL || (out == NULL && n > 0)) {
        return hd_err(HDMLP_E_INVAL, "loader_cost_history: loader and count are required");
    }
    pthread_mutex_lock(&ld->lock);
    const cost_history *h = &ld->src_hist;
    for (size_t i = 0; i < n && i < h->n; i++) {
        out[i] = (hdmlp_cost_point){h->p[i].reads, h->p[i].op_us, h->p[i].bytes_per_s};
    }
    *count = h->n;
    pthread_mutex_unlock(&ld->lock);
    return HDMLP_OK;
}

/* What the loader holds outside the budget that depends on the dataset (stats
 * metadata_bytes; lock held). */
static uint64_t loader_metadata_bytes(const struct hdmlp_loader *ld)
{
    uint64_t bytes = sched_state_bytes(ld->sch) + ld->ring_cap * sizeof(ld_item) +
                     sched_slot_count(ld->sch) * sizeof(ld_sample *);
    if (ld->tier != NULL) {
        bytes += tier_state_bytes(ld->tier);
    }
    return bytes;
}

int hdmlp_loader_stats(hdmlp_loader *ld, hdmlp_stats *out, size_t size)
{
    if (ld == NULL || out == NULL || size == 0) {
        return hd_err(HDMLP_E_INVAL, "loader_stats: loader, out and a size are required");
    }
    pthread_mutex_lock(&ld->lock);
    hdmlp_stats st = ld->st;
    if (ld->tier != NULL) {
        st.ram_cached_chunks = tier_ram_chunks(ld->tier);
    }
    st.metadata_bytes = loader_metadata_bytes(ld);
    st.index_bytes = ld->ds->index_size;
    pthread_mutex_unlock(&ld->lock);
    loader_stats_out(out, size, &st);
    return HDMLP_OK;
}
