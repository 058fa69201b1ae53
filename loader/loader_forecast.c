/*
 * Forecast: a metadata-only replay of the loader's decisions (sampler, scheduler with each
 * owner's slot-byte cap, refill read plans) over the planned epochs. Decisions do not
 * depend on I/O timing, so the forecast equals what a run reports.
 */
#include "loader_core.h"
#include "loader_sampler.h"

#include <string.h>

typedef struct forecast {
    const fmt_index *ix;
    const struct hdmlp_config *cfg;
    sched **owners; /* one scheduler per rank: each applies its own slot-byte cap */
    uint64_t *perm;
    uint32_t *slots;
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
    hd_free(f->perm);
    hd_free(f->slots);
}

static int forecast_init(forecast *f, const fmt_index *ix, const struct hdmlp_config *cfg,
                         loader_sizing *sz)
{
    memset(f, 0, sizeof(*f));
    f->ix = ix;
    f->cfg = cfg;
    f->cost = (refill_cost){cfg->op_us, cfg->bytes_per_s};
    int rc = loader_size(ix, cfg, sz);
    if (rc != HDMLP_OK) {
        return rc;
    }
    f->owners = hd_calloc(cfg->world, sizeof(sched *));
    f->perm = hd_malloc(ix->h.n_samples * sizeof(uint64_t));
    f->slots = hd_malloc(ix->h.chunk_size * sizeof(uint32_t));
    if (f->owners == NULL || f->perm == NULL || f->slots == NULL) {
        return hd_err(HDMLP_E_NOMEM, "forecast: out of memory");
    }
    const sched_params sp = {sz->abstract_chunks, cfg->policy, cfg->seed, sz->slot_cap};
    for (uint32_t o = 0; o < cfg->world; o++) {
        rc = sched_create(ix, &sp, &f->owners[o]);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    return HDMLP_OK;
}

/* Counts one refill of this rank exactly as loader_plan.c admits it. */
static int count_refill(forecast *f, const sched_step *st, hdmlp_stats *out,
                        uint64_t *bytes_read)
{
    const uint32_t k = f->ix->h.chunk_size;
    const uint32_t t_req = (uint32_t)(st->sample % k);
    uint32_t n = 0;
    int placed = 0;
    for (uint32_t j = 0; j < st->n_fill; j++) {
        if (!placed && t_req < st->fill_slot[j]) {
            f->slots[n++] = t_req;
            placed = 1;
        }
        f->slots[n++] = st->fill_slot[j];
    }
    if (!placed) {
        f->slots[n++] = t_req;
    }
    refill_plan plan;
    const int rc = refill_plan_build(f->ix, st->chunk, f->slots, n, f->cfg->refill, &f->cost,
                                     f->cfg->direct, &plan);
    if (rc != HDMLP_OK) {
        return rc;
    }
    out->misses++;
    out->chunk_loads++;
    out->samples_filled += n;
    out->read_ops += plan.n_ranges;
    out->bytes_read += plan.buf_len;
    *bytes_read += plan.buf_len;
    if (plan.whole) {
        out->whole_refills++;
    } else {
        out->ranged_refills++;
    }
    const uint64_t bucket = (uint64_t)n * 10 / k;
    out->fill_hist[bucket > 10 ? 10 : bucket]++;
    refill_plan_free(&plan);
    return HDMLP_OK;
}

int hdmlp_loader_forecast(hdmlp_dataset *ds, const hdmlp_config *cfg, hdmlp_stats *out,
                          uint64_t *chunk_loads, uint64_t *first_use,
                          uint64_t *epoch_bytes_read)
{
    if (ds == NULL || cfg == NULL || out == NULL) {
        return hd_err(HDMLP_E_INVAL, "forecast: dataset, config and out are required");
    }
    if (cfg->epochs == 0) {
        return hd_err(HDMLP_E_INVAL, "forecast: needs a bounded number of epochs");
    }
    const fmt_index *ix = &ds->ix;
    const uint64_t n = ix->h.n_samples;
    const uint64_t c = ix->h.n_chunks;
    const uint32_t k = ix->h.chunk_size;
    const uint32_t world = cfg->world, rank = cfg->rank;
    memset(out, 0, sizeof(*out));
    if (chunk_loads != NULL) {
        memset(chunk_loads, 0, c * sizeof(uint64_t));
    }
    if (first_use != NULL) {
        memset(first_use, 0xff, c * sizeof(uint64_t));
    }
    forecast f;
    loader_sizing sz;
    int rc = forecast_init(&f, ix, cfg, &sz);
    const uint64_t epoch_len = sampler_rank_count(n, rank, world);
    const uint64_t batches_per_epoch =
        cfg->drop_last ? epoch_len / cfg->batch : (epoch_len + cfg->batch - 1) / cfg->batch;
    const uint64_t kept = cfg->drop_last ? batches_per_epoch * cfg->batch : epoch_len;
    for (uint64_t e = 0; rc == HDMLP_OK && e < cfg->epochs; e++) {
        uint64_t bytes = 0;
        for (uint32_t o = 0; rc == HDMLP_OK && o < world; o++) {
            rc = sched_begin_epoch(f.owners[o], e);
        }
        sampler_epoch(cfg->seed, e, n, f.perm);
        for (uint64_t p = 0; rc == HDMLP_OK && p < n; p++) {
            const uint64_t x = f.perm[p];
            const uint64_t g = sched_group_of_chunk(f.owners[0], x / k);
            const uint32_t owner = (uint32_t)(g % world);
            const uint32_t requester = (uint32_t)(p % world);
            sched_step st; /* every owner sees all its positions, as in a real run */
            rc = sched_request(f.owners[owner], x, &st);
            if (rc != HDMLP_OK) {
                break;
            }
            if (requester == rank && (!cfg->drop_last || p / world < kept)) {
                fmt_sample rec;
                fmt_index_sample(ix, st.sample, &rec);
                out->samples++;
                out->bytes_delivered += rec.raw_len;
                out->stored_bytes_delivered += rec.stored_len;
            }
            if (owner != rank) {
                continue;
            }
            out->requests++;
            if (st.hit) {
                out->hits++;
                continue;
            }
            rc = count_refill(&f, &st, out, &bytes);
            if (chunk_loads != NULL) {
                chunk_loads[st.chunk]++;
            }
            if (first_use != NULL && first_use[st.chunk] == UINT64_MAX) {
                first_use[st.chunk] = e * n + p;
            }
        }
        if (epoch_bytes_read != NULL) {
            epoch_bytes_read[e] = bytes;
        }
    }
    out->epochs = rc == HDMLP_OK ? cfg->epochs : 0;
    out->batches = rc == HDMLP_OK ? batches_per_epoch * cfg->epochs : 0;
    out->memory_budget = cfg->memory;
    out->abstract_chunks = sz.abstract_chunks;
    out->chunk_groups = sz.abstract_chunks;
    forecast_free(&f);
    return rc;
}
