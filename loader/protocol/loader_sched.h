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
 * Valid slots are never evicted.
 *
 * Policy clairvoyant (strict order): the order is known in advance, so a read keeps what
 * will be asked for soon. Every sample's position in the epoch is computed when the epoch
 * begins. A request whose sample is held is a hit. Otherwise its chunk is read: of the
 * windows of consecutive samples that contain the requested one and span at most
 * window_bytes of storage, the one holding most samples that are neither read nor delivered
 * this epoch and whose positions lie within the horizon (1.5 times what the owner can hold,
 * in the owner's share of positions); ties go to the shortest, then the first. Those samples
 * are kept, soonest first, in any free slot of the owner's groups while the slots and the
 * byte cap allow; the rest of the chunk waits for a later read. Each sample is read once
 * per epoch, the delivered order is the request order, and nothing held is evicted.
 *
 * Pool order (DESIGN.md §4, "The frontier"): one pass. The owner's chunks are cut into read
 * units of pool_unit consecutive samples (the last of a chunk may be shorter); each epoch
 * they are read in a seeded random order, their samples join a pool held in the slots of the
 * owner's groups (at most slot_cap_bytes, at most those slots), and each request is served
 * by a uniform seeded draw from the pool. Before the draw, the next unit is read when the
 * pool has room for it (or is empty): at most one unit per request, so the pool stays full.
 * The request only names its owner: the owner's scheduler sees as many requests as it owns
 * samples, so every sample is delivered exactly once per epoch.
 *
 * Decisions depend only on (index, params) and the request sequence, so the delivered order
 * is deterministic. Not thread-safe: one caller at a time.
 */
#ifndef HDMLP_LOADER_SCHED_H
#define HDMLP_LOADER_SCHED_H

#include "format.h"

typedef struct sched sched;

/* Bytes the loader holds for each sample it has planned, beyond the sample's own bytes: its
 * record and planned position (loader_core.h's ld_sample and ld_item), their allocation
 * headers and the sample buffer's pool and malloc headers (loader_core.h checks it covers
 * them). Charged to the budget with every sample, in the scheduler's slot bytes, the sizing
 * and the runtime's accounting, so a budget stays a ceiling for samples of a few bytes too
 * (they used to take five times their budget). */
#define LOADER_SAMPLE_META 192u
/* What a sample of `raw` bytes is charged. */
static inline uint64_t loader_sample_charge(uint64_t raw) { return raw + LOADER_SAMPLE_META; }
/* Bytes of the scheduler's and the runtime's state per abstract slot (slot record, refill
 * count, free id, the runtime's buffer pointer), set apart per abstract chunk in sizing. */
#define LOADER_SLOT_META 64u

typedef struct sched_params {
    uint64_t abstract_chunks; /* A, 1..C */
    hdmlp_policy policy;
    uint64_t seed;
    uint64_t slot_cap_bytes; /* cap on charged bytes (loader_sample_charge) in valid slots; 0 =
                                none */
    hdmlp_order order;
    uint32_t pool_unit;    /* pool: samples per read unit, 1..K */
    uint64_t window_bytes; /* clairvoyant: the largest read (stored bytes); 0 = a chunk */
    uint32_t rank, world;  /* pool, clairvoyant: the owner (groups g, g % world == rank) */
    /* Where a miss gets its chunk's sample records (raw sizes, stored ranges): borrowed,
     * must outlive the scheduler. The scheduler reads no other per-sample record. */
    fmt_tables tables;
    /* Tables a source that fills buffers (tables.scratch > 0) keeps for misses that return
     * to a chunk: one for each owned group when 0, else at most this many (at least one). */
    uint32_t table_entries;
} sched_params;

typedef struct sched_step {
    int hit;         /* 1: nothing read; 0: a refill (strict) or a unit (pool) is read */
    uint64_t sample; /* delivered sample */
    uint64_t size;   /* its raw size */
    uint64_t slot;   /* the slot id (g*K+t) the delivered sample is taken from */
    uint64_t chunk;  /* miss: chunk read */
    uint32_t n_load; /* miss: samples read (the delivered one included when it is read) */
    const uint32_t *load_slot;  /* miss: their in-chunk slots, increasing */
    const uint64_t *load_place; /* miss: the slot id each goes to; the delivered sample is
                                   then taken from `slot`. Both valid until the next
                                   sched_request */
    const fmt_table *table;     /* miss: the chunk's sample table (p.tables), valid until the
                                   next sched_request: the read plan's and the samples' records */
    uint32_t n_fill;   /* strict miss: samples kept in slots (delivered one excluded) */
    uint32_t fillable; /* strict miss: |fill set| before the byte cap, delivered included */
} sched_step;

/* Creates a scheduler over a validated index (its header and chunk records; the samples'
 * records come from p->tables). HDMLP_E_INVAL / E_NOMEM. */
int sched_create(const fmt_index *ix, const sched_params *p, sched **out);
void sched_free(sched *s);
/* Starts epoch `epoch`: all slots must be empty (HDMLP_E_STATE otherwise). */
int sched_begin_epoch(sched *s, uint64_t epoch);
/* Decides request x (a sample index whose location is the request's). HDMLP_E_STATE if
 * the protocol's counting invariant is broken (x requested twice in an epoch); a miss whose
 * table the source cannot give fails with the source's error, nothing decided. */
int sched_request(sched *s, uint64_t x, sched_step *out);

/* How n samples of chunk are read: strict, as configured; pool, all of a chunk whole and a
 * part of it as byte ranges (a unit is one). */
hdmlp_refill sched_load_mode(const sched *s, uint64_t chunk, uint32_t n,
                             hdmlp_refill configured);
/* Slot ids: A × K; slot id g*K+t is slot t of group g. */
uint64_t sched_slot_count(const sched *s);

uint64_t sched_abstract_chunks(const sched *s);
uint64_t sched_group_of_chunk(const sched *s, uint64_t chunk);
/* Prefetches the state a request for x will touch (a hint; decisions are unchanged). */
void sched_prefetch(const sched *s, uint64_t x);
/* x / K, by a multiply. */
uint64_t sched_chunk_of(const sched *s, uint64_t x);
/* Bytes of the scheduler's own state (its arrays: per chunk, per slot, per owned slot),
 * what it holds outside the samples; nothing of it grows with the sample count. */
uint64_t sched_state_bytes(const sched *s);
/* Slots holding a valid sample, and their raw bytes. */
uint64_t sched_slots_occupied(const sched *s);
uint64_t sched_slot_bytes(const sched *s);
/* The sample held by abstract slot g*K+t, or UINT64_MAX when it is empty. */
uint64_t sched_holder(const sched *s, uint64_t slot);

#endif
