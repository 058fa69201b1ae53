/*
 * Per-GPU balance across local ranks: the node board (loader_board.c), its policy
 * (loader_balance.c) and local ranks over the in-process transport with the board on and
 * off (same order, exactly once, budgets, a rank ending early or dying).
 */
#include "hdmlp.h"
#include "loader.h"
#include "loader_balance.h"
#include "loader_board.h"
#include "support/fakenet.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- policy -------------------------------------------------------------------------- */

static board_view view(uint64_t lead, uint64_t stall_window, int fresh)
{
    board_view v;
    memset(&v, 0, sizeof(v));
    v.v.lead_items = lead;
    v.v.stall_window_ns = stall_window;
    v.fresh = fresh;
    v.heartbeat_ns = 1;
    return v;
}

static balance_decision decide(const board_view *views, uint32_t world, uint32_t rank)
{
    const balance_input in = {rank, world, views, 4, 16, 1000};
    balance_decision d;
    balance_decide(&in, &d);
    return d;
}

Test(balance_policy, alone_or_nobody_starved_releases_everything)
{
    board_view alone[2] = {view(100, 5000, 0), view(0, 9000, 0)}; /* rank 1 stale */
    balance_decision d = decide(alone, 2, 0);
    cr_assert_eq(d.io_limit, 0);
    cr_assert_eq(d.lend, 0);
    cr_assert_eq(d.borrow, 0);
    board_view calm[3] = {view(100, 0, 0), view(1, 0, 1), view(50, 0, 1)};
    d = decide(calm, 3, 0);
    cr_assert_eq(d.role, BALANCE_NEUTRAL);
    cr_assert_eq(d.io_limit + d.lend + d.borrow, 0);
}

Test(balance_policy, the_most_starved_rank_borrows_its_lookahead_share)
{
    board_view v[3] = {view(0, 7000, 0), view(100, 0, 1), view(3, 2000, 1)};
    balance_decision d = decide(v, 3, 0);
    cr_assert_eq(d.role, BALANCE_STARVED);
    cr_assert_eq(d.borrow, 1000);
    cr_assert_eq(d.io_limit, 0);
    cr_assert_eq(d.lend, 0);
    /* Rank 2 stalls too, less: it is neither starved-most nor ahead, so neutral. */
    v[0].fresh = 1;
    v[2].fresh = 0;
    d = decide(v, 3, 2);
    cr_assert_eq(d.role, BALANCE_NEUTRAL);
    cr_assert_eq(d.borrow, 0);
}

Test(balance_policy, a_rank_far_ahead_holds_back_for_a_starved_one)
{
    board_view v[2] = {view(100, 0, 0), view(0, 7000, 1)};
    balance_decision d = decide(v, 2, 0);
    cr_assert_eq(d.role, BALANCE_HOLD);
    cr_assert_eq(d.io_limit, 2, "half of 4 threads");
    cr_assert_eq(d.lend, 500, "half the lookahead share");
    /* Less than two batches ahead (2 x 16 samples): neutral. */
    v[0] = view(31, 0, 0);
    d = decide(v, 2, 0);
    cr_assert_eq(d.role, BALANCE_NEUTRAL);
    /* Ahead but stalling itself: neutral. */
    v[0] = view(100, 10, 0);
    d = decide(v, 2, 0);
    cr_assert_eq(d.role, BALANCE_NEUTRAL);
    /* The starved rank waits on this rank's reads: holding back would starve it more. */
    v[0] = view(100, 0, 0);
    v[1].v.waits_on = 1ull << 0;
    d = decide(v, 2, 0);
    cr_assert_eq(d.role, BALANCE_NEUTRAL);
    v[1].v.waits_on = 1ull << 1; /* on its own reads only */
    d = decide(v, 2, 0);
    cr_assert_eq(d.role, BALANCE_HOLD);
    v[1].v.waits_on = 0;
    /* The starved rank's slot went stale (it died): released. */
    v[0] = view(100, 0, 0);
    v[1].fresh = 0;
    d = decide(v, 2, 0);
    cr_assert_eq(d.role, BALANCE_NEUTRAL);
    cr_assert_eq(d.lend + d.io_limit, 0);
}

