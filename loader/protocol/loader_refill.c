/* Refill read plans: whole chunk, merged sample ranges, or the cheaper of the two. */
#include "loader_refill.h"

#include <string.h>

static uint64_t align_down(uint64_t v) { return v & ~(uint64_t)(FMT_ALIGN - 1); }

/* The cautious prices of one operation and one byte (us): see refill_cost. */
static double op_price(const refill_cost *cost)
{
    return cost->op_us > cost->op_us_doubt ? cost->op_us - cost->op_us_doubt : 0.0;
}

static double byte_price(const refill_cost *cost)
{
    return (1e6 / cost->bytes_per_s) + cost->mb_us_doubt / 1e6;
}

static double plan_cost(const refill_cost *cost, uint64_t ops, uint64_t bytes)
{
    return (double)ops * op_price(cost) + (double)bytes * byte_price(cost);
}

double refill_shape_cost(const refill_cost *cost, const refill_shape *s)
{
    return plan_cost(cost, s->requests, s->buf_len);
}

refill_cost refill_span_cost(const refill_cost *cost)
{
    refill_cost s = *cost;
    s.op_us = 1e12;
    s.op_us_doubt = 0.0;
    return s;
}

int refill_prefers_whole(const refill_cost *cost, const refill_shape *whole,
                         const refill_shape *ranges)
{
    /* Within 1 %, whole wins: it also verifies the chunk header. */
    return plan_cost(cost, whole->requests, whole->buf_len) <=
           1.01 * plan_cost(cost, ranges->requests, ranges->buf_len);
}

uint64_t refill_max_buffer(const fmt_index *ix)
{
    uint64_t max = 0;
    for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        const uint64_t len = fmt_align_up(ch.length);
        max = len > max ? len : max;
    }
    return max;
}

/* Ranges being merged: the last one is kept here; `out`, when not NULL, records them all. */
typedef struct range_acc {
    refill_range last;
    uint32_t n;
    uint64_t buf_len;
    uint32_t requests; /* of the ranges before `last` */
    refill_range *out;
} range_acc;

/* Device requests of a range of len bytes. */
static uint32_t requests_of(uint64_t len, uint64_t max_request)
{
    return max_request == 0 || len <= max_request
               ? 1u
               : (uint32_t)((len + max_request - 1) / max_request);
}

/* Device requests the previous range and [lo, hi) save when read as one range: a merge
 * that makes the range cross a multiple of the device's largest request saves none (the
 * block layer splits it there), so the gap would be read for nothing. */
static double requests_saved(const refill_range *last, uint64_t lo, uint64_t hi,
                             uint64_t max_request)
{
    const uint64_t merged = (hi > lo ? hi : lo) - last->seg_off;
    return (double)requests_of(last->len, max_request) +
           (double)requests_of(hi - lo, max_request) - (double)requests_of(merged, max_request);
}

/* Appends range [lo, hi) of the segment, merging with the previous range when they touch
 * (after alignment) or when the gap costs less to read than the device requests that the
 * merge saves. */
static void add_range(range_acc *a, uint64_t lo, uint64_t hi, int direct,
                      double gap_us_per_byte, double op_us, uint64_t max_request)
{
    if (direct) {
        lo = align_down(lo);
        hi = fmt_align_up(hi);
    }
    if (a->n > 0) {
        const uint64_t end = a->last.seg_off + a->last.len;
        if (lo <= end || (double)(lo - end) * gap_us_per_byte <
                             op_us * requests_saved(&a->last, lo, hi, max_request)) {
            if (hi > end) {
                a->buf_len += hi - end;
                a->last.len = hi - a->last.seg_off;
            }
            if (a->out != NULL) {
                a->out[a->n - 1] = a->last;
            }
            return;
        }
    }
    if (a->n > 0) {
        a->requests += requests_of(a->last.len, max_request);
    }
    a->last = (refill_range){lo, hi - lo, a->buf_len};
    a->buf_len += hi - lo;
    if (a->out != NULL) {
        a->out[a->n] = a->last;
    }
    a->n++;
}

