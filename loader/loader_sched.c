/* Scheduler: Brand chunk-group mapping, hits, fill-rate refills. Policy only, no I/O. */
#include "loader_sched.h"

#include "fmt_rng.h"

#include <string.h>

#define NIL UINT64_MAX

struct sched {
    const fmt_index *ix;
    sched_params p;
    uint64_t n;    /* samples */
    uint64_t c;    /* chunks */
    uint32_t k;    /* chunk size */
    uint64_t a;    /* abstract chunks == groups */
    uint32_t w;    /* 64-bit words per K-bit mask */
    uint64_t q, r; /* C = q*A + r: groups < r hold q+1 chunks */

    uint64_t *unfilled; /* C × w: bit t set while sample (c,t) exists and is unfilled */
    uint64_t *empty;    /* A × w: bit t set while slot (g,t) is empty */
    uint64_t *holder;   /* A × K: sample in slot or NIL */
    uint64_t *next;     /* N: list links of unfilled samples per location (g,t) */
    uint64_t *prev;
    uint64_t *head;  /* A × K */
    uint64_t *order; /* scratch: chunk order of a group */
    uint32_t *fill;  /* K: fill set of the last miss */
    uint64_t *size;  /* N: raw sizes, copied from the index for locality */
    uint64_t *held;  /* A × K: raw size of the sample in each slot */
    uint64_t occupied;
    uint64_t slot_bytes;
};

static uint64_t raw_size(const sched *s, uint64_t x) { return s->size[x]; }

uint64_t sched_sample_size(const sched *s, uint64_t x) { return s->size[x]; }

static uint64_t group_first_chunk(const sched *s, uint64_t g)
{
    return g * s->q + (g < s->r ? g : s->r);
}

uint64_t sched_group_of_chunk(const sched *s, uint64_t chunk)
{
    const uint64_t big = s->r * (s->q + 1);
    if (chunk < big) {
        return chunk / (s->q + 1);
    }
    return s->r + (chunk - big) / s->q;
}

static uint32_t chunk_samples(const sched *s, uint64_t c)
{
    const uint64_t first = c * s->k;
    const uint64_t left = s->n - first;
    return left < s->k ? (uint32_t)left : s->k;
}

int sched_create(const fmt_index *ix, const sched_params *p, sched **out)
{
    *out = NULL;
    const uint64_t c = ix->h.n_chunks;
    if (p->abstract_chunks == 0 || p->abstract_chunks > c) {
        return hd_err(HDMLP_E_INVAL, "scheduler: %llu abstract chunks for %llu chunks",
                      (unsigned long long)p->abstract_chunks, (unsigned long long)c);
    }
    sched *s = hd_calloc(1, sizeof(*s));
    if (s == NULL) {
        return hd_err(HDMLP_E_NOMEM, "scheduler: out of memory");
    }
    s->ix = ix;
    s->p = *p;
    s->n = ix->h.n_samples;
    s->c = c;
    s->k = ix->h.chunk_size;
    s->a = p->abstract_chunks;
    s->w = (s->k + 63) / 64;
    s->q = c / s->a;
    s->r = c % s->a;
    const uint64_t slots = s->a * s->k;
    s->unfilled = hd_calloc(c * s->w, sizeof(uint64_t));
    s->empty = hd_calloc(s->a * s->w, sizeof(uint64_t));
    s->holder = hd_malloc(slots * sizeof(uint64_t));
    s->next = hd_malloc(s->n * sizeof(uint64_t));
    s->prev = hd_malloc(s->n * sizeof(uint64_t));
    s->head = hd_malloc(slots * sizeof(uint64_t));
    s->order = hd_malloc((s->q + 1) * sizeof(uint64_t));
    s->fill = hd_malloc(s->k * sizeof(uint32_t));
    s->size = hd_malloc(s->n * sizeof(uint64_t));
    s->held = hd_calloc(slots, sizeof(uint64_t));
    if (!s->unfilled || !s->empty || !s->holder || !s->next || !s->prev || !s->head ||
        !s->order || !s->fill || !s->size || !s->held) {
        sched_free(s);
        return hd_err(HDMLP_E_NOMEM, "scheduler: out of memory for %llu samples",
                      (unsigned long long)s->n);
    }
    for (uint64_t i = 0; i < slots; i++) {
        s->holder[i] = NIL;
    }
    for (uint64_t i = 0; i < s->n; i++) {
        /* raw_length of sample record i (FORMAT.md: samples section, offset 16) */
        s->size[i] = fmt_ld64(ix->samples + i * FMT_SAMPLE_REC_LEN + 16);
    }
    for (uint64_t g = 0; g < s->a; g++) {
        for (uint32_t t = 0; t < s->k; t++) {
            s->empty[g * s->w + t / 64] |= 1ull << (t % 64);
        }
    }
    *out = s;
    return HDMLP_OK;
}