Test(balance_policy, idle_prefetch_is_two_ready_batches_beside_a_waiting_rank)
{
    const board_view waiting[2] = {view(100, 0, 0), view(0, 7000, 1)};
    const balance_input in = {0, 2, waiting, 4, 16, 1000};
    cr_assert(balance_idle_prefetch(&in, 32), "two batches ready while rank 1 waits");
    cr_assert_not(balance_idle_prefetch(&in, 31), "less than two batches ready");
    const board_view stale[2] = {view(100, 0, 0), view(0, 7000, 0)};
    const balance_input gone = {0, 2, stale, 4, 16, 1000};
    cr_assert_not(balance_idle_prefetch(&gone, 64), "the waiting rank's slot is stale");
    const board_view both[2] = {view(100, 500, 0), view(0, 7000, 1)};
    const balance_input self = {0, 2, both, 4, 16, 1000};
    cr_assert_not(balance_idle_prefetch(&self, 64), "this rank waited too");
    const board_view calm[3] = {view(100, 0, 0), view(5, 0, 1), view(9, 0, 1)};
    const balance_input none = {0, 3, calm, 4, 16, 1000};
    cr_assert_not(balance_idle_prefetch(&none, 64), "nobody waited");
}

Test(balance_policy, one_thread_is_never_held)
{
    board_view v[2] = {view(100, 0, 0), view(0, 7000, 1)};
    const balance_input in = {0, 2, v, 1, 16, 1000};
    balance_decision d;
    balance_decide(&in, &d);
    cr_assert_eq(d.role, BALANCE_HOLD);
    cr_assert_eq(d.io_limit, 0, "a single I/O thread keeps running");
    cr_assert_eq(d.lend, 500, "its memory is still lent");
}

/* ---- the board ----------------------------------------------------------------------- */

static uint64_t test_token(void) { return ((uint64_t)getpid() << 20) ^ (uint64_t)time(NULL); }

static int shm_exists(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "/dev/shm%s", name);
    struct stat st;
    return stat(path, &st) == 0;
}

