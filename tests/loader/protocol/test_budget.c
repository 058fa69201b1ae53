/*
 * The budget's owner (loader_budget.c): its split gives the limits the loader computed before
 * it had one (sizing's planning limit, the image pipeline's reserve taken off it, the node
 * board's lending and borrowing, the I/O pool, the remote cap, the transport's arena), the
 * shares add up to the budget whatever order reserves, lends and borrows come in, and a move
 * that does not fit is refused naming its numbers and changes nothing.
 */
#include "fmt_rng.h"
#include "format.h"
#include "loader.h"
#include "loader_budget.h"
#include "loader_refill.h"
#include "loader_sizing.h"
#include "support/memds.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t size_varied(uint64_t i) { return 100 + (i * 7919) % 3000; }

static uint64_t size_large(uint64_t i) { return 40000 + (i * 104729) % 90000; }

/* A configuration to size: the dataset and the config fields the split depends on. */
typedef struct budget_case {
    const char *name;
    uint64_t n;
    uint32_t k;
    uint64_t (*size_of)(uint64_t);
    uint64_t memory; /* bytes, or (memory_raise) too small on purpose */
    int memory_raise;
    uint32_t batch, world, threads;
    int ssd;
    uint64_t ram_cache; /* HDMLP_RAM_CACHE_AUTO, 0 or bytes */
    uint64_t remote_memory;
    uint32_t image_side, image_prefetch; /* 0: no image pipeline */
} budget_case;

static const budget_case CASES[] = {
    {"one rank, two threads", 4000, 32, size_varied, 2u << 20, 0, 32, 1, 2, 0,
     HDMLP_RAM_CACHE_AUTO, 0, 0, 0},
    {"one rank, one thread", 4000, 32, size_varied, 2u << 20, 0, 32, 1, 1, 0, 0, 0, 0, 0},
    {"one rank, eight threads, SSD tier", 4000, 32, size_varied, 3u << 20, 0, 16, 1, 8, 1,
     HDMLP_RAM_CACHE_AUTO, 0, 0, 0},
    {"budget above the dataset: RAM cache of every chunk", 4000, 32, size_varied, 64u << 20, 0,
     32, 1, 2, 0, HDMLP_RAM_CACHE_AUTO, 0, 0, 0},
    {"two ranks, remote cap 10 %", 4000, 16, size_varied, 2u << 20, 0, 32, 2, 2, 0, 0, 0, 0, 0},
    {"four ranks, remote cap set, SSD tier, three threads", 8000, 16, size_large, 96u << 20, 0,
     8, 4, 3, 1, 1u << 20, 4u << 20, 0, 0},
    {"two ranks with the image pipeline", 2000, 16, size_large, 64u << 20, 0, 16, 2, 4, 0, 0, 0,
     32, 3},
    {"one rank with the image pipeline, prefetch 1", 2000, 16, size_large, 48u << 20, 0, 8, 1,
     2, 0, 0, 0, 64, 1},
    {"a share of the data, raised to the least that works", 4000, 64, size_large, 1u << 20, 1,
     32, 2, 2, 1, 0, 0, 0, 0},
};
#define N_CASES (sizeof(CASES) / sizeof(CASES[0]))

typedef struct sized {
    memds ds;
    struct hdmlp_config cfg;
    hdmlp_image_config *ic;
    loader_sizing sz;
    uint64_t max_buf;   /* the largest aligned chunk: one read buffer */
    uint64_t one_batch; /* the batch-size largest samples */
    uint64_t reserve;   /* the image pipeline's output buffers (0 without one) */
} sized;

