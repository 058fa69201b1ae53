/*
 * Exact resume. The state is small: the position after the last batch handed out, and a
 * fingerprint of everything that shapes the order. Because every decision follows from the
 * seed, a new loader replays the scheduler's decisions of the current epoch up to that
 * position without reading any data, then reads back just the samples that were sitting
 * in its slots there; from then on it decides and delivers exactly what the saved loader
 * would have.
 *
 * State layout (little-endian, 104 bytes):
 *   0 magic "HDMLPST1"   8 u32 version (the sampler's order version, 2)   12 u32 length (104)
 *   16 u64 dataset id    24 u64 samples      32 u32 chunk size   36 u32 world
 *   40 u32 rank          44 u32 batch        48 u64 seed         56 u64 abstract chunks
 *   64 u64 slot cap      72 u32 flags (drop_last | policy << 1 | pool order << 4; bit 3,
 *   the former relaxed mode, is refused)   76 u32 pool unit (0 for strict)
 *   80 u64 epoch         88 u64 position     96 u64 XXH3 of 0..95
 */
#include "loader_resume.h"
#include "loader_core.h"
#include "loader_image_pipe.h"
#include "loader_plan.h"
#include "loader_sampler.h"

#include <stdlib.h>
#include <string.h>

#define STATE_LEN 104u
#define STATE_MAGIC "HDMLPST1"

static uint32_t state_flags(const struct hdmlp_config *cfg)
{
    return (uint32_t)cfg->drop_last | ((uint32_t)cfg->policy << 1) |
           ((uint32_t)(cfg->order == HDMLP_ORDER_POOL) << 4);
}

int hdmlp_loader_save_state(hdmlp_loader *ld, void *buf, size_t cap, size_t *len)
{
    if (ld == NULL || buf == NULL) {
        return hd_err(HDMLP_E_INVAL, "save_state: loader and buffer are required");
    }
    if (cap < STATE_LEN) {
        if (len != NULL) {
            *len = STATE_LEN;
        }
        return hd_err(HDMLP_E_RANGE, "save_state: needs %u bytes, got %zu", STATE_LEN, cap);
    }
    uint8_t *p = buf;
    memset(p, 0, STATE_LEN);
    memcpy(p, STATE_MAGIC, 8);
    fmt_st32(p + 8, SAMPLER_ORDER_VERSION);
    fmt_st32(p + 12, STATE_LEN);
    pthread_mutex_lock(&ld->lock);
    fmt_st64(p + 16, ld->ix->h.dataset_id);
    fmt_st64(p + 24, ld->ix->h.n_samples);
    fmt_st32(p + 32, ld->ix->h.chunk_size);
    fmt_st32(p + 36, ld->world);
    fmt_st32(p + 40, ld->rank);
    fmt_st32(p + 44, ld->cfg.batch);
    fmt_st64(p + 48, ld->cfg.seed);
    fmt_st64(p + 56, sched_abstract_chunks(ld->sch));
    fmt_st64(p + 64, budget_sizing(&ld->budget)->slot_cap);
    fmt_st32(p + 72, state_flags(&ld->cfg));
    fmt_st32(p + 76, (uint32_t)ld->st.pool_unit);
    uint64_t epoch = ld->deliver_epoch, pos = ld->deliver_pos;
    image_pipe_position(ld, &epoch, &pos); /* batches decoded ahead are not handed out yet */
    fmt_st64(p + 80, epoch);
    fmt_st64(p + 88, pos);
    pthread_mutex_unlock(&ld->lock);
    fmt_st64(p + 96, fmt_checksum(p, 96));
    if (len != NULL) {
        *len = STATE_LEN;
    }
    return HDMLP_OK;
}

