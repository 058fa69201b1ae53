/*
 * Per-GPU balance, the loader's side (mechanism): attaches the node board, publishes this
 * rank's slot once per window, runs the policy (loader_balance.c) and applies its decision
 * to the planning limit (holding back, lending and borrowing through the board's pool, each
 * move recorded by the budget's owner, loader_budget.h, which the limit follows) and to the
 * I/O threads (a gate on the worker loop, as the image pipeline's split: a held thread waits
 * on its own condition variable, so wake-ups for jobs never go to it). Called with the
 * loader lock held except where said.
 */
#include "loader_balance_apply.h"
#include "loader_balance.h"
#include "loader_core.h"

#include <string.h>

#define BALANCE_WINDOW_NS 20000000ull /* 20 ms */

struct balance_state {
    board *b;
    board_view *views;
    pthread_cond_t io_cv;
    uint32_t io_limit; /* 0 = all */
    uint64_t lookahead_share;
    uint64_t stale_ns;
    uint64_t window_start_ns, window_stall0, last_window_stall;
    uint64_t waits_on; /* owners the consumer was found waiting on in this window */
};

int node_balance_start(struct hdmlp_loader *ld, uint64_t lookahead_share)
{
    const int mode = ld->cfg.node_board;
    const int local_peers = ld->net != NULL && ld->net->peers_same_host > 0;
    if (ld->world < 2 || mode == HDMLP_NODE_BOARD_OFF ||
        (mode == HDMLP_NODE_BOARD_AUTO && !local_peers)) {
        return HDMLP_OK;
    }
    balance_state *s = hd_calloc(1, sizeof(*s));
    board_view *views = hd_calloc(ld->world, sizeof(*views));
    if (s == NULL || views == NULL) {
        hd_free(s);
        hd_free(views);
        return hd_err(HDMLP_E_NOMEM, "node board: out of memory");
    }
    /* The key: every rank's endpoint, so jobs sharing a token but not peers never meet. */
    size_t len = 1;
    for (uint32_t i = 0; i < ld->cfg.n_peers; i++) {
        len += strlen(ld->cfg.peers[i]) + 1;
    }
    char *key = hd_calloc(1, len);
    if (key == NULL) {
        hd_free(s);
        hd_free(views);
        return hd_err(HDMLP_E_NOMEM, "node board: out of memory");
    }
    for (uint32_t i = 0; i < ld->cfg.n_peers; i++) {
        strcat(key, ld->cfg.peers[i]);
        strcat(key, ",");
    }
    const int rc = board_open(ld->cfg.token, ld->world, ld->rank, key, &s->b);
    hd_free(key);
    if (rc != HDMLP_OK) {
        hd_free(s);
        hd_free(views);
        /* The board only moves timing: where it was not asked for explicitly, a host
         * without usable shared memory runs without it. */
        return mode == HDMLP_NODE_BOARD_AUTO ? HDMLP_OK : rc;
    }
    s->views = views;
    pthread_cond_init(&s->io_cv, NULL);
    s->lookahead_share = lookahead_share;
    s->stale_ns = (uint64_t)ld->cfg.peer_timeout_ms * 1000000ull;
    pthread_mutex_lock(&ld->lock);
    s->window_start_ns = loader_now_ns();
    s->window_stall0 = ld->st.stall_ns;
    ld->bal = s;
    ld->st.board_active = 1;
    pthread_mutex_unlock(&ld->lock);
    return HDMLP_OK;
}

/* Moves lent/borrowed towards the decision. The planning limit is lowered by the room held
 * back (budget_hold_back) and raised by what was borrowed: holding back stops admission at
 * once, while bytes enter the pool only as the rank's own use falls below what it keeps
 * (lent <= held back), and the limit goes up only by bytes taken back from the pool. The
 * budget's owner refuses nothing here (the policy lends at most half the lookahead share),
 * so its status is not checked. */
static void apply(struct hdmlp_loader *ld, balance_state *s, const balance_decision *d)
{
    loader_budget *b = &ld->budget;
    const uint64_t before = budget_plan_limit(b);
    const uint64_t borrowed = budget_borrowed(b);
    if (d->borrow < borrowed) {
        uint64_t back = borrowed - d->borrow;
        const uint64_t room = budget_room_to_give(b, ld->charged);
        back = back < room ? back : room;
        board_give(s->b, back);
        (void)budget_repay(b, back);
    } else if (d->borrow > borrowed) {
        (void)budget_borrow(b, board_take(s->b, d->borrow - borrowed));
    }
    if (d->lend < budget_lent(b)) {
        (void)budget_reclaim(b, board_take(s->b, budget_lent(b) - d->lend));
    }
    const uint64_t lent = budget_lent(b);
    const uint64_t lower = d->lend > lent ? d->lend : lent;
    (void)budget_hold_back(b, lower);
    if (lower > lent) {
        uint64_t more = lower - lent;
        const uint64_t room = budget_room_to_give(b, ld->charged);
        more = more < room ? more : room;
        (void)budget_lend(b, more);
        board_give(s->b, more);
    }
    if (budget_plan_limit(b) > before) {
        pthread_cond_broadcast(&ld->ready_cv); /* admission may go on */
    }
    if (d->io_limit != s->io_limit) {
        const int raised = d->io_limit == 0 || (s->io_limit != 0 && d->io_limit > s->io_limit);
        s->io_limit = d->io_limit;
        if (raised) {
            pthread_cond_broadcast(&s->io_cv);
        }
    }
    if (budget_lent(b) > ld->st.board_lent_peak) {
        ld->st.board_lent_peak = budget_lent(b);
    }
    if (budget_borrowed(b) > ld->st.board_borrowed_peak) {
        ld->st.board_borrowed_peak = budget_borrowed(b);
    }
}

