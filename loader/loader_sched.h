/*
 * Scheduler (policy, no I/O): the Brand protocol on metadata only (DESIGN.md §4).
 *
 * The C chunks are split into A groups of consecutive chunks (the first C mod A groups
 * hold ceil(C/A) chunks, the rest floor(C/A)); group g is abstract chunk g with K slots.
 * Sample x = (chunk c, slot s) maps to abstract location (g(c), s). For each request the
 * scheduler decides, in sequence order:
 *   hit  — slot (g,s) holds a valid sample y: deliver y, the slot becomes empty;
 *   miss — pick a chunk c' of group g whose sample at slot s is unfilled this epoch,
 *          maximising the fill rate |{t : slot (g,t) empty and (c',t) unfilled}|; ties go
 *          to the first such chunk in the group's seeded random chunk order of the epoch
 *          (policy random: a seeded uniform draw among the eligible chunks). Every fillable
 * sample is placed (the requested slot's sample is delivered at once), subject to the logical
 * byte cap on valid slots: other slots are filled in increasing slot order while the cap holds.
 * Valid slots are never evicted. Relaxed mode (opt-in): a request is served by the valid slot
 * of its abstract chunk nearest its own slot (cyclically), and a refill happens only when the
 * abstract chunk holds no valid slot; it delivers the requested slot's sample when that is
 * unfilled, else the next unfilled slot's. Each request still consumes one sample of its group,
 * so every sample is delivered exactly once per epoch. Decisions depend only on (index, A,
 * policy, seed, cap) and the request sequence, so the delivered order is deterministic. Not
 * thread-safe: one caller at a time.
 */
#ifndef HDMLP_LOADER_SCHED_H
#define HDMLP_LOADER_SCHED_H

#include "format.h"

typedef struct sched sched;

typedef struct sched_params {
    uint64_t abstract_chunks; /* A, 1..C */
    hdmlp_policy policy;
    uint64_t seed;
    uint64_t slot_cap_bytes; /* cap on raw bytes held in valid slots; 0 = none */
    int relaxed;             /* serve from any valid slot of the abstract chunk */
} sched_params;

typedef struct sched_step {
    int hit;                   /* 1: served from a slot; 0: refill */
    uint64_t sample;           /* delivered sample */
    uint64_t size;             /* its raw size */
    uint64_t slot;             /* abstract slot g*K+s of the request */
    uint64_t chunk;            /* miss: chunk read */
    uint32_t n_fill;           /* miss: samples placed into slots (delivered one excluded) */
    const uint32_t *fill_slot; /* miss: their in-chunk slots t, increasing; valid until the
                                  next sched_request */
    uint32_t fillable;         /* miss: |fill set| before the byte cap, delivered included */
} sched_step;

/* Creates a scheduler over a validated index. HDMLP_E_INVAL / E_NOMEM. */
int sched_create(const fmt_index *ix, const sched_params *p, sched **out);
void sched_free(sched *s);
/* Starts epoch `epoch`: all slots must be empty (HDMLP_E_STATE otherwise). */
int sched_begin_epoch(sched *s, uint64_t epoch);
/* Decides request x (a sample index whose location is the request's). HDMLP_E_STATE if
 * the protocol's counting invariant is broken (x requested twice in an epoch). */
int sched_request(sched *s, uint64_t x, sched_step *out);

/* The in-chunk slots a miss reads, increasing: its fill slots with the delivered slot
 * merged in. out has room for st->n_fill + 1; returns the count. */
uint32_t sched_step_slots(const sched_step *st, uint32_t chunk_size, uint32_t *out);

uint64_t sched_abstract_chunks(const sched *s);
uint64_t sched_group_of_chunk(const sched *s, uint64_t chunk);
/* Prefetches the state a request for x will touch (a hint; decisions are unchanged). */
void sched_prefetch(const sched *s, uint64_t x);
/* x / K, by a multiply. */
uint64_t sched_chunk_of(const sched *s, uint64_t x);
/* Slots holding a valid sample, and their raw bytes. */
uint64_t sched_slots_occupied(const sched *s);
uint64_t sched_slot_bytes(const sched *s);
/* The sample held by abstract slot g*K+t, or UINT64_MAX when it is empty. */
uint64_t sched_holder(const sched *s, uint64_t slot);
/* Raw size of sample x (kept by the scheduler for locality). */
uint64_t sched_sample_size(const sched *s, uint64_t x);

#endif