Test(board, ranks_of_a_job_share_slots_and_the_last_out_removes_it, .timeout = 10)
{
    const uint64_t tok = test_token();
    board *a = NULL, *b = NULL, *other = NULL;
    cr_assert_eq(board_open(tok, 2, 0, "h:1,h:2,", &a), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(board_open(tok, 2, 1, "h:1,h:2,", &b), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(board_open(tok, 2, 1, "h:1,h:3,", &other), HDMLP_OK);
    cr_assert_str_eq(board_name(a), board_name(b));
    cr_assert_str_neq(board_name(a), board_name(other), "other peers, other board");
    const board_slot_values v = {7, 700, 2, 123, 45, 0, 0, 6};
    board_publish(b, &v, 1000000000ull);
    board_view views[2];
    cr_assert_eq(board_read(a, 1000000000ull + 10, 1000, views), 1);
    cr_assert(views[1].fresh);
    cr_assert(!views[0].fresh, "a rank's own slot is never fresh to itself");
    cr_assert_eq(views[1].v.lead_items, 7);
    cr_assert_eq(views[1].v.stall_window_ns, 45);
    cr_assert_eq(views[1].v.waits_on, 6);
    cr_assert_eq(board_read(a, 1000000000ull + 5000, 1000, views), 0, "stale heartbeat");
    board_read(other, 1000000000ull + 10, 1000, views);
    cr_assert(!views[1].fresh && !views[0].fresh, "another job's board is empty");

    /* The pool never goes below zero: takes get at most what was given. */
    cr_assert_eq(board_take(a, 100), 0);
    board_give(a, 300);
    cr_assert_eq(board_take(b, 200), 200);
    cr_assert_eq(board_take(b, 200), 100);
    cr_assert_eq(board_pool(a), 0);

    char name[128];
    snprintf(name, sizeof(name), "%s", board_name(a));
    cr_assert(shm_exists(name));
    board_close(a);
    cr_assert(shm_exists(name), "rank 1 is still attached");
    board_close(b);
    cr_assert(!shm_exists(name), "the last rank out unlinks %s", name);
    board_close(other);
    cr_assert_eq(board_open(tok, 2, 2, NULL, &a), HDMLP_E_INVAL);
    cr_assert_null(a);
}

Test(board, a_segment_left_by_a_dead_job_is_cleared, .timeout = 10)
{
    const uint64_t tok = test_token() ^ 0x5a5a;
    /* A job that dies attached: the name stays, the kernel drops its lock. */
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        board *d = NULL;
        if (board_open(tok, 2, 0, "x", &d) != HDMLP_OK) {
            _exit(1);
        }
        board_give(d, 12345);
        const board_slot_values v = {1, 1, 1, 1, 1, 0, 12345, 1};
        board_publish(d, &v, 77);
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    board *a = NULL, *b = NULL;
    cr_assert_eq(board_open(tok, 2, 1, "x", &a), HDMLP_OK);
    char name[128];
    snprintf(name, sizeof(name), "%s", board_name(a));
    cr_assert_eq(board_pool(a), 0, "the dead job's pool was cleared");
    board_view views[2];
    board_read(a, 100, 1000000, views);
    cr_assert_eq(views[0].heartbeat_ns, 0, "and its slots");
    board_give(a, 999);
    cr_assert_eq(board_open(tok, 2, 0, "x", &b), HDMLP_OK);
    cr_assert_eq(board_pool(b), 999, "a second rank attaching keeps the live pool");
    board_close(b);
    board_close(a);
    cr_assert(!shm_exists(name));
}

Test(board, segments_of_dead_jobs_are_swept, .timeout = 10)
{
    const uint64_t tok = test_token() ^ 0x7e7e;
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        board *d = NULL;
        _exit(board_open(tok, 3, 2, "dead", &d) == HDMLP_OK ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    board *live = NULL;
    cr_assert_eq(board_open(tok, 2, 0, "live", &live), HDMLP_OK);
    char dead_prefix[96], live_name[96];
    snprintf(live_name, sizeof(live_name), "%s", board_name(live));
    snprintf(dead_prefix, sizeof(dead_prefix), "hdmlp-board-%u-%016llx-", (unsigned)getuid(),
             (unsigned long long)tok);
    char cmd[192];
    snprintf(cmd, sizeof(cmd), "ls /dev/shm | grep '^%s' | wc -l | grep -qx 2", dead_prefix);
    cr_assert_eq(system(cmd), 0, "the dead job's segment and the live one");
    cr_assert_geq(board_sweep(NULL, 0), 1,
                  "the dead job's segment goes (and any other unheld)");
    cr_assert(shm_exists(live_name));
    snprintf(cmd, sizeof(cmd), "ls /dev/shm | grep '^%s' | wc -l | grep -qx 1", dead_prefix);
    cr_assert_eq(system(cmd), 0);
    board_close(live);
    cr_assert(!shm_exists(live_name));
}

/* ---- local ranks over the in-process transport ---------------------------------------- */

typedef struct rank_run {
    hdmlp_loader *ld;
    testds_seq seq;
    int rc;
    char err[256];       /* hdmlp_last_error() of a failed next */
    uint32_t delay_us;   /* the consumer's compute per batch */
    uint64_t stop_after; /* batches, then free (0 = to the end) */
    hdmlp_stats st;
} rank_run;

static void record(testds_seq *s, const hdmlp_batch *b)
{
    const hdmlp_sample_view *v = hdmlp_batch_samples(b);
    for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 1024;
            s->idx = realloc(s->idx, s->cap * sizeof(uint64_t));
            s->ep = realloc(s->ep, s->cap * sizeof(uint64_t));
            cr_assert(s->idx != NULL && s->ep != NULL);
        }
        s->ep[s->n] = hdmlp_batch_epoch(b);
        s->idx[s->n++] = v[i].index;
    }
}

static void *consume(void *arg)
{
    rank_run *r = arg;
    hdmlp_batch *b;
    uint64_t batches = 0;
    while ((r->rc = hdmlp_loader_next(r->ld, &b)) == HDMLP_OK) {
        record(&r->seq, b);
        if (r->delay_us > 0) {
            const struct timespec ts = {0, (long)r->delay_us * 1000};
            nanosleep(&ts, NULL);
        }
        hdmlp_batch_release(b);
        if (r->stop_after != 0 && ++batches == r->stop_after) {
            break;
        }
    }
    if (r->rc != HDMLP_END && r->rc != HDMLP_OK) {
        snprintf(r->err, sizeof(r->err), "%s", hdmlp_last_error());
    }
    hdmlp_loader_stats(r->ld, &r->st, sizeof r->st);
    hdmlp_loader_free(r->ld);
    r->ld = NULL;
    return NULL;
}

typedef struct world_params {
    uint64_t n;
    uint32_t world;
    int board; /* HDMLP_NODE_BOARD_* */
    uint32_t slow_rank, slow_us;
    int stop_rank; /* -1: none */
    int kill_rank; /* -1: none */
    uint64_t token;
} world_params;

static rank_run *run_world(const char *dir, const world_params *p)
{
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    fakenet *hub = NULL;
    fakenet_create(p->world, &hub);
    rank_run *runs = calloc(p->world, sizeof(*runs));
    const char *peers[4] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"};
    for (uint32_t r = 0; r < p->world; r++) {
        hdmlp_config *cfg = NULL;
        hdmlp_config_create(&cfg);
        hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
        hdmlp_config_set_batch_size(cfg, 16);
        hdmlp_config_set_epochs(cfg, 2);
        hdmlp_config_set_seed(cfg, 31);
        hdmlp_config_set_threads(cfg, 4);
        hdmlp_config_set_rank(cfg, r, p->world);
        hdmlp_config_set_peers(cfg, peers, p->world);
        hdmlp_config_set_job_token(cfg, p->token);
        hdmlp_config_set_peer_timeout(cfg, 2000);
        cr_assert_eq(hdmlp_config_set_node_board(cfg, p->board), HDMLP_OK);
        const int rc = loader_create_with(ds, cfg, fakenet_factory, &runs[r].ld);
        cr_assert_eq(rc, HDMLP_OK, "rank %u: %s", r, hdmlp_last_error());
        runs[r].delay_us = r == p->slow_rank ? p->slow_us : 0;
        runs[r].stop_after = (int)r == p->stop_rank ? 5 : 0;
        hdmlp_config_free(cfg);
    }
    pthread_t th[4];
    for (uint32_t r = 0; r < p->world; r++) {
        pthread_create(&th[r], NULL, consume, &runs[r]);
    }
    if (p->kill_rank >= 0) {
        fakenet_kill(hub, (uint32_t)p->kill_rank);
    }
    for (uint32_t r = 0; r < p->world; r++) {
        pthread_join(th[r], NULL);
    }
    fakenet_free(hub);
    hdmlp_dataset_close(ds);
    return runs;
}

static void free_runs(rank_run *runs, uint32_t world)
{
    for (uint32_t r = 0; r < world; r++) {
        testds_seq_free(&runs[r].seq);
    }
    free(runs);
}

static void make_ds(char *dir, size_t cap, uint64_t n)
{
    cr_assert_eq(testds_mkdtemp("bal", dir, cap), 0);
    const testds_spec spec = {n, 8, 0, 91, 200, 1200, 0, 0, 5, 0};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
}

static int no_board_left(uint64_t token)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "hdmlp-board-%u-%016llx-", (unsigned)getuid(),
             (unsigned long long)token);
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "ls /dev/shm 2>/dev/null | grep -q '^%s'", prefix);
    return system(cmd) != 0;
}

