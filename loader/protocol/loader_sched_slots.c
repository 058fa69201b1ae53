/*
 * Scheduler state every order shares (loader_sched.c's Brand refill, loader_sched_due.c's
 * clairvoyant policy, loader_sched_pool.c's pool): the chunk of a sample, an epoch's unfilled
 * bits, the free slots of the owner's groups. The lowest file of the scheduler: the three
 * call it, it calls none of them.
 */
#include "loader_sched_private.h"

#include <string.h>

uint64_t sched_chunk_of(const sched *s, uint64_t x)
{
    return s->kmul != 0 ? (uint64_t)(((u128)s->kmul * x) >> 64) : x / s->k;
}

void sched_mark_all_unfilled(sched *s)
{
    for (uint64_t c = 0; c < s->c; c++) {
        uint64_t *u = s->unfilled + c * s->w;
        const uint32_t m = sched_chunk_samples(s, c);
        memset(u, 0, s->w * sizeof(uint64_t));
        for (uint32_t t = 0; t < m; t++) {
            u[t / 64] |= 1ull << (t % 64);
        }
    }
}

void sched_free_all_owned(sched *s)
{
    s->n_free = 0;
    for (uint64_t g = s->a; g-- > 0;) {
        if (!sched_owns(s, g)) {
            continue;
        }
        for (uint32_t t = s->k; t-- > 0;) {
            s->free_ids[s->n_free++] = g * s->k + t;
        }
    }
}
