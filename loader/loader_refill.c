/* Refill read plans: whole chunk, merged sample ranges, or the cheaper of the two. */
#include "loader_refill.h"

#include <string.h>

static uint64_t align_down(uint64_t v) { return v & ~(uint64_t)(FMT_ALIGN - 1); }

static double plan_cost(const refill_cost *cost, uint64_t ops, uint64_t bytes)
{
    return (double)ops * cost->op_us + (double)bytes * 1e6 / cost->bytes_per_s;
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

/* Appends range [lo, hi) of the segment, merging with the previous range when they touch
 * (after alignment) or when the gap is cheaper to read than a new operation. */
static void add_range(refill_plan *p, uint64_t lo, uint64_t hi, int direct,
                      double gap_us_per_byte, double op_us)
{
    if (direct) {
        lo = align_down(lo);
        hi = fmt_align_up(hi);
    }
    if (p->n_ranges > 0) {
        refill_range *last = &p->ranges[p->n_ranges - 1];
        const uint64_t end = last->seg_off + last->len;
        if (lo <= end || (double)(lo - end) * gap_us_per_byte < op_us) {
            if (hi > end) {
                p->buf_len += hi - end;
                last->len = hi - last->seg_off;
            }
            return;
        }
    }
    refill_range *r = &p->ranges[p->n_ranges++];
    r->seg_off = lo;
    r->len = hi - lo;
    r->buf_off = p->buf_len;
    p->buf_len += r->len;
}

int refill_plan_build(const fmt_index *ix, uint64_t chunk, const uint32_t *slots, uint32_t n,
                      hdmlp_refill mode, const refill_cost *cost, int direct, refill_plan *out)
{
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
    const uint64_t base = chunk * ix->h.chunk_size;
    const double us_per_byte = 1e6 / cost->bytes_per_s;
    /* Ranged plan first: it tells what "ranges" would cost. */
    for (uint32_t i = 0; i < n; i++) {
        fmt_sample s;
        fmt_index_sample(ix, base + slots[i], &s);
        add_range(out, ch.offset + s.offset, ch.offset + s.offset + s.stored_len, direct,
                  us_per_byte, cost->op_us);
    }
    const uint64_t range_bytes = out->buf_len;
    const uint64_t whole_len = direct ? fmt_align_up(ch.length) : ch.length;
    int whole = mode == HDMLP_REFILL_WHOLE;
    if (mode == HDMLP_REFILL_AUTO) {
        /* Within 1 %, whole wins: it also verifies the chunk header. */
        whole =
            plan_cost(cost, 1, whole_len) <= 1.01 * plan_cost(cost, out->n_ranges, range_bytes);
    }
    if (whole || n == 0) {
        out->whole = 1;
        out->n_ranges = 1;
        out->ranges[0].seg_off = ch.offset;
        out->ranges[0].len = whole_len;
        out->ranges[0].buf_off = 0;
        out->buf_len = whole_len;
        for (uint32_t i = 0; i < n; i++) {
            fmt_sample s;
            fmt_index_sample(ix, base + slots[i], &s);
            out->sample_pos[i] = s.offset;
        }
        return HDMLP_OK;
    }
    uint32_t r = 0;
    for (uint32_t i = 0; i < n; i++) {
        fmt_sample s;
        fmt_index_sample(ix, base + slots[i], &s);
        const uint64_t abs = ch.offset + s.offset;
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
