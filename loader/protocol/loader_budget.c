/*
 * The memory budget's owner (loader_budget.h): the shares of a sized budget and the moves
 * between them. Every move is checked before it is made, so a refused one leaves the shares
 * as they were and they always add up to the budget.
 */
#include "loader_budget.h"

static const char *const share_names[BUDGET_SHARES] = {
    [BUDGET_PLANNING] = "planning",        [BUDGET_IO_POOL] = "I/O read buffers",
    [BUDGET_STAGER] = "SSD stager buffer", [BUDGET_REMOTE] = "remote prefetch",
    [BUDGET_ANSWERS] = "answers to peers", [BUDGET_RAM_CACHE] = "RAM chunk cache",
    [BUDGET_SLOT_TABLES] = "slot tables",  [BUDGET_SAMPLE_TABLES] = "sample tables",
    [BUDGET_IMAGES] = "image pipeline",    [BUDGET_LENT] = "local ranks",
};

const char *budget_share_name(budget_share s)
{
    return (unsigned)s < BUDGET_SHARES ? share_names[s] : "(no share)";
}

int budget_init(loader_budget *b, const loader_sizing *sz, uint32_t threads)
{
    *b = (loader_budget){.sz = *sz};
    const uint32_t reserved = threads < LOADER_IO_RESERVED ? threads : LOADER_IO_RESERVED;
    b->share[BUDGET_IO_POOL] = sz->read_buffer * reserved;
    b->share[BUDGET_STAGER] = sz->stager;
    b->share[BUDGET_REMOTE] = sz->remote_cap;
    b->share[BUDGET_ANSWERS] = sz->answers;
    b->share[BUDGET_RAM_CACHE] = sz->ram_cache;
    b->share[BUDGET_SLOT_TABLES] = sz->slot_tables;
    b->share[BUDGET_SAMPLE_TABLES] = sz->sample_tables;
    uint64_t fixed = 0;
    for (int s = BUDGET_PLANNING + 1; s < BUDGET_SHARES; s++) {
        if (b->share[s] > UINT64_MAX - fixed) {
            fixed = UINT64_MAX;
            break;
        }
        fixed += b->share[s];
        b->ceiling[s] = b->share[s];
    }
    if (fixed > sz->memory) {
        return hd_err(
            HDMLP_E_RANGE,
            "budget: the fixed shares (%llu bytes: I/O read buffers %llu, SSD stager "
            "%llu, remote prefetch %llu, answers to peers %llu, RAM chunk cache %llu, slot "
            "tables %llu, sample tables %llu) exceed the budget of %llu bytes",
            (unsigned long long)fixed, (unsigned long long)b->share[BUDGET_IO_POOL],
            (unsigned long long)sz->stager, (unsigned long long)sz->remote_cap,
            (unsigned long long)sz->answers, (unsigned long long)sz->ram_cache,
            (unsigned long long)sz->slot_tables, (unsigned long long)sz->sample_tables,
            (unsigned long long)sz->memory);
    }
    /* The image pipeline's output buffers are taken when it starts (budget_reserve), at most
     * what sizing set apart for its part; until then that part plans. */
    b->ceiling[BUDGET_IMAGES] = sz->images;
    b->share[BUDGET_PLANNING] = sz->memory - fixed;
    return HDMLP_OK;
}

const loader_sizing *budget_sizing(const loader_budget *b) { return &b->sz; }

uint64_t budget_memory(const loader_budget *b) { return b->sz.memory; }

uint64_t budget_share_bytes(const loader_budget *b, budget_share s)
{
    return (unsigned)s < BUDGET_SHARES ? b->share[s] : 0;
}

uint64_t budget_total(const loader_budget *b)
{
    uint64_t t = 0;
    for (int s = 0; s < BUDGET_SHARES; s++) {
        t += b->share[s];
    }
    return t;
}

uint64_t budget_plan_limit(const loader_budget *b)
{
    return b->share[BUDGET_PLANNING] + b->share[BUDGET_IO_POOL] + b->borrowed;
}

uint64_t budget_transport_arena(const loader_budget *b)
{
    const uint64_t m = b->sz.memory;
    return m > UINT64_MAX - m / 2 ? UINT64_MAX : m + m / 2;
}