Test(local_ranks, same_order_and_exactly_once_with_the_board_on_and_off, .timeout = 120)
{
    char dir[512];
    const uint64_t n = getenv("HDMLP_TEST_SHORT") != NULL ? 1200 : 3000;
    make_ds(dir, sizeof(dir), n);
    for (uint32_t world = 2; world <= 3; world++) {
        world_params p = {n, world, HDMLP_NODE_BOARD_OFF, 0, 300, -1, -1, test_token() + world};
        rank_run *off = run_world(dir, &p);
        p.board = HDMLP_NODE_BOARD_ON;
        rank_run *on = run_world(dir, &p);
        uint8_t *seen = calloc(n * 2, 1);
        uint64_t windows = 0;
        for (uint32_t r = 0; r < world; r++) {
            cr_assert_eq(off[r].rc, HDMLP_END, "off, rank %u: %s: %s", r,
                         hdmlp_err_name(off[r].rc), off[r].err);
            cr_assert_eq(on[r].rc, HDMLP_END, "on, rank %u: %s: %s", r,
                         hdmlp_err_name(on[r].rc), on[r].err);
            cr_assert_eq(off[r].st.board_active, 0);
            cr_assert_eq(on[r].st.board_active, 1);
            windows += on[r].st.board_windows;
            cr_assert_eq(on[r].seq.n, off[r].seq.n, "rank %u: as many samples", r);
            for (uint64_t i = 0; i < on[r].seq.n; i++) {
                cr_assert_eq(on[r].seq.idx[i], off[r].seq.idx[i],
                             "world %u rank %u position %llu differs with the board", world, r,
                             (unsigned long long)i);
                cr_assert_eq(on[r].seq.ep[i], off[r].seq.ep[i]);
                uint8_t *s = &seen[on[r].seq.ep[i] * n + on[r].seq.idx[i]];
                cr_assert_eq(*s, 0, "sample %llu twice", (unsigned long long)on[r].seq.idx[i]);
                *s = 1;
            }
            /* A rank holds at most its budget plus what it borrowed from the others. */
            cr_assert_leq(on[r].st.peak_memory_bytes,
                          on[r].st.memory_budget + on[r].st.board_borrowed_peak,
                          "on, world %u rank %u: peak %llu, budget %llu + borrowed %llu", world,
                          r, (unsigned long long)on[r].st.peak_memory_bytes,
                          (unsigned long long)on[r].st.memory_budget,
                          (unsigned long long)on[r].st.board_borrowed_peak);
            cr_assert_leq(off[r].st.peak_memory_bytes, off[r].st.memory_budget,
                          "off, world %u rank %u: peak %llu, budget %llu", world, r,
                          (unsigned long long)off[r].st.peak_memory_bytes,
                          (unsigned long long)off[r].st.memory_budget);
            cr_assert_geq(on[r].st.node_stall_max_ns, on[r].st.node_stall_min_ns);
        }
        for (uint64_t i = 0; i < 2 * n; i++) {
            cr_assert(seen[i], "sample %llu of epoch %llu never delivered",
                      (unsigned long long)(i % n), (unsigned long long)(i / n));
        }
        cr_assert_gt(windows, 0, "the board ran");
        cr_assert(no_board_left(p.token), "the board was removed");
        free(seen);
        free_runs(off, world);
        free_runs(on, world);
    }
    testds_rm_rf(dir);
}

