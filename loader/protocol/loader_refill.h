/*
 * Refill read plans (policy): which byte ranges of a chunk to read for a refill.
 *   whole  — one read of the whole chunk (header included, so it is verified);
 *   ranges — the fillable samples' stored ranges, neighbours merged when reading the gap
 *            costs less than another operation (gap / bandwidth < op cost);
 *   auto   — whichever the storage cost model (op_us per device request + bytes /
 *            bandwidth) says is cheaper (whole when within 1 %: it also verifies the chunk
 *            header). A range longer than the device's largest request (max_request)
 *            costs one operation per request the block layer splits it into.
 * With direct I/O every range is widened to 4096-byte boundaries.
 */
#ifndef HDMLP_LOADER_REFILL_H
#define HDMLP_LOADER_REFILL_H

#include "format.h"

typedef struct refill_range {
    uint64_t seg_off; /* offset in the segment file */
    uint64_t len;
    uint64_t buf_off; /* where it lands in the refill buffer */
} refill_range;

typedef struct refill_plan {
    uint32_t segment;
    int whole; /* 1 if the plan reads the whole chunk in one range */
    uint32_t n_ranges;
    uint32_t requests;    /* device requests: ranges split at the cost's max_request */
    refill_range *ranges; /* n_ranges; owned (hd_free) */
    uint64_t buf_len;     /* refill buffer bytes */
    uint64_t *sample_pos; /* per requested slot: offset of its stored bytes in the buffer */
} refill_plan;

typedef struct refill_cost {
    double op_us;         /* cost of one read operation (device request) */
    double bytes_per_s;   /* sequential bandwidth */
    uint64_t max_request; /* largest request the device takes (bytes); 0 = no limit */
    /* How far op_us may be too high and the cost of a MB (10^6 bytes, us) too low: a learnt
     * model's two standard errors, 0 for figures set or calibrated. Plans are priced with
     * op_us - op_us_doubt per operation and bytes at their cost plus mb_us_doubt, so a
     * cheapness the reads have not shown buys no bytes: all of a loader's reads of one shape
     * fit many splits between operations and bytes, and a throttle's start-up burst (tens
     * of MB at once, paid back later) looks like free bandwidth for a window or two. */
    double op_us_doubt;
    double mb_us_doubt;
} refill_cost;

/* The samples a refill reads, n of them in increasing slot order, and where their records
 * are (only their stored ranges are read): with `table`, the chunk's sample table and sample
 * i is slot slots[i]; without, `rec` holds the n samples' own records back to back (a job's
 * copies; FORMAT.md: samples section). The index gives the chunk's record only. */
typedef struct refill_reads {
    const uint8_t *rec;
    const fmt_table *table;
    const uint32_t *slots;
    uint32_t n;
} refill_reads;

/* The stored range (offset in the chunk, length) of the i-th sample of r. */
static inline void refill_reads_range(const refill_reads *r, uint32_t i, uint64_t *off,
                                      uint64_t *len)
{
    if (r->table != NULL) {
        *off = fmt_table_offset(r->table, r->slots[i]);
        *len = fmt_table_stored_len(r->table, r->slots[i]);
        return;
    }
    const uint8_t *rec = r->rec + (size_t)i * FMT_SAMPLE_REC_LEN;
    *off = fmt_rec_offset(rec);
    *len = fmt_rec_stored_len(rec);
}

/* Plans reading the samples `r` of `chunk`. HDMLP_E_NOMEM on allocation failure. */
int refill_plan_build(const fmt_index *ix, uint64_t chunk, const refill_reads *r,
                      hdmlp_refill mode, const refill_cost *cost, int direct, refill_plan *out);
void refill_plan_free(refill_plan *p);

typedef struct refill_shape {
    int whole;
    uint32_t n_ranges;
    uint32_t requests; /* device requests (ranges split at max_request) */
    uint64_t buf_len;
} refill_shape;

/* What refill_plan_build would read (whole, ranges, bytes), without allocating: the
 * forecast's per-miss count. */
void refill_plan_shape(const fmt_index *ix, uint64_t chunk, const refill_reads *r,
                       hdmlp_refill mode, const refill_cost *cost, int direct,
                       refill_shape *out);
/* What a shape costs under `cost`'s cautious prices (us). */
double refill_shape_cost(const refill_cost *cost, const refill_shape *s);
/* `cost` with reads priced so high that ranges merge wherever that saves a device request:
 * the span shape (the samples read in as few requests as the device's largest request
 * allows, gaps included). */
refill_cost refill_span_cost(const refill_cost *cost);
/* The `auto` rule on two shapes of one refill: 1 when whole costs at most 1 % more than
 * ranges under `cost` (whole also verifies the chunk header). */
int refill_prefers_whole(const refill_cost *cost, const refill_shape *whole,
                         const refill_shape *ranges);
/* Largest buffer any plan of this index can need (a whole chunk, aligned). */
uint64_t refill_max_buffer(const fmt_index *ix);

#endif
