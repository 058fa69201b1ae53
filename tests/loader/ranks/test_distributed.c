/* The distributed protocol over an in-process transport: R loaders in one process. */
#include "hdmlp.h"
#include "support/fakenet.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rank_run {
    hdmlp_loader *ld;
    testds_seq seq; /* delivered indices and their epochs, all epochs */
    int rc;
    char err[256]; /* hdmlp_last_error() of a failed run */
    int hold;
    hdmlp_stats st;
} rank_run;

typedef struct dist_params {
    uint64_t n;
    uint32_t k;
    uint32_t world;
    double memory; /* fraction of the dataset per rank */
    uint32_t prefetch;
    uint64_t epochs;
    uint64_t seed;
    uint32_t batch;
    int kill_rank; /* -1: none */
    int hold;      /* the consumer keeps its last batch while asking for the next */
    uint32_t send_us, latency_us; /* fakenet_set_delays */
} dist_params;

/* Like a DataLoader worker: the previous batch is released only once the next has come. */
static int drain_holding(hdmlp_loader *ld, testds_seq *s)
{
    hdmlp_batch *held = NULL, *b;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        if (held != NULL) {
            hdmlp_batch_release(held);
        }
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
        held = b;
    }
    if (held != NULL) {
        hdmlp_batch_release(held);
    }
    return rc;
}

static void *consume(void *arg)
{
    rank_run *r = arg;
    r->rc = r->hold ? drain_holding(r->ld, &r->seq) : testds_drain(r->ld, &r->seq);
    if (r->rc != HDMLP_END) {
        snprintf(r->err, sizeof(r->err), "%s", hdmlp_last_error());
    }
    hdmlp_loader_stats(r->ld, &r->st, sizeof r->st);
    hdmlp_loader_free(r->ld);
    r->ld = NULL;
    return NULL;
}

/* Runs R loaders to the end, their transports made by `factory` (fakenet's, or one that
 * wraps it); returns per-rank results (caller frees). */
static rank_run *run_world_with(const char *dir, const dist_params *p,
                                peer_transport_factory factory)
{
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    fakenet *hub = NULL;
    fakenet_create(p->world, &hub);
    fakenet_set_delays(hub, p->send_us, p->latency_us);
    rank_run *runs = calloc(p->world, sizeof(*runs));
    const char *peers[8];
    for (uint32_t r = 0; r < p->world; r++) {
        peers[r] = "127.0.0.1:1";
    }
    for (uint32_t r = 0; r < p->world; r++) {
        hdmlp_config *cfg = NULL;
        hdmlp_config_create(&cfg);
        hdmlp_config_set_memory(cfg, (uint64_t)(hdmlp_dataset_raw_bytes(ds) * p->memory));
        hdmlp_config_set_batch_size(cfg, p->batch);
        hdmlp_config_set_epochs(cfg, p->epochs);
        hdmlp_config_set_seed(cfg, p->seed);
        hdmlp_config_set_rank(cfg, r, p->world);
        hdmlp_config_set_peers(cfg, peers, p->world);
        hdmlp_config_set_prefetch(cfg, p->prefetch);
        hdmlp_config_set_peer_timeout(cfg, 2000);
        const int rc = loader_create_with(ds, cfg, factory, &runs[r].ld);
        cr_assert_eq(rc, HDMLP_OK, "rank %u: %s", r, hdmlp_last_error());
        runs[r].hold = p->hold;
        hdmlp_config_free(cfg);
    }
    pthread_t th[8];
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

static rank_run *run_world(const char *dir, const dist_params *p)
{
    return run_world_with(dir, p, fakenet_factory);
}

static void free_runs(rank_run *runs, uint32_t world)
{
    for (uint32_t r = 0; r < world; r++) {
        testds_seq_free(&runs[r].seq);
    }
    free(runs);
}

/* Every sample exactly once per epoch across ranks. */
static void check_exactly_once(const rank_run *runs, const dist_params *p)
{
    uint8_t *seen = calloc(p->n * p->epochs, 1);
    uint64_t total = 0;
    for (uint32_t r = 0; r < p->world; r++) {
        cr_assert_eq(runs[r].rc, HDMLP_END, "rank %u ended with %s: %s", r,
                     hdmlp_err_name(runs[r].rc), runs[r].err);
        cr_assert_leq(runs[r].st.peak_memory_bytes, runs[r].st.memory_budget,
                      "rank %u: peak %llu accounted bytes above the %llu-byte budget", r,
                      (unsigned long long)runs[r].st.peak_memory_bytes,
                      (unsigned long long)runs[r].st.memory_budget);
        const uint64_t expect = (p->n / p->world + (r < p->n % p->world)) * p->epochs;
        const testds_seq *q = &runs[r].seq;
        cr_assert_eq(q->n, expect, "rank %u delivered %llu, expected %llu", r,
                     (unsigned long long)q->n, (unsigned long long)expect);
        for (uint64_t i = 0; i < q->n; i++) {
            const uint64_t e = q->ep[i];
            const uint64_t x = q->idx[i];
            cr_assert_lt(x, p->n);
            cr_assert_eq(seen[e * p->n + x], 0, "sample %llu twice in epoch %llu",
                         (unsigned long long)x, (unsigned long long)e);
            seen[e * p->n + x] = 1;
            total++;
        }
    }
    cr_assert_eq(total, p->n * p->epochs);
    free(seen);
}

static void make_ds(char *dir, size_t cap, uint64_t n, uint32_t k)
{
    cr_assert_eq(testds_mkdtemp("dist", dir, cap), 0);
    const testds_spec spec = {n, k, 0, 77, 200, 1200, 0, 0, 5, 0};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
}

Test(distributed, exactly_once_for_two_three_and_four_ranks, .timeout = 120)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 5003, 16);
    for (uint32_t world = 2; world <= 4; world++) {
        for (int pf = 0; pf < 2; pf++) {
            const dist_params p = {5003, 16, world, 0.25, pf ? 64 : 0, 3, 11, 32, -1, 0, 0, 0};
            rank_run *runs = run_world(dir, &p);
            check_exactly_once(runs, &p);
            free_runs(runs, world);
        }
    }
    testds_rm_rf(dir);
}