/* Ranks 0 and 2 reach their end first and keep serving the slow rank 1 (their slots go
 * quiet, then away) while it finishes. A rank that leaves mid-epoch fails the others with
 * HDMLP_E_PEER, board or not (the exchange's rule): a_dead_rank_... below. */
Test(local_ranks, ranks_that_finish_first_leave_the_slow_one_running, .timeout = 120)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 1500);
    const world_params p = {1500, 3, HDMLP_NODE_BOARD_ON, 1, 2000, -1, -1, test_token() ^ 77};
    rank_run *runs = run_world(dir, &p);
    for (uint32_t r = 0; r < 3; r++) {
        cr_assert_eq(runs[r].rc, HDMLP_END, "rank %u: %s", r, hdmlp_err_name(runs[r].rc));
        cr_assert_eq(runs[r].seq.n, 2 * 500, "rank %u: its 500 samples in each epoch", r);
    }
    cr_assert(no_board_left(p.token));
    free_runs(runs, 3);
    testds_rm_rf(dir);
}

Test(local_ranks, a_dead_rank_fails_the_others_without_a_hang, .timeout = 60)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 3000);
    const world_params p = {3000, 3, HDMLP_NODE_BOARD_ON, 0, 0, -1, 1, test_token() ^ 99};
    rank_run *runs = run_world(dir, &p);
    for (uint32_t r = 0; r < 3; r++) {
        if (r != 1) {
            cr_assert_neq(runs[r].rc, HDMLP_END, "rank %u finished although rank 1 died", r);
        }
    }
    cr_assert(no_board_left(p.token));
    free_runs(runs, 3);
    testds_rm_rf(dir);
}