int hdmlp_config_set_resume(hdmlp_config *cfg, const void *state, size_t len)
{
    if (cfg == NULL) {
        return hd_err(HDMLP_E_INVAL, "config is NULL");
    }
    if (state == NULL || len == 0) {
        cfg->resume_len = 0; /* start from the beginning */
        return HDMLP_OK;
    }
    const uint8_t *p = state;
    if (len != STATE_LEN || memcmp(p, STATE_MAGIC, 8) != 0 || fmt_ld32(p + 12) != STATE_LEN) {
        return hd_err(HDMLP_E_INVAL, "resume: not a loader state (%zu bytes)", len);
    }
    if (fmt_ld64(p + 96) != fmt_checksum(p, 96)) {
        return hd_err(HDMLP_E_CORRUPT, "resume: the state's checksum does not match");
    }
    if (fmt_ld32(p + 8) != SAMPLER_ORDER_VERSION) {
        return hd_err(HDMLP_E_INVAL,
                      "resume: the state was saved with epoch order version %u, this loader "
                      "delivers version %u (a different order): start the epoch again",
                      fmt_ld32(p + 8), SAMPLER_ORDER_VERSION);
    }
    memcpy(cfg->resume, p, STATE_LEN);
    cfg->resume_len = STATE_LEN;
    return HDMLP_OK;
}

int hdmlp_state_position(const void *state, size_t len, uint64_t *epoch, uint64_t *position)
{
    const uint8_t *p = state;
    if (p == NULL || len != STATE_LEN || memcmp(p, STATE_MAGIC, 8) != 0 ||
        fmt_ld64(p + 96) != fmt_checksum(p, 96)) {
        return hd_err(HDMLP_E_INVAL, "state_position: not a valid loader state");
    }
    if (epoch != NULL) {
        *epoch = fmt_ld64(p + 80);
    }
    if (position != NULL) {
        *position = fmt_ld64(p + 88);
    }
    return HDMLP_OK;
}

#define SAME(field, mine, theirs)                                                              \
    do {                                                                                       \
        if ((uint64_t)(mine) != (uint64_t)(theirs)) {                                          \
            return hd_err(HDMLP_E_INVAL,                                                       \
                          "resume: the state was saved with %s %llu, this loader has %llu",    \
                          field, (unsigned long long)(theirs), (unsigned long long)(mine));    \
        }                                                                                      \
    } while (0)

static int check_fingerprint(const struct hdmlp_loader *ld, const uint8_t *p)
{
    SAME("dataset id", ld->ix->h.dataset_id, fmt_ld64(p + 16));
    SAME("sample count", ld->ix->h.n_samples, fmt_ld64(p + 24));
    SAME("chunk size", ld->ix->h.chunk_size, fmt_ld32(p + 32));
    SAME("world size", ld->world, fmt_ld32(p + 36));
    SAME("rank", ld->rank, fmt_ld32(p + 40));
    SAME("batch size", ld->cfg.batch, fmt_ld32(p + 44));
    SAME("seed", ld->cfg.seed, fmt_ld64(p + 48));
    SAME("abstract chunk count (memory budget or RAM cache)", sched_abstract_chunks(ld->sch),
         fmt_ld64(p + 56));
    SAME("slot byte cap (memory budget)", budget_sizing(&ld->budget)->slot_cap,
         fmt_ld64(p + 64));
    SAME("drop_last/policy/order flags", state_flags(&ld->cfg), fmt_ld32(p + 72));
    SAME("pool read unit (samples)", ld->st.pool_unit, fmt_ld32(p + 76));
    const uint64_t epoch = fmt_ld64(p + 80), pos = fmt_ld64(p + 88);
    if (pos >= ld->epoch_len && ld->epoch_len > 0) {
        return hd_err(HDMLP_E_INVAL, "resume: position %llu is past this rank's epoch of %llu",
                      (unsigned long long)pos, (unsigned long long)ld->epoch_len);
    }
    if (ld->cfg.epochs != 0 && epoch >= ld->cfg.epochs) {
        return hd_err(HDMLP_E_INVAL, "resume: the state is at epoch %llu of only %llu",
                      (unsigned long long)epoch, (unsigned long long)ld->cfg.epochs);
    }
    return HDMLP_OK;
}

/* A held sample: its chunk, in-chunk slot and the slot id holding it. */
typedef struct held {
    uint64_t chunk;
    uint32_t t;
    uint64_t id;
} held;