static int by_size_desc(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void size_case(const budget_case *c, sized *s)
{
    memset(s, 0, sizeof(*s));
    memds_make(&s->ds, c->n, c->k, c->size_of);
    config_defaults(&s->cfg);
    s->cfg.memory = c->memory;
    s->cfg.memory_raise = c->memory_raise;
    s->cfg.batch = c->batch;
    s->cfg.world = c->world;
    s->cfg.threads = c->threads;
    s->cfg.ssd_dir = c->ssd ? (char *)"ssd" : NULL; /* sizing only asks whether there is one */
    s->cfg.ram_cache = c->ram_cache;
    s->cfg.remote_memory = c->remote_memory;
    if (c->image_side != 0) {
        cr_assert_eq(hdmlp_image_config_create(&s->ic), HDMLP_OK);
        cr_assert_eq(hdmlp_image_config_set_size(s->ic, c->image_side, c->image_side),
                     HDMLP_OK);
        cr_assert_eq(hdmlp_image_config_set_prefetch(s->ic, c->image_prefetch), HDMLP_OK);
        s->cfg.image = s->ic;
        /* uint8, three channels (the defaults) */
        s->reserve =
            (uint64_t)c->image_side * c->image_side * 3 * c->batch * (c->image_prefetch + 2);
    }
    const fmt_tables tables = fmt_index_tables(&s->ds.ix);
    cr_assert_eq(loader_size(&s->ds.ix, &tables, &s->cfg, &s->sz), HDMLP_OK, "%s: %s", c->name,
                 hdmlp_last_error());
    s->max_buf = refill_max_buffer(&s->ds.ix);
    uint64_t *sizes = malloc(c->n * sizeof(uint64_t));
    for (uint64_t i = 0; i < c->n; i++) {
        sizes[i] = c->size_of(i);
    }
    qsort(sizes, c->n, sizeof(uint64_t), by_size_desc);
    for (uint64_t i = 0; i < c->batch && i < c->n; i++) {
        s->one_batch += sizes[i];
    }
    free(sizes);
}

static void sized_free(sized *s)
{
    hdmlp_image_config_free(s->ic);
    memds_free(&s->ds);
}

/* ---- today's arithmetic, as it was spread over the loader ----------------------------- */

/* loader_sizing.c: accounted bytes planning may reach; image_pipe_start took its reserve off
 * it. */
static uint64_t old_plan_limit(const sized *s)
{
    const uint64_t stager = s->cfg.ssd_dir != NULL ? s->max_buf : 0;
    /* The slot tables became a fixed share when the budget began to charge the loader's
     * per-sample and per-slot records (they used to sit outside it). */
    return s->sz.memory - s->sz.remote_cap - s->sz.ram_cache - stager -
           (s->cfg.world > 1 ? s->sz.answers : 0) - s->reserve - s->sz.slot_tables;
}

/* loader_api.c: the reserved workers' read buffers, charged for the loader's life. */
static uint64_t old_io_pool(const sized *s)
{
    return s->max_buf *
           (s->cfg.threads < LOADER_IO_RESERVED ? s->cfg.threads : LOADER_IO_RESERVED);
}

/* rpc_transport.c: the transport's arena. */
static uint64_t old_arena(const sized *s) { return s->sz.memory + s->sz.memory / 2; }

/* loader_balance_apply.c's apply() on the planning limit it rewrote, against a pool of
 * *pool bytes (board_take gives what the pool has). */
typedef struct old_balance {
    uint64_t base, lower, lent, borrowed;
} old_balance;

static uint64_t pool_take(uint64_t *pool, uint64_t want)
{
    const uint64_t got = want < *pool ? want : *pool;
    *pool -= got;
    return got;
}

static uint64_t old_headroom(const old_balance *s, uint64_t charged)
{
    const uint64_t cap = s->base - s->lent + s->borrowed;
    return cap > charged ? cap - charged : 0;
}

static uint64_t old_apply(old_balance *s, uint64_t *pool, uint64_t charged, uint64_t lend,
                          uint64_t borrow)
{
    if (borrow < s->borrowed) {
        uint64_t back = s->borrowed - borrow;
        const uint64_t room = old_headroom(s, charged);
        back = back < room ? back : room;
        *pool += back;
        s->borrowed -= back;
    } else if (borrow > s->borrowed) {
        s->borrowed += pool_take(pool, borrow - s->borrowed);
    }
    if (lend < s->lent) {
        s->lent -= pool_take(pool, s->lent - lend);
    }
    s->lower = lend > s->lent ? lend : s->lent;
    if (s->lower > s->lent) {
        uint64_t more = s->lower - s->lent;
        const uint64_t room = old_headroom(s, charged);
        more = more < room ? more : room;
        s->lent += more;
        *pool += more;
    }
    return s->base - s->lower + s->borrowed;
}

/* The same decision through the owner, as loader_balance_apply.c now makes it. */
static void owner_apply(loader_budget *b, uint64_t *pool, uint64_t charged, uint64_t lend,
                        uint64_t borrow)
{
    const uint64_t borrowed = budget_borrowed(b);
    if (borrow < borrowed) {
        uint64_t back = borrowed - borrow;
        const uint64_t room = budget_room_to_give(b, charged);
        back = back < room ? back : room;
        *pool += back;
        cr_assert_eq(budget_repay(b, back), HDMLP_OK, "%s", hdmlp_last_error());
    } else if (borrow > borrowed) {
        cr_assert_eq(budget_borrow(b, pool_take(pool, borrow - borrowed)), HDMLP_OK);
    }
    if (lend < budget_lent(b)) {
        cr_assert_eq(budget_reclaim(b, pool_take(pool, budget_lent(b) - lend)), HDMLP_OK);
    }
    const uint64_t lent = budget_lent(b);
    const uint64_t lower = lend > lent ? lend : lent;
    cr_assert_eq(budget_hold_back(b, lower), HDMLP_OK, "%s", hdmlp_last_error());
    if (lower > lent) {
        uint64_t more = lower - lent;
        const uint64_t room = budget_room_to_give(b, charged);
        more = more < room ? more : room;
        cr_assert_eq(budget_lend(b, more), HDMLP_OK, "%s", hdmlp_last_error());
        *pool += more;
    }
}

static void assert_adds_up(const loader_budget *b, const char *what)
{
    uint64_t sum = 0;
    for (int s = 0; s < BUDGET_SHARES; s++) {
        cr_assert_leq(budget_share_bytes(b, (budget_share)s), budget_memory(b), "%s: %s share",
                      what, budget_share_name((budget_share)s));
        sum += budget_share_bytes(b, (budget_share)s);
    }
    cr_assert_eq(sum, budget_total(b), "%s", what);
    cr_assert_leq(sum, budget_memory(b), "%s: shares %llu above the budget %llu", what,
                  (unsigned long long)sum, (unsigned long long)budget_memory(b));
    cr_assert_leq(budget_lent(b), budget_share_bytes(b, BUDGET_LENT), "%s: lent", what);
}

Test(budget, limits_equal_todays_arithmetic)
{
    const uint64_t seed = 20260426;
    printf("budget equivalence seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < N_CASES; i++) {
        const budget_case *c = &CASES[i];
        sized s;
        size_case(c, &s);
        loader_budget b;
        cr_assert_eq(budget_init(&b, &s.sz, c->threads), HDMLP_OK, "%s: %s", c->name,
                     hdmlp_last_error());
        cr_assert_eq(budget_memory(&b), s.sz.memory, "%s", c->name);
        cr_assert_eq(budget_total(&b), s.sz.memory, "%s: the shares are the budget", c->name);
        cr_assert_eq(budget_share_bytes(&b, BUDGET_IO_POOL), old_io_pool(&s), "%s", c->name);
        cr_assert_eq(budget_share_bytes(&b, BUDGET_REMOTE), s.sz.remote_cap, "%s", c->name);
        cr_assert_eq(budget_share_bytes(&b, BUDGET_RAM_CACHE), s.sz.ram_cache, "%s", c->name);
        cr_assert_eq(budget_transport_arena(&b), old_arena(&s), "%s", c->name);
        if (c->memory_raise) {
            cr_assert_gt(s.sz.memory, c->memory, "%s: raised", c->name);
        }
        if (s.reserve > 0) {
            cr_assert_leq(s.reserve, s.sz.images, "%s", c->name);
            cr_assert_eq(budget_reserve(&b, BUDGET_IMAGES, s.reserve), HDMLP_OK, "%s: %s",
                         c->name, hdmlp_last_error());
        }
        cr_assert_eq(budget_plan_limit(&b), old_plan_limit(&s),
                     "%s: planning limit %llu, was "
                     "%llu",
                     c->name, (unsigned long long)budget_plan_limit(&b),
                     (unsigned long long)old_plan_limit(&s));
        assert_adds_up(&b, c->name);
        /* The node board's decisions (the policy lends at most half its lookahead share and
         * borrows at most the whole), against a pool other ranks filled. */
        fmt_rng rng;
        fmt_rng_seed(&rng, seed, i);
        old_balance ob = {old_plan_limit(&s), 0, 0, 0};
        uint64_t pool_old = fmt_rng_below(&rng, s.sz.lookahead + 1), pool_new = pool_old;
        const uint64_t limit = old_plan_limit(&s);
        uint64_t lending = 0, borrowing = 0;
        for (int step = 0; step < 400; step++) {
            const uint64_t r = fmt_rng_below(&rng, 3);
            const uint64_t lend = r == 0 ? fmt_rng_below(&rng, s.sz.lookahead / 2 + 1) : 0;
            const uint64_t borrow = r == 1 ? fmt_rng_below(&rng, s.sz.lookahead + 1) : 0;
            const uint64_t charged = fmt_rng_below(&rng, limit + limit / 4 + 1);
            const uint64_t want = old_apply(&ob, &pool_old, charged, lend, borrow);
            owner_apply(&b, &pool_new, charged, lend, borrow);
            cr_assert_eq(budget_plan_limit(&b), want, "%s, step %d: limit %llu, was %llu",
                         c->name, step, (unsigned long long)budget_plan_limit(&b),
                         (unsigned long long)want);
            cr_assert_eq(budget_lent(&b), ob.lent, "%s, step %d", c->name, step);
            cr_assert_eq(budget_borrowed(&b), ob.borrowed, "%s, step %d", c->name, step);
            cr_assert_eq(pool_new, pool_old, "%s, step %d", c->name, step);
            assert_adds_up(&b, c->name);
            lending += budget_lent(&b) > 0;
            borrowing += budget_borrowed(&b) > 0;
        }
        printf("%s: budget %llu, planning limit %llu, lookahead %llu; steps lending %llu, "
               "borrowing %llu of 400\n",
               c->name, (unsigned long long)s.sz.memory, (unsigned long long)limit,
               (unsigned long long)s.sz.lookahead, (unsigned long long)lending,
               (unsigned long long)borrowing);
        cr_assert(s.sz.lookahead == 0 || (lending > 0 && borrowing > 0), "%s", c->name);
        sized_free(&s);
    }
}

/* Random moves on two ranks of one node sharing a pool: each rank's shares add up to its
 * budget after every move, a refused move changes nothing, and the node's planning limits
 * with the other shares never add up above the node's budgets. */
Test(budget, shares_add_up_whatever_the_order)
{
    const uint64_t seed = 77;
    printf("budget property seed %llu\n", (unsigned long long)seed);
    fmt_rng rng;
    fmt_rng_seed(&rng, seed, 0);
    sized s[2];
    loader_budget b[2];
    size_case(&CASES[6], &s[0]); /* two ranks with the image pipeline */
    size_case(&CASES[4], &s[1]); /* two ranks */
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(budget_init(&b[r], &s[r].sz, CASES[r ? 4 : 6].threads), HDMLP_OK);
    }
    uint64_t pool = 0, refused = 0, done = 0;
    for (int step = 0; step < 20000; step++) {
        const int r = (int)fmt_rng_below(&rng, 2);
        loader_budget *x = &b[r];
        const loader_budget before = *x;
        const uint64_t span = budget_memory(x) / 4;
        const uint64_t v = fmt_rng_below(&rng, span + 1);
        int rc = HDMLP_OK;
        switch (fmt_rng_below(&rng, 7)) {
        case 0:
            rc = budget_reserve(x, BUDGET_IMAGES, v / 8);
            break;
        case 1:
            rc = budget_hold_back(x, v);
            break;
        case 2:
            rc = budget_lend(x, v / 2);
            if (rc == HDMLP_OK) {
                pool += v / 2;
            }
            break;
        case 3: { /* the pool gives back at most what it holds */
            const uint64_t got = v < pool ? v : pool;
            rc = budget_reclaim(x, got);
            if (rc == HDMLP_OK) {
                pool -= got;
            }
            break;
        }
        case 4: {
            const uint64_t got = v < pool ? v : pool;
            rc = budget_borrow(x, got);
            if (rc == HDMLP_OK) {
                pool -= got;
            }
            break;
        }
        case 5:
            rc = budget_repay(x, v / 4);
            if (rc == HDMLP_OK) {
                pool += v / 4;
            }
            break;
        default:
            rc = budget_reserve(x, BUDGET_REMOTE, v % 3); /* a fixed share: only 0 fits */
            break;
        }
        if (rc != HDMLP_OK) {
            cr_assert_eq(rc, HDMLP_E_RANGE, "step %d: %s", step, hdmlp_last_error());
            cr_assert(memcmp(&before, x, sizeof(before)) == 0,
                      "step %d: a refused move "
                      "changed the shares",
                      step);
            refused++;
        } else {
            done++;
        }
        assert_adds_up(x, "random moves");
        uint64_t node = 0, budgets = 0;
        for (int q = 0; q < 2; q++) {
            node += budget_plan_limit(&b[q]);
            for (int sh = BUDGET_STAGER; sh < BUDGET_LENT; sh++) {
                node += budget_share_bytes(&b[q], (budget_share)sh);
            }
            budgets += budget_memory(&b[q]);
        }
        cr_assert_leq(node, budgets, "step %d: the node's limits %llu above its budgets %llu",
                      step, (unsigned long long)node, (unsigned long long)budgets);
        cr_assert_eq(pool + budget_borrowed(&b[0]) + budget_borrowed(&b[1]),
                     budget_lent(&b[0]) + budget_lent(&b[1]), "step %d: pool", step);
    }
    printf("budget property: %llu moves made, %llu refused\n", (unsigned long long)done,
           (unsigned long long)refused);
    cr_assert_gt(done, 1000);
    cr_assert_gt(refused, 1000);
    sized_free(&s[0]);
    sized_free(&s[1]);
}