/* Samples with fields (field records) travel between ranks as any sample does: with and
 * without prefetch, every sample once per epoch, each rank's receipt checked against its own
 * tables (size and label). */
Test(distributed, samples_with_fields_travel_between_ranks, .timeout = 120)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("dist", dir, sizeof(dir)), 0);
    const testds_spec spec = {3001, 16, 0, 78, 0, 900, 1, 0, 5, 2};
    cr_assert_eq(testds_write_fields(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    for (int pf = 0; pf < 2; pf++) {
        const dist_params p = {3001, 16, 3, 0.3, pf ? 64 : 0, 2, 12, 32, -1, 0, 0, 0};
        rank_run *runs = run_world(dir, &p);
        check_exactly_once(runs, &p);
        for (uint32_t r = 0; r < 3; r++) {
            cr_expect_gt(runs[r].st.remote_hits + runs[r].st.remote_requests, 0,
                         "rank %u received nothing from its peers", r);
        }
        free_runs(runs, 3);
    }
    testds_rm_rf(dir);
}

/* A consumer that holds one batch while it asks for the next (as a DataLoader worker does)
 * must never run out of budget, down to the smallest budget a rank accepts. */
Test(distributed, holding_a_batch_never_exhausts_the_smallest_budgets, .timeout = 120)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 1200, 16);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK);
    const uint64_t raw = hdmlp_dataset_raw_bytes(ds);
    /* The smallest budget (in 1 % steps) two ranks with batch 32 accept. */
    double lo = 0.01;
    for (; lo < 2.0; lo += 0.01) {
        hdmlp_config *cfg = NULL;
        hdmlp_config_create(&cfg);
        hdmlp_config_set_memory(cfg, (uint64_t)(raw * lo));
        hdmlp_config_set_batch_size(cfg, 32);
        hdmlp_config_set_epochs(cfg, 1);
        hdmlp_config_set_rank(cfg, 0, 2);
        const char *peers[2] = {"127.0.0.1:1", "127.0.0.1:1"};
        hdmlp_config_set_peers(cfg, peers, 2);
        hdmlp_stats st;
        const int ok =
            hdmlp_loader_forecast(ds, cfg, &st, sizeof st, NULL, NULL, NULL) == HDMLP_OK;
        hdmlp_config_free(cfg);
        if (ok) {
            break;
        }
    }
    hdmlp_dataset_close(ds);
    for (int step = 0; step < 4; step++) {
        for (int pf = 0; pf < 2; pf++) {
            dist_params p = {1200, 16, 2, lo + 0.01 * step, pf ? 64 : 0, 2, 5, 32, -1, 1, 0, 0};
            rank_run *runs = run_world(dir, &p);
            check_exactly_once(runs, &p);
            free_runs(runs, 2);
        }
    }
    printf("holding a batch: budgets from %.0f %% of the dataset per rank\n", lo * 100);
    testds_rm_rf(dir);
}

Test(distributed, sequences_are_deterministic_with_and_without_prefetch, .timeout = 120)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 3000, 8);
    for (int pf = 0; pf < 2; pf++) {
        const dist_params p = {3000, 8, 3, 0.3, pf ? 128 : 0, 2, 5, 16, -1, 0, 0, 0};
        rank_run *a = run_world(dir, &p);
        rank_run *b = run_world(dir, &p);
        for (uint32_t r = 0; r < 3; r++) {
            cr_assert_eq(a[r].seq.n, b[r].seq.n);
            cr_assert_eq(memcmp(a[r].seq.idx, b[r].seq.idx, a[r].seq.n * sizeof(uint64_t)), 0,
                         "rank %u's sequence differs between identical runs (prefetch %d)", r,
                         pf);
        }
        free_runs(a, 3);
        free_runs(b, 3);
    }
    testds_rm_rf(dir);
}