int budget_reserve(loader_budget *b, budget_share s, uint64_t bytes)
{
    if ((unsigned)s >= BUDGET_SHARES || s == BUDGET_PLANNING || s == BUDGET_LENT) {
        return hd_err(HDMLP_E_INVAL, "budget: no reserve can be taken for the %s share",
                      budget_share_name(s));
    }
    const uint64_t limit = budget_plan_limit(b);
    const uint64_t have = b->share[s], ceiling = b->ceiling[s];
    if (bytes > ceiling - have || bytes >= limit || bytes > b->share[BUDGET_PLANNING]) {
        return hd_err(HDMLP_E_RANGE,
                      "budget: a reserve of %llu bytes for the %s does not fit: %llu bytes "
                      "were set apart for it (%llu reserved already), and planning, at a "
                      "limit of %llu bytes (%llu of its own), must keep room",
                      (unsigned long long)bytes, budget_share_name(s),
                      (unsigned long long)ceiling, (unsigned long long)have,
                      (unsigned long long)limit, (unsigned long long)b->share[BUDGET_PLANNING]);
    }
    b->share[BUDGET_PLANNING] -= bytes;
    b->share[s] += bytes;
    return HDMLP_OK;
}

int budget_hold_back(loader_budget *b, uint64_t bytes)
{
    const uint64_t held = b->share[BUDGET_LENT];
    if (bytes < b->lent || (bytes > held && bytes - held > b->share[BUDGET_PLANNING])) {
        return hd_err(HDMLP_E_RANGE,
                      "budget: %llu bytes cannot be held back for local ranks: %llu are lent "
                      "already, and planning has %llu bytes besides the %llu held back",
                      (unsigned long long)bytes, (unsigned long long)b->lent,
                      (unsigned long long)b->share[BUDGET_PLANNING], (unsigned long long)held);
    }
    b->share[BUDGET_PLANNING] = b->share[BUDGET_PLANNING] + held - bytes;
    b->share[BUDGET_LENT] = bytes;
    return HDMLP_OK;
}

int budget_lend(loader_budget *b, uint64_t bytes)
{
    const uint64_t held = b->share[BUDGET_LENT];
    if (bytes > held - b->lent) {
        return hd_err(HDMLP_E_RANGE,
                      "budget: %llu bytes cannot be lent: %llu are held back for local ranks, "
                      "of which %llu are lent already",
                      (unsigned long long)bytes, (unsigned long long)held,
                      (unsigned long long)b->lent);
    }
    b->lent += bytes;
    return HDMLP_OK;
}

/* Takes bytes off *have (lent or borrowed bytes coming back), refused when more than it
 * holds; move and held name the move and what *have counts in the message. */
static int give_back(uint64_t *have, uint64_t bytes, const char *move, const char *held)
{
    if (bytes > *have) {
        return hd_err(HDMLP_E_RANGE, "budget: %llu bytes cannot %s: %llu are %s",
                      (unsigned long long)bytes, move, (unsigned long long)*have, held);
    }
    *have -= bytes;
    return HDMLP_OK;
}

int budget_reclaim(loader_budget *b, uint64_t bytes)
{
    return give_back(&b->lent, bytes, "come back", "lent");
}

int budget_borrow(loader_budget *b, uint64_t bytes)
{
    if (bytes > UINT64_MAX - budget_plan_limit(b)) {
        return hd_err(HDMLP_E_RANGE,
                      "budget: %llu bytes cannot be borrowed above a planning limit of %llu",
                      (unsigned long long)bytes, (unsigned long long)budget_plan_limit(b));
    }
    b->borrowed += bytes;
    return HDMLP_OK;
}

int budget_repay(loader_budget *b, uint64_t bytes)
{
    return give_back(&b->borrowed, bytes, "be repaid", "borrowed");
}

uint64_t budget_lent(const loader_budget *b) { return b->lent; }

uint64_t budget_borrowed(const loader_budget *b) { return b->borrowed; }

uint64_t budget_room_to_give(const loader_budget *b, uint64_t charged)
{
    const uint64_t keeps = budget_plan_limit(b) + (b->share[BUDGET_LENT] - b->lent);
    return keeps > charged ? keeps - charged : 0;
}