void sched_free(sched *s)
{
    if (s == NULL) {
        return;
    }
    hd_free(s->unfilled);
    hd_free(s->empty);
    hd_free(s->holder);
    hd_free(s->next);
    hd_free(s->prev);
    hd_free(s->head);
    hd_free(s->order);
    hd_free(s->fill);
    hd_free(s->size);
    hd_free(s->held);
    hd_free(s);
}

uint64_t sched_abstract_chunks(const sched *s) { return s->a; }

uint32_t sched_step_slots(const sched_step *st, uint32_t chunk_size, uint32_t *out)
{
    const uint32_t t_req = (uint32_t)(st->sample % chunk_size);
    uint32_t n = 0;
    int placed = 0;
    for (uint32_t j = 0; j < st->n_fill; j++) {
        if (!placed && t_req < st->fill_slot[j]) {
            out[n++] = t_req;
            placed = 1;
        }
        out[n++] = st->fill_slot[j];
    }
    if (!placed) {
        out[n++] = t_req;
    }
    return n;
}
uint64_t sched_slots_occupied(const sched *s) { return s->occupied; }
uint64_t sched_slot_bytes(const sched *s) { return s->slot_bytes; }

uint64_t sched_holder(const sched *s, uint64_t slot) { return s->holder[slot]; }

int sched_begin_epoch(sched *s, uint64_t epoch)
{
    if (s->occupied != 0) {
        return hd_err(HDMLP_E_STATE, "scheduler: %llu slots still valid at epoch start",
                      (unsigned long long)s->occupied);
    }
    fmt_rng rng;
    fmt_rng_seed(&rng, s->p.seed, ~epoch);
    for (uint64_t c = 0; c < s->c; c++) {
        uint64_t *u = s->unfilled + c * s->w;
        const uint32_t m = chunk_samples(s, c);
        memset(u, 0, s->w * sizeof(uint64_t));
        for (uint32_t t = 0; t < m; t++) {
            u[t / 64] |= 1ull << (t % 64);
        }
    }
    for (uint64_t g = 0; g < s->a; g++) {
        const uint64_t first = group_first_chunk(s, g);
        const uint64_t count = s->q + (g < s->r ? 1 : 0);
        for (uint64_t i = 0; i < count; i++) {
            s->order[i] = first + i;
        }
        fmt_rng_shuffle_u64(&rng, s->order, count);
        for (uint32_t t = 0; t < s->k; t++) {
            uint64_t last = NIL;
            uint64_t *headp = &s->head[g * s->k + t];
            *headp = NIL;
            for (uint64_t i = 0; i < count; i++) {
                const uint64_t c = s->order[i];
                if (t >= chunk_samples(s, c)) {
                    continue;
                }
                const uint64_t x = c * s->k + t;
                s->prev[x] = last;
                s->next[x] = NIL;
                if (last == NIL) {
                    *headp = x;
                } else {
                    s->next[last] = x;
                }
                last = x;
            }
        }
    }
    return HDMLP_OK;
}

static void unlink_sample(sched *s, uint64_t loc, uint64_t x)
{
    if (s->prev[x] == NIL) {
        s->head[loc] = s->next[x];
    } else {
        s->next[s->prev[x]] = s->next[x];
    }
    if (s->next[x] != NIL) {
        s->prev[s->next[x]] = s->prev[x];
    }
}

static uint32_t popcount_and(const uint64_t *a, const uint64_t *b, uint32_t w)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < w; i++) {
        n += (uint32_t)__builtin_popcountll(a[i] & b[i]);
    }
    return n;
}

/* The eligible chunk for a miss at location (g, t): the fill-rate maximum, first in the
 * epoch's random order among ties; or simply the first for policy random. */