static int held_cmp(const void *a, const void *b)
{
    const held *x = a, *y = b;
    if (x->chunk != y->chunk) {
        return x->chunk < y->chunk ? -1 : 1;
    }
    return x->t < y->t ? -1 : (x->t > y->t);
}

/* Reads back the samples held by this rank's slots, one job per chunk (in the pool order a
 * chunk's held samples may sit in any of the rank's slots). Lock held. */
static int restore_slots(struct hdmlp_loader *ld)
{
    const uint32_t k = ld->ix->h.chunk_size;
    const uint64_t ids = sched_slot_count(ld->sch);
    held *h = hd_malloc((sched_slots_occupied(ld->sch) + 1) * sizeof(held));
    uint32_t *slots = hd_malloc(k * sizeof(uint32_t));
    if (h == NULL || slots == NULL) {
        hd_free(h);
        hd_free(slots);
        return hd_err(HDMLP_E_NOMEM, "resume: out of memory");
    }
    uint64_t n_held = 0;
    for (uint64_t id = 0; id < ids; id++) {
        const uint64_t x = sched_holder(ld->sch, id);
        if (x != UINT64_MAX && plan_owner(ld, id / k) == ld->rank) {
            h[n_held++] = (held){x / k, (uint32_t)(x % k), id};
        }
    }
    qsort(h, n_held, sizeof(held), held_cmp);
    int rc = HDMLP_OK;
    for (uint64_t i = 0; rc == HDMLP_OK && i < n_held;) {
        uint32_t n = 0;
        const uint64_t first = i;
        for (; i < n_held && h[i].chunk == h[first].chunk; i++) {
            slots[n++] = h[i].t;
        }
        ld_job *job = NULL;
        rc = plan_job(ld, h[first].chunk, NULL, slots, n, &job);
        if (rc != HDMLP_OK) {
            break;
        }
        for (uint32_t j = 0; j < n; j++) {
            ld->slot_buf[h[first + j].id] = job->samples[j];
        }
        ld->charged += job_bytes(job);
        ld->st.chunk_loads++;
        plan_count_reads(ld, job);
        plan_enqueue(ld, job);
    }
    hd_free(h);
    hd_free(slots);
    return rc;
}

int resume_apply(struct hdmlp_loader *ld)
{
    if (ld->cfg.resume_len == 0) {
        return HDMLP_OK;
    }
    const uint8_t *p = ld->cfg.resume;
    int rc = check_fingerprint(ld, p);
    if (rc != HDMLP_OK) {
        return rc;
    }
    const uint64_t epoch = fmt_ld64(p + 80), pos = fmt_ld64(p + 88);
    const uint64_t n = ld->ix->h.n_samples;
    const uint32_t k = ld->ix->h.chunk_size;
    pthread_mutex_lock(&ld->lock);
    ld->plan_epoch = ld->deliver_epoch = epoch;
    ld->deliver_pos = pos;
    if (pos > 0) {
        rc = sched_begin_epoch(ld->sch, epoch);
        sampler_init(&ld->order, ld->cfg.seed, epoch, n);
        ld->order_at = UINT64_MAX;
        /* Every rank saved after the same batches: global positions below pos × world were
         * consumed by their requesters. Replay this rank's decisions for them. */
        const uint64_t consumed = pos * ld->world < n ? pos * ld->world : n;
        for (uint64_t q = 0; rc == HDMLP_OK && q < consumed; q++) {
            const uint64_t x = plan_sample_at(ld, q);
            if (plan_owner(ld, sched_group_of_chunk(ld->sch, x / k)) != ld->rank) {
                continue;
            }
            sched_step st;
            rc = sched_request(ld->sch, x, &st);
        }
        ld->plan_started = 1;
        ld->plan_pos = consumed;
        if (rc == HDMLP_OK) {
            rc = restore_slots(ld);
        }
    }
    loader_note_peak(ld);
    pthread_mutex_unlock(&ld->lock);
    return rc;
}
