/* The scheduler's state, shared by its files: loader_sched.c (the Brand refill and the
 * dispatch), loader_sched_pool.c (the pool order), loader_sched_due.c (the clairvoyant
 * policy) and loader_sched_slots.c (what all three share, below them). Nothing else
 * includes it. */
#ifndef HDMLP_LOADER_SCHED_PRIVATE_H
#define HDMLP_LOADER_SCHED_PRIVATE_H

#include "fmt_rng.h"
#include "loader_sampler.h"
#include "loader_sched.h"

#define NIL UINT64_MAX

__extension__ typedef unsigned __int128 u128;

typedef struct slot_rec {
    uint64_t sample; /* held sample or NIL */
    uint64_t raw;    /* its raw size */
} slot_rec;

/* A held sample and the slot id holding it (the clairvoyant policy's table). */
typedef struct held_rec {
    uint64_t sample; /* NIL: an empty entry */
    uint64_t id;
} held_rec;

/* Per-request state is a few random accesses: the chunk's group (a table), the slot record,
 * the group's masks and its chunk order, all laid out so one location touches few lines. */
struct sched {
    const fmt_index *ix;
    sched_params p;
    fmt_table tab; /* the last miss's chunk's sample table (p.tables), or rec NULL */
    /* When the source reads tables into buffers (p.tables.scratch > 0), the tables of the
     * last n_tabs chunks missed (one for each owned group: a group's misses mostly return
     * to its current chunk), least recently used replaced: entry i holds chunk tab_chunk[i]
     * (UINT64_MAX when empty) in scratch bytes at tab_buf + i × scratch. */
    uint8_t *tab_buf;
    fmt_table *tab_of;   /* n_tabs views */
    uint64_t *tab_chunk; /* n_tabs */
    uint64_t *tab_used;  /* n_tabs: the tick of each entry's last use */
    uint32_t n_tabs;
    uint64_t tab_tick;
    uint64_t n;           /* samples */
    uint64_t c;           /* chunks */
    uint32_t k;           /* chunk size */
    uint64_t a;           /* abstract chunks == groups */
    uint32_t w;           /* 64-bit words per K-bit mask */
    bool popcnt;          /* the CPU counts bits in one instruction (loader_sched.c) */
    uint64_t q, r;        /* C = q*A + r: groups < r hold q+1 chunks */
    uint64_t kmul;        /* x / k as a multiply (exact for x < 2^32), 0 when n >= 2^32 */
    uint64_t state_bytes; /* of the arrays below (sched_alloc) */

    slot_rec *slot;  /* A × K */
    uint32_t *group; /* C: group of each chunk */
    uint64_t occupied;
    uint64_t slot_bytes;
    fmt_rng pick; /* policy random, or pool: the epoch's draws */
    /* what the last step read: in-chunk slots and where each sample went (K each) */
    uint32_t *load;
    uint64_t *place;

    /* strict (both policies) */
    uint64_t *unfilled; /* C × w: bit t set while sample (c,t) exists and is unfilled */
    /* the Brand refill (strict, fill-rate or random); NULL otherwise */
    uint64_t *empty; /* A × w: bit t set while slot (g,t) is empty */
    uint32_t *left;  /* A × K: unfilled samples at location (g,t) this epoch */
    uint32_t *ord;   /* C: each group's chunks in the epoch's seeded order, in place */
    uint64_t *order; /* scratch: chunk order of a group */
    uint32_t *fill;  /* K: fill set of the last miss */

    /* pool (loader_sched_pool.c) */
    uint64_t *units;    /* the owner's read units (chunk * parts + part), the epoch's order */
    uint64_t n_units;   /* of them */
    uint64_t next_unit; /* the next to read this epoch */
    uint32_t parts;     /* units per chunk: ceil(K / pool_unit) */
    uint64_t *live;     /* the pool: occupied slot ids, n_live of them */
    uint64_t n_live;
    uint64_t *free_ids; /* a stack of free slot ids of the owner's groups, n_free of them */
    uint64_t n_free;
    uint64_t owned_slots; /* slots of the owner's groups */