Test(distributed, prefetch_cuts_remote_requests, .timeout = 120)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 8000, 16);
    uint64_t req[2] = {0, 0}, hits = 0;
    for (int pf = 0; pf < 2; pf++) {
        const dist_params p = {8000, 16, 4, 0.25, pf ? 256 : 0, 1, 3, 32, -1, 0, 0, 0};
        rank_run *runs = run_world(dir, &p);
        check_exactly_once(runs, &p);
        for (uint32_t r = 0; r < 4; r++) {
            req[pf] += runs[r].st.remote_requests;
            if (pf) {
                hits += runs[r].st.remote_hits;
            }
        }
        free_runs(runs, 4);
    }
    printf("remote requests: prefetch off %llu, on %llu (%.1fx fewer); remote hits %llu\n",
           (unsigned long long)req[0], (unsigned long long)req[1],
           req[1] ? (double)req[0] / (double)req[1] : 0.0, (unsigned long long)hits);
    cr_assert_gt(req[0], 0);
    cr_assert_lt(req[1] * 4, req[0], "prefetch should cut remote requests at least 4x");
    testds_rm_rf(dir);
}

/* Over a network with a send cost and latency, prefetches are in flight while a rank asks
 * for more, and one rank's messages are sent by several threads: every rank's prefetches
 * in flight and held stay within its remote memory (the budget holds), and no request is
 * lost to one sent earlier overtaking it (every rank ends). */
Test(distributed, a_slow_network_keeps_the_budget_and_loses_no_request, .timeout = 120)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 3000, 8);
    for (uint32_t world = 2; world <= 3; world++) {
        const dist_params p = {3000, 8, world, 0.25, 256, 2, 13, 16, -1, 0, 100, 100};
        rank_run *runs = run_world(dir, &p);
        check_exactly_once(runs, &p);
        uint64_t pushed = 0;
        for (uint32_t r = 0; r < world; r++) {
            pushed += runs[r].st.prefetch_sent;
            cr_assert_leq(runs[r].st.remote_peak, runs[r].st.budget_remote,
                          "world %u rank %u: %llu bytes of prefetches held, above its %llu",
                          world, r, (unsigned long long)runs[r].st.remote_peak,
                          (unsigned long long)runs[r].st.budget_remote);
        }
        cr_assert_gt(pushed, 0, "prefetches were sent");
        free_runs(runs, world);
    }
    testds_rm_rf(dir);
}

/* The arena size each rank's transport was handed (recording_factory). */
static uint64_t arena_seen[2];

static int recording_factory(const struct hdmlp_config *cfg, const peer_handler *h,
                             peer_transport **out)
{
    arena_seen[cfg->rank] = cfg->peer_arena;
    return fakenet_factory(cfg, h, out);
}

/* A loader hands its transport the size of its sample arena, from its budget (1.5 times it):
 * the transport does not derive it. */
Test(distributed, the_transport_gets_its_arena_size_from_the_budget, .timeout = 60)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 2000, 8);
    const dist_params p = {2000, 8, 2, 0.25, 0, 1, 3, 16, -1, 0, 0, 0};
    rank_run *runs = run_world_with(dir, &p, recording_factory);
    check_exactly_once(runs, &p);
    for (uint32_t r = 0; r < 2; r++) {
        const uint64_t budget = runs[r].st.memory_budget;
        cr_assert_eq(arena_seen[r], budget + budget / 2,
                     "rank %u: arena %llu for a budget of %llu", r,
                     (unsigned long long)arena_seen[r], (unsigned long long)budget);
    }
    free_runs(runs, 2);
    testds_rm_rf(dir);
}

Test(distributed, dead_peer_fails_the_others_with_peer_error, .timeout = 60)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 4000, 8);
    const dist_params p = {4000, 8, 3, 0.25, 0, 5, 9, 16, 1, 0, 0, 0};
    rank_run *runs = run_world(dir, &p);
    int peer_errors = 0;
    for (uint32_t r = 0; r < 3; r++) {
        if (r != 1) {
            cr_assert_neq(runs[r].rc, HDMLP_END, "rank %u finished although rank 1 died", r);
            peer_errors += runs[r].rc == HDMLP_E_PEER;
        }
    }
    cr_assert_gt(peer_errors, 0);
    free_runs(runs, 3);
    testds_rm_rf(dir);
}

Test(distributed, world_needs_matching_peer_list)
{
    char dir[512];
    make_ds(dir, sizeof(dir), 100, 4);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK);
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_rank(cfg, 0, 2);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(loader_create_with(ds, cfg, fakenet_factory, &ld), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "peer") != NULL, "%s", hdmlp_last_error());
    cr_assert_null(ld);
    cr_assert_eq(loader_create_with(ds, cfg, NULL, &ld), HDMLP_E_UNSUPPORTED);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}