/* Samples ready for the consumer without waiting (the ring's ready prefix), up to cap. */
static uint64_t ready_ahead(const struct hdmlp_loader *ld, uint64_t cap)
{
    uint64_t n = 0;
    while (n < ld->ring_count && n < cap) {
        const ld_item *it = &ld->ring[(ld->ring_head + n) % ld->ring_cap];
        if (it->s == NULL || it->s->state != SAMPLE_READY) {
            break;
        }
        n++;
    }
    return n;
}

void node_balance_tick(struct hdmlp_loader *ld)
{
    balance_state *s = ld->bal;
    if (s == NULL || ld->shutdown) {
        return;
    }
    if (ld->ring_count > 0) {
        /* The consumer's next position: whose read it waits for, if it is not ready. */
        const ld_item *it = &ld->ring[ld->ring_head];
        if (it->s == NULL || it->s->state == SAMPLE_PENDING) {
            s->waits_on |= 1ull << (it->owner % 64);
        }
    }
    const uint64_t now = loader_now_ns();
    if (now - s->window_start_ns < BALANCE_WINDOW_NS) {
        return;
    }
    s->last_window_stall = ld->st.stall_ns - s->window_stall0;
    s->window_stall0 = ld->st.stall_ns;
    s->window_start_ns = now;
    const board_slot_values mine = {ld->ring_count,
                                    ld->charged,
                                    ld->inflight,
                                    ld->st.stall_ns,
                                    s->last_window_stall,
                                    budget_lent(&ld->budget),
                                    budget_borrowed(&ld->budget),
                                    s->waits_on};
    s->waits_on = 0;
    board_publish(s->b, &mine, now);
    board_read(s->b, now, s->stale_ns, s->views);
    s->views[ld->rank].v = mine;
    const balance_input in = {ld->rank,      ld->world,     s->views,
                              ld->n_workers, ld->cfg.batch, s->lookahead_share};
    balance_decision d;
    balance_decide(&in, &d);
    apply(ld, s, &d);
    ld->st.board_windows++;
    ld->st.board_hold_windows += d.role == BALANCE_HOLD;
    ld->st.board_starved_windows += d.role == BALANCE_STARVED;
    ld->st.board_idle_windows += balance_idle_prefetch(&in, ready_ahead(ld, 2 * ld->cfg.batch));
    ld->st.board_lead_samples = ld->ring_count;
    uint64_t hi = ld->st.stall_ns, lo = ld->st.stall_ns;
    for (uint32_t r = 0; r < ld->world; r++) {
        if (s->views[r].fresh) {
            const uint64_t v = s->views[r].v.stall_ns;
            hi = v > hi ? v : hi;
            lo = v < lo ? v : lo;
        }
    }
    ld->st.node_stall_max_ns = hi;
    ld->st.node_stall_min_ns = lo;
}

int node_balance_io_allowed(const struct hdmlp_loader *ld, uint32_t i)
{
    const balance_state *s = ld->bal;
    return s == NULL || s->io_limit == 0 || i < s->io_limit || ld->shutdown;
}

void node_balance_io_wait(struct hdmlp_loader *ld)
{
    pthread_cond_wait(&ld->bal->io_cv, &ld->lock);
}

void node_balance_release(struct hdmlp_loader *ld)
{
    balance_state *s = ld->bal;
    if (s != NULL) {
        s->io_limit = 0;
        pthread_cond_broadcast(&s->io_cv);
    }
}

void node_balance_free(struct hdmlp_loader *ld)
{
    balance_state *s = ld->bal;
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&ld->lock);
    /* Borrowed bytes still held by outstanding batches are not returned (conservative);
     * lent bytes are taken back where the pool has them. */
    const balance_decision none = {0, 0, 0, BALANCE_NEUTRAL};
    apply(ld, s, &none);
    ld->bal = NULL;
    pthread_mutex_unlock(&ld->lock);
    board_close(s->b);
    pthread_cond_destroy(&s->io_cv);
    hd_free(s->views);
    hd_free(s);
}