static uint64_t choose_chunk(const sched *s, uint64_t g, uint64_t loc)
{
    const uint64_t *empty = s->empty + g * s->w;
    uint64_t best = s->head[loc];
    if (s->p.policy == HDMLP_POLICY_RANDOM) {
        return best / s->k;
    }
    uint32_t upper = 0;
    for (uint32_t i = 0; i < s->w; i++) {
        upper += (uint32_t)__builtin_popcountll(empty[i]);
    }
    uint32_t best_val = 0;
    for (uint64_t x = s->head[loc]; x != NIL; x = s->next[x]) {
        const uint64_t c = x / s->k;
        const uint32_t v = popcount_and(s->unfilled + c * s->w, empty, s->w);
        if (v > best_val) {
            best_val = v;
            best = x;
            if (v == upper) {
                break;
            }
        }
    }
    return best / s->k;
}

static void mark_filled(sched *s, uint64_t g, uint64_t c, uint32_t t)
{
    const uint64_t x = c * s->k + t;
    s->unfilled[c * s->w + t / 64] &= ~(1ull << (t % 64));
    unlink_sample(s, g * s->k + t, x);
}

/* Relaxed mode: the valid slot nearest t (cyclically), or, when the abstract chunk holds
 * none, the slot nearest t that still has an unfilled sample. */
static uint32_t relaxed_slot(const sched *s, uint64_t g, uint32_t t)
{
    const uint64_t *empty = s->empty + g * s->w;
    for (uint32_t d = 0; d < s->k; d++) {
        const uint32_t i = (t + d) % s->k;
        if ((empty[i / 64] & (1ull << (i % 64))) == 0) {
            return i;
        }
    }
    for (uint32_t d = 0; d < s->k; d++) {
        const uint32_t i = (t + d) % s->k;
        if (s->head[g * s->k + i] != NIL) {
            return i;
        }
    }
    return t;
}

int sched_request(sched *s, uint64_t x, sched_step *out)
{
    const uint64_t c = x / s->k;
    const uint64_t g = sched_group_of_chunk(s, c);
    const uint32_t t =
        s->p.relaxed ? relaxed_slot(s, g, (uint32_t)(x % s->k)) : (uint32_t)(x % s->k);
    const uint64_t loc = g * s->k + t;
    uint64_t *empty = s->empty + g * s->w;
    memset(out, 0, sizeof(*out));
    out->slot = loc;
    if (s->holder[loc] != NIL) {
        const uint64_t y = s->holder[loc];
        s->holder[loc] = NIL;
        empty[t / 64] |= 1ull << (t % 64);
        s->occupied--;
        s->slot_bytes -= s->held[loc];
        out->hit = 1;
        out->sample = y;
        return HDMLP_OK;
    }
    if (s->head[loc] == NIL) {
        return hd_err(HDMLP_E_STATE,
                      "scheduler: no unfilled sample left at slot %u of abstract chunk %llu "
                      "(sample %llu requested twice in an epoch?)",
                      t, (unsigned long long)g, (unsigned long long)x);
    }
    const uint64_t cc = choose_chunk(s, g, loc);
    const uint64_t *u = s->unfilled + cc * s->w;
    uint32_t fillable = 0;
    uint32_t n_fill = 0;
    for (uint32_t i = 0; i < s->k; i++) {
        const uint64_t bit = 1ull << (i % 64);
        if ((u[i / 64] & empty[i / 64] & bit) == 0) {
            continue;
        }
        fillable++;
        if (i == t) {
            continue;
        }
        const uint64_t y = cc * s->k + i;
        const uint64_t sz = raw_size(s, y);
        if (s->p.slot_cap_bytes != 0 && s->slot_bytes + sz > s->p.slot_cap_bytes) {
            continue;
        }
        s->fill[n_fill++] = i;
        s->slot_bytes += sz;
    }
    for (uint32_t j = 0; j < n_fill; j++) {
        const uint32_t i = s->fill[j];
        mark_filled(s, g, cc, i);
        s->holder[g * s->k + i] = cc * s->k + i;
        s->held[g * s->k + i] = raw_size(s, cc * s->k + i);
        empty[i / 64] &= ~(1ull << (i % 64));
    }
    s->occupied += n_fill;
    mark_filled(s, g, cc, t);
    out->hit = 0;
    out->sample = cc * s->k + t;
    out->chunk = cc;
    out->n_fill = n_fill;
    out->fill_slot = s->fill;
    out->fillable = fillable;
    return HDMLP_OK;
}