/* Merges the requested samples' ranges into `a` and decides whole vs ranges. */
static int plan_shape(const fmt_chunk *ch, const refill_reads *rd, hdmlp_refill mode,
                      const refill_cost *cost, int direct, range_acc *a)
{
    const uint32_t n = rd->n;
    const double us_per_byte = byte_price(cost);
    const double merge_op_us = op_price(cost);
    if (mode != HDMLP_REFILL_WHOLE) {
        for (uint32_t i = 0; i < n; i++) {
            uint64_t off, len;
            refill_reads_range(rd, i, &off, &len);
            add_range(a, ch->offset + off, ch->offset + off + len, direct, us_per_byte,
                      merge_op_us, cost->max_request);
        }
    }
    const uint64_t whole_len = direct ? fmt_align_up(ch->length) : ch->length;
    int whole = mode == HDMLP_REFILL_WHOLE || n == 0;
    if (a->n > 0) {
        a->requests += requests_of(a->last.len, cost->max_request);
    }
    if (mode == HDMLP_REFILL_AUTO && n > 0) {
        const refill_shape w = {1, 1, requests_of(whole_len, cost->max_request), whole_len};
        const refill_shape r = {0, a->n, a->requests, a->buf_len};
        whole = refill_prefers_whole(cost, &w, &r);
    }
    if (whole) {
        a->last = (refill_range){ch->offset, whole_len, 0};
        a->n = 1;
        a->requests = requests_of(whole_len, cost->max_request);
        a->buf_len = whole_len;
        if (a->out != NULL) {
            a->out[0] = a->last;
        }
    }
    return whole;
}

void refill_plan_shape(const fmt_index *ix, uint64_t chunk, const refill_reads *r,
                       hdmlp_refill mode, const refill_cost *cost, int direct,
                       refill_shape *out)
{
    fmt_chunk ch;
    fmt_index_chunk(ix, chunk, &ch);
    range_acc a;
    memset(&a, 0, sizeof(a));
    out->whole = plan_shape(&ch, r, mode, cost, direct, &a);
    out->n_ranges = a.n;
    out->requests = a.requests;
    out->buf_len = a.buf_len;
}

int refill_plan_build(const fmt_index *ix, uint64_t chunk, const refill_reads *rd,
                      hdmlp_refill mode, const refill_cost *cost, int direct, refill_plan *out)
{
    const uint32_t n = rd->n;
    memset(out, 0, sizeof(*out));
    fmt_chunk ch;
    fmt_index_chunk(ix, chunk, &ch);
    out->segment = ch.segment;
    out->ranges = hd_malloc((n ? n : 1) * sizeof(refill_range));
    out->sample_pos = hd_malloc((n ? n : 1) * sizeof(uint64_t));
    if (out->ranges == NULL || out->sample_pos == NULL) {
        refill_plan_free(out);
        return hd_err(HDMLP_E_NOMEM, "refill plan: out of memory");
    }
    range_acc a;
    memset(&a, 0, sizeof(a));
    a.out = out->ranges;
    out->whole = plan_shape(&ch, rd, mode, cost, direct, &a);
    out->n_ranges = a.n;
    out->requests = a.requests;
    out->buf_len = a.buf_len;
    uint32_t r = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t off, len;
        refill_reads_range(rd, i, &off, &len);
        if (out->whole) {
            out->sample_pos[i] = off;
            continue;
        }
        const uint64_t abs = ch.offset + off;
        while (r + 1 < out->n_ranges && out->ranges[r + 1].seg_off <= abs) {
            r++;
        }
        out->sample_pos[i] = out->ranges[r].buf_off + (abs - out->ranges[r].seg_off);
    }
    return HDMLP_OK;
}

void refill_plan_free(refill_plan *p)
{
    hd_free(p->ranges);
    hd_free(p->sample_pos);
    p->ranges = NULL;
    p->sample_pos = NULL;
}