Test(local_ranks, config_rejects_unknown_board_modes)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_node_board(cfg, 3), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "node_board") != NULL);
    cr_assert_eq(hdmlp_config_set_node_board(cfg, HDMLP_NODE_BOARD_OFF), HDMLP_OK);
    hdmlp_config_free(cfg);
}

/* The in-process transport reaches no peer over a same-host path: auto leaves the board off
 * (over the real exchange, local peers turn it on: tests/dist, hdmlp-bench --peers). */
Test(local_ranks, auto_is_off_without_same_host_peers, .timeout = 60)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 1200);
    const world_params p = {1200, 2, HDMLP_NODE_BOARD_AUTO, 0, 0, -1, -1, test_token() ^ 55};
    rank_run *runs = run_world(dir, &p);
    for (uint32_t r = 0; r < 2; r++) {
        cr_assert_eq(runs[r].rc, HDMLP_END);
        cr_assert_eq(runs[r].st.board_active, 0);
        cr_assert_eq(runs[r].st.board_windows, 0);
    }
    free_runs(runs, 2);
    testds_rm_rf(dir);
}

/* A rank that stops after 5 batches and frees its loader (DONE with samples decided for it
 * still unsent): the others fail with HDMLP_E_PEER naming it, never hang: by the peer
 * timeout when they wait for its samples, or, when the samples they decided for it fill their
 * memory (never taken now), as soon as the plan is stuck on them. */
Test(local_ranks, a_rank_that_stops_early_fails_the_others_without_a_hang, .timeout = 60)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 3000);
    for (uint32_t world = 2; world <= 3; world++) {
        for (int on = 0; on < 2; on++) {
            const world_params p = {
                3000, world, on ? HDMLP_NODE_BOARD_ON : HDMLP_NODE_BOARD_OFF,  0, 0,
                1,    -1,    test_token() ^ (1000u + 2 * world + (uint32_t)on)};
            rank_run *runs = run_world(dir, &p);
            cr_assert_eq(runs[1].rc, HDMLP_OK, "rank 1 stopped by itself");
            uint32_t named = 0; /* a rank failing in turn may be named by a third one */
            for (uint32_t r = 0; r < world; r++) {
                if (r != 1) {
                    cr_assert_eq(runs[r].rc, HDMLP_E_PEER, "world %u rank %u: %s: %s", world, r,
                                 hdmlp_err_name(runs[r].rc), runs[r].err);
                    named += strstr(runs[r].err, "rank 1 ") != NULL;
                }
            }
            cr_assert_geq(named, 1, "a rank names rank 1");
            cr_assert(no_board_left(p.token));
            free_runs(runs, world);
        }
    }
    testds_rm_rf(dir);
}
