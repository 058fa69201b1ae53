/* Scheduler, strict order with policy clairvoyant: reads keep the samples due soonest, in
 * any free slot of the owner (loader_sched.h). Policy only, no I/O. */
#include "loader_sampler.h"
#include "loader_sched_private.h"

#include <string.h>

/* Where held samples are: an open-addressing table from sample to slot id (linear probing,
 * deletion by backward shift), of twice the owner's slots, so at most half full: it grows
 * with the owner's slots, which the budget bounds (LOADER_SLOT_META), not with the
 * dataset. */
static uint64_t held_home(const sched *s, uint64_t x)
{
    return (uint64_t)(((u128)(x * 0x9e3779b97f4a7c15ull) * s->held_cap) >> 64);
}

static uint64_t held_next(const sched *s, uint64_t i)
{
    return i + 1 == s->held_cap ? 0 : i + 1;
}

/* How far entry j lies past home i, around the table. */
static uint64_t held_dist(const sched *s, uint64_t i, uint64_t j)
{
    return j >= i ? j - i : j + s->held_cap - i;
}

static uint64_t held_find(const sched *s, uint64_t x)
{
    for (uint64_t i = held_home(s, x);; i = held_next(s, i)) {
        if (s->held[i].sample == NIL || s->held[i].sample == x) {
            return s->held[i].sample == x ? s->held[i].id : NIL;
        }
    }
}

static void held_put(sched *s, uint64_t x, uint64_t id)
{
    uint64_t i = held_home(s, x);
    while (s->held[i].sample != NIL) {
        i = held_next(s, i);
    }
    s->held[i] = (held_rec){x, id};
}

static void held_del(sched *s, uint64_t x)
{
    uint64_t i = held_home(s, x);
    while (s->held[i].sample != x) {
        i = held_next(s, i);
    }
    /* Backward shift: move up each later entry of the run whose home lies at or before
     * the hole, so no lookup ever stops early at it. */
    for (uint64_t j = held_next(s, i); s->held[j].sample != NIL; j = held_next(s, j)) {
        if (held_dist(s, held_home(s, s->held[j].sample), j) >= held_dist(s, i, j)) {
            s->held[i] = s->held[j];
            i = j;
        }
    }
    s->held[i].sample = NIL;
}

int due_create(sched *s)
{
    s->held_cap = 2 * s->owned_slots + 2;
    s->due = sched_alloc(s, s->k, sizeof(uint64_t), 0);
    s->held = sched_alloc(s, s->held_cap, sizeof(held_rec), 0);
    s->elig = sched_alloc(s, (s->k + 1), sizeof(uint32_t), 0);
    if (s->due == NULL || s->held == NULL || s->elig == NULL) {
        return HDMLP_E_NOMEM; /* sched_create reports it */
    }
    for (uint64_t i = 0; i < s->held_cap; i++) {
        s->held[i].sample = NIL;
    }
    /* One owned slot stays free for the sample a miss delivers at once. */
    s->hold_cap = s->owned_slots - 1;
    uint64_t room = s->hold_cap;
    const uint64_t mean = loader_sample_charge(s->ix->h.raw_bytes / (s->n ? s->n : 1));
    if (s->p.slot_cap_bytes != 0 && s->p.slot_cap_bytes / mean < room) {
        room = s->p.slot_cap_bytes / mean;
    }
    /* What the owner holds lasts about twice as many of its own requests when reads keep
     * samples due within the horizon. 1.75 times its room was fastest in the benchmark cell
     * (regime A, 8,000 samples of ~110 KB, K = 64, 25 % memory: cold epochs of 6.9-7.0 s
     * at 1.75, 7.5-7.8 s at 1.5, 7.2-8.4 s at 2, 8.2 s at 1.25, fewer bytes and reads at
     * 1.75 than at 1.5). Positions count every rank's requests. */
    s->horizon = (room + room * 3 / 4) * s->p.world;
    return HDMLP_OK;
}

void due_free(sched *s)
{
    hd_free(s->due);
    hd_free(s->held);
    hd_free(s->elig);
}

void due_begin_epoch(sched *s, uint64_t epoch)
{
    sampler_init(&s->due_order, s->p.seed, epoch, s->n);
    sched_mark_all_unfilled(s);
    sched_free_all_owned(s);
}

static int unfilled(const sched *s, uint64_t c, uint32_t t)
{
    return (s->unfilled[c * s->w + t / 64] >> (t % 64)) & 1;
}

/* Stored offset (in the chunk) and end of in-chunk slot t of the miss's chunk, from its
 * table (s->tab). */
static uint64_t stored_off(const sched *s, uint32_t t) { return fmt_table_offset(&s->tab, t); }

static uint64_t stored_end(const sched *s, uint32_t t)
{
    return fmt_table_offset(&s->tab, t) + fmt_table_stored_len(&s->tab, t);
}

/* The window [*lo, *hi] of e (n increasing in-chunk slots of the miss's chunk, t among them
 * at index it) that holds t and the most others within `width` stored bytes; ties:
 * shortest, then first. */
