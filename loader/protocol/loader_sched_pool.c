/* Scheduler, pool order: read units in a seeded order per epoch, uniform draws from a pool
 * held in the owner's slots (loader_sched.h). Policy only, no I/O. */
#include "loader_sched_private.h"

#include <string.h>

int pool_create(sched *s)
{
    s->parts = (s->k + s->p.pool_unit - 1) / s->p.pool_unit;
    uint64_t chunks = 0;
    for (uint64_t g = s->p.rank; g < s->a; g += s->p.world) {
        chunks += sched_group_chunks(s, g);
    }
    const uint64_t units = chunks * s->parts;
    s->units = sched_alloc(s, (units != 0 ? units : 1), sizeof(uint64_t), 0);
    s->live = sched_alloc(s, s->owned_slots, sizeof(uint64_t), 0);
    if (s->units == NULL || s->live == NULL) {
        return HDMLP_E_NOMEM; /* sched_create reports it */
    }
    return HDMLP_OK;
}

void pool_free(sched *s)
{
    hd_free(s->units);
    hd_free(s->live);
}

/* The epoch's units in a seeded order, and every owned slot free (the pool drained at the
 * end of the last epoch: sched_begin_epoch checked it). */
void pool_begin_epoch(sched *s, uint64_t epoch)
{
    fmt_rng rng;
    fmt_rng_seed(&rng, s->p.seed, ~epoch ^ 0x504f4f4cull);     /* "POOL" */
    fmt_rng_seed(&s->pick, s->p.seed, ~epoch ^ 0x44524157ull); /* "DRAW" */
    uint64_t n = 0;
    for (uint64_t g = s->p.rank; g < s->a; g += s->p.world) {
        const uint64_t first = sched_group_first_chunk(s, g);
        for (uint64_t c = first; c < first + sched_group_chunks(s, g); c++) {
            const uint32_t m = sched_chunk_samples(s, c);
            for (uint32_t part = 0; part * s->p.pool_unit < m; part++) {
                s->units[n++] = c * s->parts + part;
            }
        }
    }
    s->n_units = n;
    s->next_unit = 0;
    fmt_rng_shuffle_u64(&rng, s->units, n);
    s->n_live = 0;
    sched_free_all_owned(s);
}

/* Reads the next unit into the pool when it has room (or is empty). Returns 1 if it did, 0
 * if not, or the table source's error. */
static int pool_load(sched *s, sched_step *out)
{
    if (s->next_unit == s->n_units) {
        return 0;
    }
    const uint64_t u = s->units[s->next_unit];
    const uint64_t c = u / s->parts;
    const uint32_t t0 = (uint32_t)(u % s->parts) * s->p.pool_unit;
    const uint32_t m = sched_chunk_samples(s, c);
    const uint32_t t1 = t0 + s->p.pool_unit < m ? t0 + s->p.pool_unit : m;
    const int rc = sched_table(s, c);
    if (rc != HDMLP_OK) {
        return rc;
    }
    uint64_t bytes = 0;
    for (uint32_t t = t0; t < t1; t++) {
        bytes += loader_sample_charge(sched_raw(s, t));
    }
    const int room = s->n_free >= t1 - t0 &&
                     (s->p.slot_cap_bytes == 0 || s->slot_bytes + bytes <= s->p.slot_cap_bytes);
    if (s->n_live != 0 && !room) {
        return 0;
    }
    s->next_unit++;
    for (uint32_t t = t0; t < t1; t++) {
        const uint64_t id = s->free_ids[--s->n_free];
        const uint64_t x = c * s->k + t;
        s->slot[id] = (slot_rec){x, sched_raw(s, t)};
        s->live[s->n_live++] = id;
        s->load[t - t0] = t;
        s->place[t - t0] = id;
    }
    s->occupied += t1 - t0;
    s->slot_bytes += bytes;
    out->chunk = c;
    out->table = &s->tab;
    out->n_load = t1 - t0;
    out->load_slot = s->load;
    out->load_place = s->place;
    return 1;
}

int pool_request(sched *s, uint64_t x, sched_step *out)
{
    memset(out, 0, sizeof(*out));
    const uint64_t g = s->group[sched_chunk_of(s, x)];
    if (!sched_owns(s, g)) {
        return hd_err(HDMLP_E_STATE,
                      "scheduler: sample %llu belongs to rank %llu's pool, not %u's",
                      (unsigned long long)x, (unsigned long long)(g % s->p.world), s->p.rank);
    }
    const int loaded = pool_load(s, out);
    if (loaded < 0) {
        return loaded;
    }
    out->hit = !loaded;
    if (s->n_live == 0) {
        return hd_err(HDMLP_E_STATE,
                      "scheduler: the pool of rank %u is empty with no unit left to read "
                      "(more requests than samples in an epoch?)",
                      s->p.rank);
    }
    const uint64_t i = fmt_rng_below(&s->pick, s->n_live);
    const uint64_t id = s->live[i];
    s->live[i] = s->live[--s->n_live];
    s->free_ids[s->n_free++] = id;
    slot_rec *sl = &s->slot[id];
    out->sample = sl->sample;
    out->size = sl->raw;
    out->slot = id;
    s->occupied--;
    s->slot_bytes -= loader_sample_charge(sl->raw);
    sl->sample = NIL;
    return HDMLP_OK;
}
