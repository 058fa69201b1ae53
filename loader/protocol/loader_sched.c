/* Scheduler: Brand chunk-group mapping, hits, fill-rate refills. Policy only, no I/O. */
#include "loader_sched_private.h"

#include <string.h>

uint64_t sched_group_of_chunk(const sched *s, uint64_t chunk) { return s->group[chunk]; }

void sched_prefetch(const sched *s, uint64_t x)
{
    if (s->empty == NULL) {
        return; /* the pool and the clairvoyant policy: a request touches one or two lines */
    }
    const uint64_t c = sched_chunk_of(s, x);
    const uint64_t g = s->group[c];
    const uint64_t first = sched_group_first_chunk(s, g);
    __builtin_prefetch(&s->slot[g * s->k + (x - c * s->k)], 1);
    __builtin_prefetch(&s->empty[g * s->w], 1);
    __builtin_prefetch(&s->ord[first]);
    __builtin_prefetch(&s->unfilled[first * s->w], 1);
}

static bool cpu_popcnt(void);

int sched_create(const fmt_index *ix, const sched_params *p, sched **out)
{
    *out = NULL;
    const uint64_t c = ix->h.n_chunks;
    if (p->abstract_chunks == 0 || p->abstract_chunks > c) {
        return hd_err(HDMLP_E_INVAL, "scheduler: %llu abstract chunks for %llu chunks",
                      (unsigned long long)p->abstract_chunks, (unsigned long long)c);
    }
    if (p->order != HDMLP_ORDER_STRICT && p->order != HDMLP_ORDER_POOL) {
        return hd_err(HDMLP_E_INVAL, "scheduler: unknown order %d", (int)p->order);
    }
    const int owner = p->order == HDMLP_ORDER_POOL || p->policy == HDMLP_POLICY_CLAIRVOYANT;
    if ((p->order == HDMLP_ORDER_POOL &&
         (p->pool_unit == 0 || p->pool_unit > ix->h.chunk_size)) ||
        (owner &&
         (p->world == 0 || p->rank >= p->world || p->abstract_chunks % p->world != 0))) {
        return hd_err(HDMLP_E_INVAL,
                      "scheduler: pool unit %u (chunk size %u), rank %u of %u, %llu groups",
                      p->pool_unit, ix->h.chunk_size, p->rank, p->world,
                      (unsigned long long)p->abstract_chunks);
    }
    if (p->tables.get == NULL) {
        return hd_err(HDMLP_E_INVAL, "scheduler: no sample table source");
    }
    if (c > UINT32_MAX) {
        return hd_err(HDMLP_E_RANGE, "scheduler: %llu chunks (at most 2^32 - 1)",
                      (unsigned long long)c);
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
    s->popcnt = cpu_popcnt();
    s->q = c / s->a;
    s->r = c % s->a;
    /* Lemire's M = floor((2^64 - 1) / k) + 1 gives x / k exactly for every 32-bit x. */
    s->kmul = s->n <= UINT32_MAX ? UINT64_MAX / s->k + 1 : 0;
    const uint64_t slots = s->a * s->k;
    s->slot = sched_alloc(s, slots, sizeof(slot_rec), 0);
    s->group = sched_alloc(s, c, sizeof(uint32_t), 0);
    s->load = sched_alloc(s, s->k, sizeof(uint32_t), 0);
    s->place = sched_alloc(s, s->k, sizeof(uint64_t), 0);
    /* A table cache entry for each owned group when the source fills buffers, or as many
     * as sizing gave room for (loader_table_entries). */
    const uint32_t world = p->world > 1 ? p->world : 1, rank = p->world > 1 ? p->rank : 0;
    uint64_t owned = (s->a + world - 1 - rank) / world;
    owned = owned > 0 ? owned : 1;
    owned = p->table_entries != 0 && p->table_entries < owned ? p->table_entries : owned;
    s->n_tabs = p->tables.scratch != 0 ? (uint32_t)owned : 0;
    s->tab_buf = s->n_tabs ? sched_alloc(s, s->n_tabs, p->tables.scratch, 1) : NULL;
    s->tab_of = s->n_tabs ? sched_alloc(s, s->n_tabs, sizeof(fmt_table), 0) : NULL;
    s->tab_chunk = s->n_tabs ? sched_alloc(s, s->n_tabs, sizeof(uint64_t), 0) : NULL;
    s->tab_used = s->n_tabs ? sched_alloc(s, s->n_tabs, sizeof(uint64_t), 1) : NULL;
    for (uint32_t i = 0; s->tab_chunk != NULL && i < s->n_tabs; i++) {
        s->tab_chunk[i] = UINT64_MAX;
    }
    int ok = s->slot && s->group && s->load && s->place &&
             (s->n_tabs == 0 || (s->tab_buf && s->tab_of && s->tab_chunk && s->tab_used));
    /* Each order keeps only its own state: the strict order the unfilled bits, the Brand
     * refill (strict, not clairvoyant) its masks, counts and chunk orders, the pool and the
     * clairvoyant policy a stack of the owner's free slots and their own (*_create). */
    const int brand = p->order == HDMLP_ORDER_STRICT && !owner;
    if (p->order == HDMLP_ORDER_STRICT) {
        s->unfilled = sched_alloc(s, c * s->w, sizeof(uint64_t), 1);
        ok = ok && s->unfilled;
    }
    if (brand) {
        s->empty = sched_alloc(s, s->a * s->w, sizeof(uint64_t), 1);
        s->left = sched_alloc(s, slots, sizeof(uint32_t), 1);
        s->ord = sched_alloc(s, c, sizeof(uint32_t), 0);
        s->order = sched_alloc(s, (s->q + 1), sizeof(uint64_t), 0);
        s->fill = sched_alloc(s, s->k, sizeof(uint32_t), 0);
        ok = ok && s->empty && s->left && s->ord && s->order && s->fill;
    }
    if (owner) {
        s->owned_slots = (s->a / p->world) * s->k;
        s->free_ids = sched_alloc(s, s->owned_slots, sizeof(uint64_t), 0);
        ok = ok && s->free_ids;
    }
    if (!ok || (p->order == HDMLP_ORDER_POOL && pool_create(s) != HDMLP_OK) ||
        (p->order == HDMLP_ORDER_STRICT && owner && due_create(s) != HDMLP_OK)) {
        sched_free(s);
        return hd_err(HDMLP_E_NOMEM, "scheduler: out of memory for %llu samples",
                      (unsigned long long)s->n);
    }
    for (uint64_t i = 0; i < slots; i++) {
        s->slot[i] = (slot_rec){NIL, 0};
    }
    for (uint64_t g = 0; g < s->a; g++) {
        const uint64_t first = sched_group_first_chunk(s, g);
        for (uint64_t i = 0; i < sched_group_chunks(s, g); i++) {
            s->group[first + i] = (uint32_t)g;
        }
        for (uint32_t t = 0; brand && t < s->k; t++) {
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
    hd_free(s->slot);
    hd_free(s->left);
    hd_free(s->group);
    hd_free(s->ord);
    hd_free(s->order);
    hd_free(s->fill);
    hd_free(s->load);
    hd_free(s->place);
    for (uint32_t i = 0; s->tab_buf != NULL && s->p.tables.drop != NULL && i < s->n_tabs; i++) {
        s->p.tables.drop(s->p.tables.ctx, s->tab_buf + (size_t)i * s->p.tables.scratch);
    }
    hd_free(s->tab_buf);
    hd_free(s->tab_of);
    hd_free(s->tab_chunk);
    hd_free(s->tab_used);
    pool_free(s);
    due_free(s);
    hd_free(s->free_ids);
    hd_free(s);
}

uint64_t sched_abstract_chunks(const sched *s) { return s->a; }

hdmlp_refill sched_load_mode(const sched *s, uint64_t chunk, uint32_t n,
                             hdmlp_refill configured)
{
    if (s->p.order != HDMLP_ORDER_POOL) {
        return configured;
    }
    return n == sched_chunk_samples(s, chunk) ? HDMLP_REFILL_WHOLE : HDMLP_REFILL_RANGES;
}

uint64_t sched_slot_count(const sched *s) { return s->a * s->k; }

uint64_t sched_state_bytes(const sched *s) { return s->state_bytes; }

uint64_t sched_slots_occupied(const sched *s) { return s->occupied; }
uint64_t sched_slot_bytes(const sched *s) { return s->slot_bytes; }

uint64_t sched_holder(const sched *s, uint64_t slot) { return s->slot[slot].sample; }

int sched_begin_epoch(sched *s, uint64_t epoch)
{
    if (s->occupied != 0) {
        return hd_err(HDMLP_E_STATE, "scheduler: %llu slots still valid at epoch start",
                      (unsigned long long)s->occupied);
    }
    if (s->p.order == HDMLP_ORDER_POOL) {
        pool_begin_epoch(s, epoch);
        return HDMLP_OK;
    }
    if (s->p.policy == HDMLP_POLICY_CLAIRVOYANT) {
        due_begin_epoch(s, epoch);
        return HDMLP_OK;
    }
    fmt_rng rng;
    fmt_rng_seed(&rng, s->p.seed, ~epoch);
    fmt_rng_seed(&s->pick, s->p.seed, ~epoch ^ 0x5049434bull); /* "PICK" */
    sched_mark_all_unfilled(s);
    for (uint64_t g = 0; g < s->a; g++) {
        const uint64_t first = sched_group_first_chunk(s, g);
        const uint64_t count = sched_group_chunks(s, g);
        for (uint64_t i = 0; i < count; i++) {
            s->order[i] = first + i;
        }
        fmt_rng_shuffle_u64(&rng, s->order, count);
        for (uint64_t i = 0; i < count; i++) {
            s->ord[first + i] = (uint32_t)s->order[i];
        }
        uint32_t *left = s->left + g * s->k;
        for (uint32_t t = 0; t < s->k; t++) {
            left[t] = (uint32_t)count;
        }
        /* Only the dataset's last chunk can be short. */
        const uint32_t m = sched_chunk_samples(s, first + count - 1);
        for (uint32_t t = m; t < s->k; t++) {
            left[t]--;
        }
    }
    return HDMLP_OK;
}

/* Bit counts of a miss's bitmaps (choose_chunk: K/64 words for each chunk of a group), the
 * scheduler's hottest loop at large K: a[i] & b[i] (b NULL: a[i]) over s->w words. With
 * the CPU's POPCNT where it has one (s->popcnt, asked at create: x86-64's baseline lacks
 * it, and the compiler's portable count took a third of a forecast's time at K = 15,625);
 * chosen by a branch, not an ifunc, whose resolver would run before a sanitizer's runtime
 * is up. */
static inline __attribute__((always_inline)) uint32_t count_bits(const uint64_t *a,
                                                                 const uint64_t *b, uint32_t w)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < w; i++) {
        n += (uint32_t)__builtin_popcountll(b != NULL ? a[i] & b[i] : a[i]);
    }
    return n;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define SCHED_HAVE_POPCNT 1
__attribute__((target("popcnt"))) static uint32_t
count_bits_popcnt(const uint64_t *a, const uint64_t *b, uint32_t w)
{
    return count_bits(a, b, w);
}
#else
#define SCHED_HAVE_POPCNT 0
#endif

static bool cpu_popcnt(void)
{
#if SCHED_HAVE_POPCNT
    __builtin_cpu_init();
    return __builtin_cpu_supports("popcnt") != 0;
#else
    return false;
#endif
}

static uint32_t sched_count(const sched *s, const uint64_t *a, const uint64_t *b)
{
#if SCHED_HAVE_POPCNT
    if (s->popcnt) {
        return count_bits_popcnt(a, b, s->w);
    }
#endif
    return count_bits(a, b, s->w);
}

static int is_unfilled(const sched *s, uint64_t c, uint32_t t)
{
    return (s->unfilled[c * s->w + t / 64] >> (t % 64)) & 1;
}

/* Policy random: a uniform draw among the chunks of the group whose slot t is unfilled. */
static uint64_t random_chunk(sched *s, const uint32_t *ord, uint64_t count, uint32_t t)
{
    uint64_t m = 0;
    for (uint64_t i = 0; i < count; i++) {
        m += (uint64_t)is_unfilled(s, ord[i], t);
    }
    uint64_t r = fmt_rng_below(&s->pick, m);
    for (uint64_t i = 0;; i++) {
        if (is_unfilled(s, ord[i], t) && r-- == 0) {
            return ord[i];
        }
    }
}

/* The eligible chunk for a miss at slot t of group g: the fill-rate maximum, first in the
 * epoch's random order among ties; or a uniform draw for policy random. The group's chunks
 * are consecutive, so their order and masks are a few cache lines. */
static uint64_t choose_chunk(sched *s, uint64_t g, uint32_t t)
{
    const uint64_t *empty = s->empty + g * s->w;
    const uint32_t *ord = s->ord + sched_group_first_chunk(s, g);
    const uint64_t count = sched_group_chunks(s, g);
    if (s->p.policy == HDMLP_POLICY_RANDOM) {
        return random_chunk(s, ord, count, t);
    }
    uint64_t i = 0;
    while (!is_unfilled(s, ord[i], t)) {
        i++; /* the caller checked that one exists */
    }
    uint64_t best = ord[i];
    const uint32_t upper = sched_count(s, empty, NULL);
    uint32_t best_val = 0;
    for (; i < count; i++) {
        const uint64_t c = ord[i];
        if (!is_unfilled(s, c, t)) {
            continue;
        }
        const uint32_t v = sched_count(s, s->unfilled + c * s->w, empty);
        if (v > best_val) {
            best_val = v;
            best = c;
            if (v == upper) {
                break;
            }
        }
    }
    return best;
}

static void mark_filled(sched *s, uint64_t g, uint64_t c, uint32_t t)
{
    s->unfilled[c * s->w + t / 64] &= ~(1ull << (t % 64));
    s->left[g * s->k + t]--;
}

int sched_request(sched *s, uint64_t x, sched_step *out)
{
    if (s->p.order == HDMLP_ORDER_POOL) {
        return pool_request(s, x, out);
    }
    if (s->p.policy == HDMLP_POLICY_CLAIRVOYANT) {
        return due_request(s, x, out);
    }
    const uint64_t c = sched_chunk_of(s, x);
    const uint64_t g = s->group[c];
    const uint32_t t = (uint32_t)(x - c * s->k);
    const uint64_t loc = g * s->k + t;
    uint64_t *empty = s->empty + g * s->w;
    slot_rec *sl = &s->slot[loc];
    memset(out, 0, sizeof(*out));
    out->slot = loc;
    if (sl->sample != NIL) {
        out->hit = 1;
        out->sample = sl->sample;
        out->size = sl->raw;
        sl->sample = NIL;
        empty[t / 64] |= 1ull << (t % 64);
        s->occupied--;
        s->slot_bytes -= loader_sample_charge(sl->raw);
        return HDMLP_OK;
    }
    if (s->left[loc] == 0) {
        return hd_err(HDMLP_E_STATE,
                      "scheduler: no unfilled sample left at slot %u of abstract chunk %llu "
                      "(sample %llu requested twice in an epoch?)",
                      t, (unsigned long long)g, (unsigned long long)x);
    }
    const uint64_t cc = choose_chunk(s, g, t);
    const int rc = sched_table(s, cc);
    if (rc != HDMLP_OK) {
        return rc;
    }
    uint64_t *u = s->unfilled + cc * s->w;
    const uint64_t base = cc * s->k;
    slot_rec *gs = s->slot + g * s->k;
    uint32_t *left = s->left + g * s->k;
    uint32_t fillable = 0;
    uint32_t n_fill = 0;
    for (uint32_t wi = 0; wi < s->w; wi++) {
        for (uint64_t m = u[wi] & empty[wi]; m != 0; m &= m - 1) {
            fillable++;
            const uint32_t i = wi * 64 + (uint32_t)__builtin_ctzll(m);
            if (i == t) {
                continue;
            }
            const uint64_t sz = sched_raw(s, i);
            const uint64_t charge = loader_sample_charge(sz);
            if (s->p.slot_cap_bytes != 0 && s->slot_bytes + charge > s->p.slot_cap_bytes) {
                continue;
            }
            s->fill[n_fill++] = i;
            s->slot_bytes += charge;
            gs[i] = (slot_rec){base + i, sz};
            left[i]--;
        }
    }
    for (uint32_t j = 0; j < n_fill; j++) {
        const uint32_t i = s->fill[j];
        u[i / 64] &= ~(1ull << (i % 64));
        empty[i / 64] &= ~(1ull << (i % 64));
    }
    s->occupied += n_fill;
    mark_filled(s, g, cc, t);
    out->hit = 0;
    out->sample = base + t;
    out->size = sched_raw(s, t);
    out->chunk = cc;
    out->table = &s->tab;
    out->n_fill = n_fill;
    out->fillable = fillable;
    /* What is read: the fill set with the delivered slot merged in, each to its slot. */
    uint32_t n = 0;
    int placed = 0;
    for (uint32_t j = 0; j < n_fill; j++) {
        if (!placed && t < s->fill[j]) {
            s->load[n++] = t;
            placed = 1;
        }
        s->load[n++] = s->fill[j];
    }
    if (!placed) {
        s->load[n++] = t;
    }
    for (uint32_t j = 0; j < n; j++) {
        s->place[j] = g * s->k + s->load[j];
    }
    out->n_load = n;
    out->load_slot = s->load;
    out->load_place = s->place;
    return HDMLP_OK;
}