/* The number written right after `after` in msg (0 if absent). */
static uint64_t number_after(const char *msg, const char *after)
{
    const char *p = strstr(msg, after);
    return p != NULL ? strtoull(p + strlen(after), NULL, 10) : 0;
}

Test(budget, a_reserve_that_fits_is_taken_from_planning)
{
    sized s;
    size_case(&CASES[6], &s);
    loader_budget b;
    cr_assert_eq(budget_init(&b, &s.sz, 4), HDMLP_OK);
    const uint64_t limit = budget_plan_limit(&b);
    cr_assert_eq(budget_reserve(&b, BUDGET_IMAGES, s.sz.images), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert_eq(budget_share_bytes(&b, BUDGET_IMAGES), s.sz.images, "all it was set apart");
    cr_assert_eq(budget_plan_limit(&b), limit - s.sz.images);
    cr_assert_eq(budget_total(&b), budget_memory(&b));
    sized_free(&s);
}

Test(budget, a_reserve_that_does_not_fit_is_refused_naming_the_numbers)
{
    sized s;
    size_case(&CASES[6], &s);
    loader_budget b;
    cr_assert_eq(budget_init(&b, &s.sz, 4), HDMLP_OK);
    cr_assert_eq(budget_reserve(&b, BUDGET_IMAGES, s.reserve), HDMLP_OK);
    const loader_budget before = b;
    const uint64_t more = s.sz.images - s.reserve + 1;
    cr_assert_eq(budget_reserve(&b, BUDGET_IMAGES, more), HDMLP_E_RANGE);
    const char *msg = hdmlp_last_error();
    printf("refused: %s\n", msg);
    cr_assert_eq(number_after(msg, "a reserve of "), more, "%s", msg);
    cr_assert_eq(number_after(msg, "does not fit: "), s.sz.images, "%s", msg);
    cr_assert_eq(number_after(msg, "it ("), s.reserve, "%s", msg);
    cr_assert_eq(number_after(msg, "at a limit of "), budget_plan_limit(&b), "%s", msg);
    cr_assert_not_null(strstr(msg, "image pipeline"), "%s", msg);
    cr_assert(memcmp(&before, &b, sizeof(b)) == 0, "a refused reserve changed the shares");
    /* Planning never gives up all its room, whatever was set apart. */
    loader_budget full;
    cr_assert_eq(budget_init(&full, &s.sz, 4), HDMLP_OK);
    full.ceiling[BUDGET_IMAGES] = UINT64_MAX; /* as if sizing had set apart the whole budget */
    cr_assert_eq(budget_reserve(&full, BUDGET_IMAGES, budget_plan_limit(&full)), HDMLP_E_RANGE);
    /* Planning and the room held back for local ranks are not reserves. */
    cr_assert_eq(budget_reserve(&b, BUDGET_PLANNING, 1), HDMLP_E_INVAL);
    cr_assert_eq(budget_reserve(&b, BUDGET_LENT, 1), HDMLP_E_INVAL);
    sized_free(&s);
}

Test(budget, lending_follows_what_was_held_back)
{
    sized s;
    size_case(&CASES[4], &s);
    loader_budget b;
    cr_assert_eq(budget_init(&b, &s.sz, 2), HDMLP_OK);
    const uint64_t limit = budget_plan_limit(&b);
    cr_assert_eq(budget_hold_back(&b, 1000), HDMLP_OK);
    cr_assert_eq(budget_plan_limit(&b), limit - 1000, "holding back lowers the limit at once");
    cr_assert_eq(budget_lend(&b, 600), HDMLP_OK);
    cr_assert_eq(budget_plan_limit(&b), limit - 1000, "lending moves nothing more");
    cr_assert_eq(budget_room_to_give(&b, 0), limit - 600, "it keeps all but the 600 lent");
    cr_assert_eq(budget_borrow(&b, 300), HDMLP_OK);
    cr_assert_eq(budget_plan_limit(&b), limit - 1000 + 300);
    cr_assert_eq(budget_repay(&b, 300), HDMLP_OK);
    cr_assert_eq(budget_reclaim(&b, 600), HDMLP_OK);
    cr_assert_eq(budget_hold_back(&b, 0), HDMLP_OK);
    cr_assert_eq(budget_plan_limit(&b), limit, "everything back");
    cr_assert_eq(budget_total(&b), budget_memory(&b));
    sized_free(&s);
}

Test(budget, lending_beyond_what_was_held_back_is_refused_naming_the_numbers)
{
    sized s;
    size_case(&CASES[4], &s);
    loader_budget b;
    cr_assert_eq(budget_init(&b, &s.sz, 2), HDMLP_OK);
    cr_assert_eq(budget_hold_back(&b, 1000), HDMLP_OK);
    cr_assert_eq(budget_lend(&b, 600), HDMLP_OK);
    const loader_budget before = b;
    cr_assert_eq(budget_lend(&b, 401), HDMLP_E_RANGE);
    cr_assert_not_null(strstr(hdmlp_last_error(), "401 bytes cannot be lent: 1000 are held "
                                                  "back for local ranks, of which 600"),
                       "%s", hdmlp_last_error());
    cr_assert_eq(budget_hold_back(&b, 599), HDMLP_E_RANGE, "below what is lent");
    cr_assert_not_null(strstr(hdmlp_last_error(), "600 are lent already"), "%s",
                       hdmlp_last_error());
    cr_assert_eq(budget_hold_back(&b, budget_memory(&b)), HDMLP_E_RANGE, "above planning");
    cr_assert_eq(budget_reclaim(&b, 601), HDMLP_E_RANGE);
    cr_assert_not_null(strstr(hdmlp_last_error(), "601 bytes cannot come back: 600 are lent"),
                       "%s", hdmlp_last_error());
    cr_assert_eq(budget_repay(&b, 1), HDMLP_E_RANGE);
    cr_assert_not_null(strstr(hdmlp_last_error(), "1 bytes cannot be repaid: 0 are borrowed"),
                       "%s", hdmlp_last_error());
    cr_assert(memcmp(&before, &b, sizeof(b)) == 0, "refused moves changed the shares");
    sized_free(&s);
}