static void best_window(const sched *s, const uint32_t *e, uint32_t n, uint32_t it,
                        uint64_t width, uint32_t *lo, uint32_t *hi)
{
    const uint64_t end_t = stored_end(s, e[it]);
    uint32_t b = it, best_n = 0;
    uint64_t best_span = UINT64_MAX;
    *lo = *hi = it;
    for (uint32_t a = 0; a <= it; a++) {
        const uint64_t start = stored_off(s, e[a]);
        if (end_t - start > width) {
            continue; /* the window could not hold t */
        }
        while (b + 1 < n && stored_end(s, e[b + 1]) - start <= width) {
            b++;
        }
        const uint32_t count = b - a + 1;
        const uint64_t span = stored_end(s, e[b]) - start;
        if (count > best_n || (count == best_n && span < best_span)) {
            best_n = count;
            best_span = span;
            *lo = a;
            *hi = b;
        }
    }
}

/* Sorts the first n of v (in-chunk slots of the miss's chunk, candidates whose positions
 * due_request noted in s->due) by position in the epoch. */
static void sort_by_due(const sched *s, uint32_t *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        const uint32_t t = v[i];
        const uint64_t d = s->due[t];
        uint32_t j = i;
        for (; j > 0 && s->due[v[j - 1]] > d; j--) {
            v[j] = v[j - 1];
        }
        v[j] = t;
    }
}

/* Keeps sample x of raw size raw in slot id. */
static void hold(sched *s, uint64_t x, uint64_t raw, uint64_t id)
{
    s->slot[id] = (slot_rec){x, raw};
    held_put(s, x, id);
    s->occupied++;
    s->slot_bytes += loader_sample_charge(raw);
}

static void release(sched *s, uint64_t x, uint64_t id, sched_step *out)
{
    out->sample = x;
    out->size = s->slot[id].raw;
    out->slot = id;
    s->occupied--;
    s->slot_bytes -= loader_sample_charge(s->slot[id].raw);
    s->slot[id].sample = NIL;
    held_del(s, x);
    s->free_ids[s->n_free++] = id;
}

int due_request(sched *s, uint64_t x, sched_step *out)
{
    memset(out, 0, sizeof(*out));
    const uint64_t c = sched_chunk_of(s, x);
    const uint32_t t = (uint32_t)(x - c * s->k);
    if (!sched_owns(s, s->group[c])) {
        return hd_err(HDMLP_E_STATE, "scheduler: sample %llu is not rank %u's",
                      (unsigned long long)x, s->p.rank);
    }
    const uint64_t at = held_find(s, x);
    if (at != NIL) {
        out->hit = 1;
        release(s, x, at, out);
        return HDMLP_OK;
    }
    if (!unfilled(s, c, t)) {
        return hd_err(
            HDMLP_E_STATE,
            "scheduler: sample %llu was already delivered this epoch (requested twice?)",
            (unsigned long long)x);
    }
    const int rc = sched_table(s, c);
    if (rc != HDMLP_OK) {
        return rc;
    }
    /* Candidates: t and the chunk's samples due within the horizon, unread this epoch. */
    const uint64_t until = sampler_pos(&s->due_order, x) + s->horizon;
    const uint32_t m = sched_chunk_samples(s, c);
    uint32_t n = 0, it = 0;
    for (uint32_t i = 0; i < m; i++) {
        if (i == t) {
            it = n;
            s->elig[n++] = i;
        } else if (unfilled(s, c, i)) {
            s->due[i] = sampler_pos(&s->due_order, c * s->k + i);
            if (s->due[i] <= until) {
                s->elig[n++] = i;
            }
        }
    }
    const uint64_t width = s->p.window_bytes != 0 ? s->p.window_bytes : UINT64_MAX;
    uint32_t lo, hi;
    best_window(s, s->elig, n, it, width, &lo, &hi);
    /* Keep the window's others, soonest first, while the slots and the byte cap allow. */
    uint32_t *keep = s->elig + lo;
    uint32_t n_keep = 0;
    for (uint32_t i = lo; i <= hi; i++) {
        if (i != it) {
            keep[n_keep++] = s->elig[i];
        }
    }
    out->fillable = n_keep + 1;
    sort_by_due(s, keep, n_keep);
    uint32_t kept = 0;
    for (; kept < n_keep && s->occupied < s->hold_cap; kept++) {
        const uint64_t raw = sched_raw(s, keep[kept]);
        if (s->p.slot_cap_bytes != 0 &&
            s->slot_bytes + loader_sample_charge(raw) > s->p.slot_cap_bytes) {
            break;
        }
        hold(s, c * s->k + keep[kept], raw, s->free_ids[--s->n_free]);
    }
    /* What is read, in slot order: the kept samples and t, each to its slot. */
    keep[kept] = t;
    n_keep = kept + 1;
    for (uint32_t i = 1; i < n_keep; i++) { /* insertion sort by slot */
        const uint32_t v = keep[i];
        uint32_t j = i;
        for (; j > 0 && keep[j - 1] > v; j--) {
            keep[j] = keep[j - 1];
        }
        keep[j] = v;
    }
    const uint64_t id = s->free_ids[--s->n_free]; /* one stays free (hold_cap) */
    hold(s, x, sched_raw(s, t), id);
    for (uint32_t i = 0; i < n_keep; i++) {
        s->load[i] = keep[i];
        s->place[i] = held_find(s, c * s->k + keep[i]);
        s->unfilled[c * s->w + keep[i] / 64] &= ~(1ull << (keep[i] % 64));
    }
    release(s, x, id, out);
    out->hit = 0;
    out->chunk = c;
    out->table = &s->tab;
    out->n_load = n_keep;
    out->load_slot = s->load;
    out->load_place = s->place;
    out->n_fill = kept;
    return HDMLP_OK;
}