    /* strict, policy clairvoyant (loader_sched_due.c); free_ids above holds its free slots */
    sampler due_order; /* the epoch's order: a sample's position is sampler_pos */
    uint64_t *due;     /* K: positions of the last miss's chunk's candidates, by slot */
    held_rec *held;    /* held samples' slot ids, a hash table (loader_sched_due.c) */
    uint64_t held_cap; /* its entries: twice the owned slots, and two */
    uint64_t horizon;  /* positions ahead whose samples a read may keep */
    uint64_t hold_cap; /* samples it may keep (one owned slot stays free for the delivered) */
    uint32_t *elig;    /* K: scratch, in-chunk slots a read may keep */
};

static inline uint64_t sched_group_first_chunk(const sched *s, uint64_t g)
{
    return g * s->q + (g < s->r ? g : s->r);
}

static inline uint64_t sched_group_chunks(const sched *s, uint64_t g)
{
    return s->q + (g < s->r ? 1 : 0);
}

static inline uint32_t sched_chunk_samples(const sched *s, uint64_t c)
{
    const uint64_t first = c * s->k;
    const uint64_t left = s->n - first;
    return left < s->k ? (uint32_t)left : s->k;
}

/* Makes s->tab chunk c's sample table (a miss's first step; kept while c is the chunk read,
 * so the source is asked once a miss). The source's error, with s->tab unset. */
static inline int sched_table(sched *s, uint64_t c)
{
    if (s->tab.rec != NULL && s->tab.chunk == c) {
        return HDMLP_OK;
    }
    if (s->n_tabs == 0) { /* views into memory the source holds */
        const int rc = fmt_tables_get(&s->p.tables, c, NULL, 0, &s->tab);
        if (rc != HDMLP_OK) {
            s->tab.rec = NULL;
        }
        return rc;
    }
    uint32_t at = 0;
    for (uint32_t i = 0; i < s->n_tabs; i++) {
        if (s->tab_chunk[i] == c) {
            at = i;
            goto found;
        }
        at = s->tab_used[i] < s->tab_used[at] ? i : at;
    }
    {
        const size_t scratch = s->p.tables.scratch;
        const int rc = fmt_tables_get(&s->p.tables, c, s->tab_buf + (size_t)at * scratch,
                                      scratch, &s->tab_of[at]);
        if (rc != HDMLP_OK) {
            s->tab_chunk[at] = UINT64_MAX;
            s->tab.rec = NULL;
            return rc;
        }
        s->tab_chunk[at] = c;
    }
found:
    s->tab_used[at] = ++s->tab_tick;
    s->tab = s->tab_of[at];
    return HDMLP_OK;
}

/* Raw size of slot t of the chunk in s->tab (its record's raw_length), read where the table
 * is rather than copied (8 bytes a sample less to hold). */
static inline uint64_t sched_raw(const sched *s, uint32_t t)
{
    return fmt_table_raw_len(&s->tab, t);
}

static inline int sched_owns(const sched *s, uint64_t g) { return g % s->p.world == s->p.rank; }

/* An allocation of the scheduler's state (hd_malloc, or hd_calloc with zero set), counted
 * in state_bytes (sched_state_bytes). */
static inline void *sched_alloc(sched *s, uint64_t n, size_t size, int zero)
{
    void *p = zero ? hd_calloc(n, size) : hd_malloc(n * size);
    if (p != NULL) {
        s->state_bytes += n * size;
    }
    return p;
}

/* loader_sched_slots.c */
/* Sets every existing sample's unfilled bit (an epoch's start). */
void sched_mark_all_unfilled(sched *s);

/* Fills free_ids with every slot id of the owner's groups, popping in increasing order. */
void sched_free_all_owned(sched *s);

/* loader_sched_due.c */
int due_create(sched *s);
void due_free(sched *s);
void due_begin_epoch(sched *s, uint64_t epoch);
int due_request(sched *s, uint64_t x, sched_step *out);

/* loader_sched_pool.c */
int pool_create(sched *s);
void pool_free(sched *s);
void pool_begin_epoch(sched *s, uint64_t epoch);
int pool_request(sched *s, uint64_t x, sched_step *out);

#endif
