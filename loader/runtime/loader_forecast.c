/*
 * Forecast: a metadata-only replay of the loader's decisions (sampler, scheduler with each
 * owner's slot-byte cap, refill read plans) over the planned epochs. Decisions do not
 * depend on I/O timing, so the forecast equals what a run reports.
 */
#include "loader_forecast.h"
#include "loader_core.h"
#include "loader_iomode.h"
#include "loader_sampler.h"

#include <pthread.h>
#include <string.h>

typedef struct forecast {
    const fmt_index *ix;
    const struct hdmlp_config *cfg;
    sched **owners; /* one scheduler per rank: each applies its own slot-byte cap */
    refill_cost cost;
} forecast;

static void forecast_free(forecast *f)
{
    if (f->owners != NULL) {
        for (uint32_t o = 0; o < f->cfg->world; o++) {
            sched_free(f->owners[o]);
        }
    }
    hd_free(f->owners);
}

static int forecast_init(forecast *f, const fmt_index *ix, const fmt_tables *tables,
                         const struct hdmlp_config *cfg, const loader_sizing *sz)
{
    memset(f, 0, sizeof(*f));
    f->ix = ix;
    f->cfg = cfg;
    f->cost = (refill_cost){cfg->op_us, cfg->bytes_per_s, cfg->max_request, 0.0, 0.0};
    int rc = HDMLP_OK;
    f->owners = hd_calloc(cfg->world, sizeof(sched *));
    if (f->owners == NULL) {
        return hd_err(HDMLP_E_NOMEM, "forecast: out of memory");
    }
    sched_params sp = {.abstract_chunks = sz->abstract_chunks,
                       .policy = cfg->policy,
                       .seed = cfg->seed,
                       .slot_cap_bytes = sz->slot_cap,
                       .order = cfg->order,
                       .pool_unit = sz->pool_unit,
                       .window_bytes = loader_read_window(cfg),
                       .world = cfg->world,
                       .tables = *tables};
    for (uint32_t o = 0; o < cfg->world; o++) {
        sp.rank = o;
        rc = sched_create(ix, &sp, &f->owners[o]);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    return HDMLP_OK;
}

/* Counts one refill of this rank exactly as loader_plan.c admits it. */
static void count_refill(forecast *f, const sched_step *st, hdmlp_refill mode, int from_source,
                         hdmlp_stats *out, uint64_t *source_bytes)
{
    const uint32_t k = f->ix->h.chunk_size;
    const uint32_t n = st->n_load;
    const refill_reads rd = {.table = st->table, .slots = st->load_slot, .n = n};
    refill_shape plan;
    refill_plan_shape(f->ix, st->chunk, &rd, mode, &f->cost, f->cfg->direct, &plan);
    out->misses++;
    out->chunk_loads++;
    out->samples_filled += n;
    out->read_ops += plan.n_ranges;
    out->bytes_read += plan.buf_len;
    if (from_source) {
        out->source_bytes += plan.buf_len;
        *source_bytes += plan.buf_len;
    }
    if (plan.whole) {
        out->whole_refills++;
    } else {
        out->ranged_refills++;
    }
    const uint64_t bucket = (uint64_t)n * 10 / k;
    out->fill_hist[bucket > 10 ? 10 : bucket]++;
}

typedef struct epoch_job {
    forecast f;
    const struct hdmlp_config *cfg;
    const fmt_index *ix;
    /* Stored length of the sample each slot holds (slot ids are every owner's, disjoint),
     * noted from the chunk's table when a miss reads it: what a delivery hands out, as the
     * loader's samples carry it, without asking for tables at deliveries. NULL when every
     * sample read is delivered to this rank and counted (one rank, no drop_last): the
     * stored bytes delivered are then those read, summed at the reads. */
    uint64_t *slot_stored;
    uint64_t first, step; /* epochs first, first + step, ... */
    hdmlp_stats st;
    uint64_t *chunk_loads, *first_use, *epoch_bytes_read; /* shared: disjoint epochs/chunks
                                                             are merged after join */
    uint64_t kept;
    const tier *placement;    /* NULL: no tiers */
    const uint64_t *first_of; /* each chunk's first load (sequence number), with tiers */
    int rc;
} epoch_job;

/* Requests are decided AHEAD positions after their scheduler state is prefetched: the
 * replay is bound by memory latency, not by work. */
#define AHEAD 16

static uint32_t owner_of(const forecast *f, uint64_t x)
{
    const sched *s = f->owners[0];
    const uint32_t world = f->cfg->world;
    return world == 1 ? 0 : (uint32_t)(sched_group_of_chunk(s, sched_chunk_of(s, x)) % world);
}

/* Replays epoch e into the job's stats. */
static int replay_epoch(epoch_job *j, uint64_t e)
{
    const fmt_index *ix = j->ix;
    const struct hdmlp_config *cfg = j->cfg;
    const uint64_t n = ix->h.n_samples;
    const uint32_t world = cfg->world, rank = cfg->rank;
    const uint32_t k = ix->h.chunk_size;
    uint64_t *stored = j->slot_stored;
    /* Strict fill-rate or random: a request is delivered from the slot of its location. */
    const int at_location = stored != NULL && cfg->order == HDMLP_ORDER_STRICT &&
                            cfg->policy != HDMLP_POLICY_CLAIRVOYANT;
    forecast *f = &j->f;
    hdmlp_stats *out = &j->st;
    uint64_t bytes = 0;
    int rc = HDMLP_OK;
    for (uint32_t o = 0; rc == HDMLP_OK && o < world; o++) {
        rc = sched_begin_epoch(f->owners[o], e);
    }
    sampler order;
    sampler_init(&order, cfg->seed, e, n);
    /* The order in runs of AHEAD positions: run p / AHEAD in run[(p / AHEAD) % 2], the
     * next one computed when a run starts, so position p + AHEAD is always known. */
    uint64_t run[2][AHEAD];
    sampler_run(&order, 0, (uint32_t)(n < AHEAD ? n : AHEAD), run[0]);
    uint32_t requester = 0; /* p mod world */
    for (uint64_t p = 0; rc == HDMLP_OK && p < n; p++) {
        const uint64_t r = p / AHEAD, i = p % AHEAD;
        if (i == 0 && p + AHEAD < n) {
            const uint64_t left = n - p - AHEAD;
            sampler_run(&order, p + AHEAD, (uint32_t)(left < AHEAD ? left : AHEAD),
                        run[(r + 1) % 2]);
        }
        const uint64_t x = run[r % 2][i];
        if (p + AHEAD < n) {
            const uint64_t ahead = run[(r + 1) % 2][i];
            const sched *so = f->owners[owner_of(f, ahead)];
            sched_prefetch(so, ahead);
            if (at_location) {
                const uint64_t c = sched_chunk_of(so, ahead);
                __builtin_prefetch(&stored[sched_group_of_chunk(so, c) * k + (ahead - c * k)]);
            }
        }
        const uint32_t owner = owner_of(f, x);
        const uint32_t req = requester;
        requester = requester + 1 == world ? 0 : requester + 1;
        sched_step st; /* every owner sees all its positions, as in a real run */
        rc = sched_request(f->owners[owner], x, &st);
        if (rc != HDMLP_OK) {
            break;
        }
        for (uint32_t l = 0; !st.hit && l < st.n_load; l++) {
            const uint64_t len = fmt_table_stored_len(st.table, st.load_slot[l]);
            if (stored != NULL) {
                stored[st.load_place[l]] = len;
            } else {
                out->stored_bytes_delivered += len;
            }
        }
        if (req == rank && (!cfg->drop_last || p / world < j->kept)) {
            out->samples++;
            out->bytes_delivered += st.size;
            out->stored_bytes_delivered += stored != NULL ? stored[st.slot] : 0;
        }
        if (owner != rank) {
            continue;
        }
        out->requests++;
        if (st.hit) {
            out->hits++;
            continue;
        }
        /* Tiers: the first load of a RAM or SSD chunk reads it whole from the source (and
         * fills the cache); later loads are assumed served by their cache. */
        const uint64_t seq = e * n + p;
        const int place =
            j->placement != NULL ? tier_placement(j->placement, st.chunk) : TIER_SOURCE;
        const int first = j->first_of != NULL && j->first_of[st.chunk] == seq;
        const hdmlp_refill mode =
            place != TIER_SOURCE && first
                ? HDMLP_REFILL_WHOLE
                : sched_load_mode(f->owners[owner], st.chunk, st.n_load, cfg->refill);
        count_refill(f, &st, mode, place == TIER_SOURCE || first, out, &bytes);
        if (j->chunk_loads != NULL) {
            j->chunk_loads[st.chunk]++;
        }
        if (j->first_use != NULL && j->first_use[st.chunk] == UINT64_MAX) {
            j->first_use[st.chunk] = seq;
        }
    }
    if (j->epoch_bytes_read != NULL) {
        j->epoch_bytes_read[e] = bytes;
    }
    return rc;
}

/* Replays epochs job->first, +step, ... (epochs are independent: every slot is empty at
 * an epoch boundary). */
static void *run_epochs(void *arg)
{
    epoch_job *j = arg;
    int rc = HDMLP_OK;
    for (uint64_t e = j->first; rc == HDMLP_OK && e < j->cfg->epochs; e += j->step) {
        rc = replay_epoch(j, e);
    }
    j->rc = rc;
    return NULL;
}

static void add_stats(hdmlp_stats *to, const hdmlp_stats *from)
{
    to->samples += from->samples;
    to->requests += from->requests;
    to->hits += from->hits;
    to->misses += from->misses;
    to->chunk_loads += from->chunk_loads;
    to->read_ops += from->read_ops;
    to->bytes_read += from->bytes_read;
    to->source_bytes += from->source_bytes;
    to->bytes_delivered += from->bytes_delivered;
    to->stored_bytes_delivered += from->stored_bytes_delivered;
    to->samples_filled += from->samples_filled;
    to->whole_refills += from->whole_refills;
    to->ranged_refills += from->ranged_refills;
    for (int i = 0; i < 11; i++) {
        to->fill_hist[i] += from->fill_hist[i];
    }
}

/* Replays `epochs` epochs of (ix, cfg) sized by sz, with an optional tier placement. */
static int forecast_replay(const fmt_index *ix, const fmt_tables *tables,
                           const struct hdmlp_config *cfg, const loader_sizing *sz,
                           const tier *placement, const uint64_t *first_of, uint64_t epochs,
                           hdmlp_stats *out, uint64_t *chunk_loads, uint64_t *first_use,
                           uint64_t *epoch_source_bytes)
{
    const uint64_t n = ix->h.n_samples;
    const uint64_t c = ix->h.n_chunks;
    struct hdmlp_config run = *cfg;
    run.epochs = epochs;
    memset(out, 0, sizeof(*out));
    /* One thread per configured I/O thread, at most one per epoch. */
    const uint64_t span = epochs > run.start_epoch ? epochs - run.start_epoch : 0;
    uint64_t nt = run.threads < span ? run.threads : span;
    nt = nt < 1 ? 1 : nt;
    epoch_job *jobs = hd_calloc(nt, sizeof(epoch_job));
    pthread_t *th = hd_calloc(nt, sizeof(pthread_t));
    if (jobs == NULL || th == NULL) {
        hd_free(jobs);
        hd_free(th);
        return hd_err(HDMLP_E_NOMEM, "forecast: out of memory");
    }
    const uint64_t epoch_len = sampler_rank_count(n, run.rank, run.world);
    const uint64_t batches_per_epoch =
        run.drop_last ? epoch_len / run.batch : (epoch_len + run.batch - 1) / run.batch;
    int rc = HDMLP_OK;
    uint64_t started = 0;
    for (uint64_t t = 0; t < nt && rc == HDMLP_OK; t++) {
        epoch_job *j = &jobs[t];
        j->cfg = &run;
        j->ix = ix;
        j->first = run.start_epoch + t;
        j->step = nt;
        j->kept = run.drop_last ? batches_per_epoch * run.batch : epoch_len;
        j->epoch_bytes_read = epoch_source_bytes; /* each epoch written by one thread */
        j->placement = placement;
        j->first_of = first_of;
        rc = forecast_init(&j->f, ix, tables, &run, sz);
        if (rc == HDMLP_OK && (run.world > 1 || run.drop_last)) {
            j->slot_stored = hd_malloc(sched_slot_count(j->f.owners[0]) * sizeof(uint64_t));
            if (j->slot_stored == NULL) {
                rc = hd_err(HDMLP_E_NOMEM, "forecast: out of memory");
            }
        }
        if (rc == HDMLP_OK && (chunk_loads != NULL || first_use != NULL)) {
            j->chunk_loads = hd_calloc(c, sizeof(uint64_t));
            j->first_use = hd_malloc(c * sizeof(uint64_t));
            if (j->chunk_loads == NULL || j->first_use == NULL) {
                rc = hd_err(HDMLP_E_NOMEM, "forecast: out of memory");
            } else {
                memset(j->first_use, 0xff, c * sizeof(uint64_t));
            }
        }
    }
    for (uint64_t t = 1; rc == HDMLP_OK && t < nt; t++) {
        if (pthread_create(&th[t], NULL, run_epochs, &jobs[t]) != 0) {
            rc = hd_err(HDMLP_E_NOMEM, "forecast: cannot start a thread");
            break;
        }
        started = t;
    }
    if (rc == HDMLP_OK) {
        run_epochs(&jobs[0]);
    }
    for (uint64_t t = 1; t <= started; t++) {
        pthread_join(th[t], NULL);
    }
    if (chunk_loads != NULL) {
        memset(chunk_loads, 0, c * sizeof(uint64_t));
    }
    if (first_use != NULL) {
        memset(first_use, 0xff, c * sizeof(uint64_t));
    }
    for (uint64_t t = 0; t < nt; t++) {
        epoch_job *j = &jobs[t];
        if (rc == HDMLP_OK && j->rc != HDMLP_OK) {
            rc = j->rc;
        }
        add_stats(out, &j->st);
        for (uint64_t i = 0; j->chunk_loads != NULL && i < c; i++) {
            if (chunk_loads != NULL) {
                chunk_loads[i] += j->chunk_loads[i];
            }
            if (first_use != NULL && j->first_use[i] < first_use[i]) {
                first_use[i] = j->first_use[i];
            }
        }
        hd_free(j->chunk_loads);
        hd_free(j->first_use);
        hd_free(j->slot_stored);
        forecast_free(&j->f);
    }
    hd_free(th);
    hd_free(jobs);
    out->epochs = rc == HDMLP_OK ? span : 0;
    out->batches = rc == HDMLP_OK ? batches_per_epoch * span : 0;
    out->memory_budget = sz->memory;
    out->memory_configured = run.memory;
    out->abstract_chunks = sz->abstract_chunks;
    out->chunk_groups = sz->abstract_chunks;
    return rc;
}

/* Tier placement from the loads of the first (at most two) planned epochs: load counts
 * rank chunks the same way in every epoch, and two epochs keep start-up short. */
#define PLACEMENT_EPOCHS 2

int loader_place_tiers(const fmt_index *ix, const fmt_tables *tables,
                       const struct hdmlp_config *cfg, const loader_sizing *sz, tier **out)
{
    *out = NULL;
    const uint64_t c = ix->h.n_chunks;
    uint64_t *loads = hd_malloc(c * sizeof(uint64_t));
    uint64_t *first = hd_malloc(c * sizeof(uint64_t));
    if (loads == NULL || first == NULL) {
        hd_free(loads);
        hd_free(first);
        return hd_err(HDMLP_E_NOMEM, "tiers: out of memory");
    }
    const uint64_t epochs =
        cfg->epochs != 0 && cfg->epochs < PLACEMENT_EPOCHS ? cfg->epochs : PLACEMENT_EPOCHS;
    hdmlp_stats st;
    int rc = forecast_replay(ix, tables, cfg, sz, NULL, NULL, epochs, &st, loads, first, NULL);
    if (rc == HDMLP_OK) {
        const tier_params tp = {sz->ram_cache, cfg->ssd_dir, cfg->ssd_capacity,
                                ix->h.dataset_id, cfg->direct};
        rc = tier_create(ix, &tp, loads, first, out);
    }
    hd_free(loads);
    hd_free(first);
    return rc;
}

/* The forecast into a whole hdmlp_stats of this library's size. */
static int forecast_stats(hdmlp_dataset *ds, const hdmlp_config *given, hdmlp_stats *out,
                          uint64_t *chunk_loads, uint64_t *first_use,
                          uint64_t *epoch_source_bytes)
{
    if (given->epochs == 0) {
        return hd_err(HDMLP_E_INVAL, "forecast: needs a bounded number of epochs");
    }
    /* Buffered or direct as a loader made now would read (alignment changes bytes). */
    struct hdmlp_config resolved = *given;
    uint64_t room;
    int rc = iomode_resolve(ds, given, &resolved.direct, &room);
    if (rc != HDMLP_OK) {
        return rc;
    }
    resolved.max_request = iomode_max_request(ds);
    resolved.policy = loader_policy(&ds->ix, given);
    const struct hdmlp_config *cfg = &resolved;
    const fmt_index *ix = &ds->ix;
    loader_sizing sz;
    fmt_tables held = ds->tables;
    const fmt_tables *tables = &held;
    rc = loader_size(ix, tables, cfg, &sz);
    if (rc == HDMLP_OK) {
        /* A forecast replays every epoch's misses: it holds the sample tables and their
         * offsets whatever the budget (a loader holds tables only within its share), so no
         * miss reads a file or sums a table; its decisions do not depend on where tables
         * are read from. */
        rc = ds_tables_hold_offsets(ds, &held);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    tier *t = NULL;
    uint64_t *first_of = NULL;
    if (sz.ram_cache > 0 || cfg->ssd_dir != NULL) {
        rc = loader_place_tiers(ix, tables, cfg, &sz, &t);
        /* Each chunk's first load: tiers never change decisions, so a tier-less replay
         * finds it. */
        first_of = hd_malloc(ix->h.n_chunks * sizeof(uint64_t));
        if (rc == HDMLP_OK && first_of == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "forecast: out of memory");
        }
        hdmlp_stats pre;
        if (rc == HDMLP_OK) {
            rc = forecast_replay(ix, tables, cfg, &sz, NULL, NULL, cfg->epochs, &pre, NULL,
                                 first_of, NULL);
        }
    }
    if (rc == HDMLP_OK) {
        rc = forecast_replay(ix, tables, cfg, &sz, t, first_of, cfg->epochs, out, chunk_loads,
                             first_use, epoch_source_bytes);
    }
    if (rc == HDMLP_OK && t == NULL) {
        out->source_bytes = out->bytes_read;
    }
    if (rc == HDMLP_OK) {
        out->direct_io = (uint64_t)cfg->direct;
        out->page_cache_room = room;
        out->cost_learning = (uint64_t)(cfg->learn && !cfg->cost_set);
        out->source_op_ns = out->source_op_ns_start = (uint64_t)(cfg->op_us * 1000.0);
        out->source_bytes_per_s = out->source_bytes_per_s_start = (uint64_t)cfg->bytes_per_s;
    }
    tier_free(t);
    hd_free(first_of);
    return rc;
}

int hdmlp_loader_forecast(hdmlp_dataset *ds, const hdmlp_config *cfg, hdmlp_stats *out,
                          size_t size, uint64_t *chunk_loads, uint64_t *first_use,
                          uint64_t *epoch_source_bytes)
{
    if (ds == NULL || cfg == NULL || out == NULL || size == 0) {
        return hd_err(HDMLP_E_INVAL, "forecast: dataset, config, out and a size are required");
    }
    hdmlp_stats st;
    const int rc = forecast_stats(ds, cfg, &st, chunk_loads, first_use, epoch_source_bytes);
    if (rc == HDMLP_OK) {
        loader_stats_out(out, size, &st);
    }
    return rc;
}
