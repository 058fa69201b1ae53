/*
 * Per-GPU balance: the rule of loader_balance.h.
 */
#include "loader_balance.h"

int balance_idle_prefetch(const balance_input *in, uint64_t ready)
{
    if (in->views[in->rank].v.stall_window_ns != 0 || ready < 2 * in->batch) {
        return 0;
    }
    for (uint32_t r = 0; r < in->world; r++) {
        if (r != in->rank && in->views[r].fresh && in->views[r].v.stall_window_ns > 0) {
            return 1;
        }
    }
    return 0;
}

void balance_decide(const balance_input *in, balance_decision *out)
{
    *out = (balance_decision){0, 0, 0, BALANCE_NEUTRAL};
    const board_view *self = &in->views[in->rank];
    uint64_t worst = self->v.stall_window_ns;
    uint32_t worst_rank = in->rank;
    uint32_t others = 0;
    for (uint32_t r = 0; r < in->world; r++) {
        const board_view *v = &in->views[r];
        if (r == in->rank || !v->fresh) {
            continue;
        }
        others++;
        if (v->v.stall_window_ns > worst) {
            worst = v->v.stall_window_ns;
            worst_rank = r;
        }
    }
    if (others == 0 || worst == 0) {
        return; /* alone, or nobody starved: everything released */
    }
    if (worst_rank == in->rank) {
        out->role = BALANCE_STARVED;
        out->borrow = in->lookahead_share;
        return;
    }
    /* Holding back an owner the starved rank waits on would starve it further: its samples
     * come from this rank's reads. */
    const uint64_t me = 1ull << (in->rank % 64);
    if (self->v.stall_window_ns == 0 && self->v.lead_items >= 2 * in->batch &&
        (in->views[worst_rank].v.waits_on & me) == 0) {
        out->role = BALANCE_HOLD;
        out->io_limit = in->threads > 1 ? in->threads / 2 : 0;
        out->lend = in->lookahead_share / 2;
    }
}
