/*
 * Threaded stress of the gRPC transport, in plain C so it runs under TSan (Criterion does
 * not start there): three ranks in one process, two sender threads per rank sending
 * REQUESTs and prefetch SAMPLEs to every other rank, handlers answering each REQUEST with
 * a SAMPLE from the server thread (as the loader does), stats read concurrently, then one
 * rank destroyed while the others keep sending to it. Checks counts, payloads and FIFO
 * order per (sender thread, class). Exit 0 on success. Seed: fixed payload pattern.
 */
#include "hdmlp.h"
#include "loader.h"
#include "rpc_transport.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WORLD 3
#define THREADS 2
#define PER_PEER 1500 /* messages per sender thread per peer (half REQUEST, half prefetch) */

/* Under TSan: Debian's gRPC, gpr, upb and abseil are not instrumented and synchronise
 * through futexes and atomics TSan cannot see, so ignore the accesses those modules make
 * through interceptors (memcpy, free, ...); our own code stays fully checked. */
#define TSAN_HOOK __attribute__((visibility("default"))) /* found by the TSan runtime */
TSAN_HOOK const char *__tsan_default_options(void);
TSAN_HOOK const char *__tsan_default_options(void)
{
    return "ignore_noninstrumented_modules=1";
}

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "rpc_stress: check failed: %s: ", #cond);                          \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

typedef struct rank_state {
    uint32_t rank;
    peer_transport *t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t requests, answers, prefetches, errors, bad;
    /* next expected seq per (from, thread, class) */
    uint64_t next[WORLD][THREADS][3];
    uint32_t failed_mask;
} rank_state;

static rank_state ranks[WORLD];
static uint8_t payload[8192];

static uint64_t pos_of(uint32_t thread, uint64_t seq) { return ((uint64_t)thread << 32) | seq; }

static void on_msg(void *ctx, const peer_msg *m)
{
    rank_state *s = ctx;
    const uint32_t th = (uint32_t)(m->position >> 32);
    const uint64_t seq = m->position & 0xffffffffu;
    const int cls = m->kind == PEER_REQUEST ? 0 : m->prefetch ? 2 : 1;
    int ok = m->from < WORLD && th < THREADS && m->to == s->rank;
    if (ok && m->kind == PEER_SAMPLE) {
        ok = m->size <= sizeof payload && memcmp(m->data, payload, m->size) == 0;
    }
    pthread_mutex_lock(&s->mu);
    if (!ok || s->next[m->from][th][cls] != seq) {
        s->bad++;
    } else {
        s->next[m->from][th][cls] = seq + 1;
    }
    s->requests += cls == 0;
    s->answers += cls == 1;
    s->prefetches += cls == 2;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (m->kind == PEER_REQUEST) {
        /* Answer from the server thread, as the loader's owner does. */
        peer_msg a;
        memset(&a, 0, sizeof a);
        a.kind = PEER_SAMPLE;
        a.from = s->rank;
        a.to = m->from;
        a.position = m->position;
        a.index = seq;
        a.data = payload;
        a.size = 64 + seq % 4000;
        const int rc = s->t->send(s->t, &a);
        if (rc != HDMLP_OK && rc != HDMLP_E_PEER && rc != HDMLP_E_STATE) {
            pthread_mutex_lock(&s->mu);
            s->bad++;
            pthread_mutex_unlock(&s->mu);
        }
    }
}

static void on_error(void *ctx, uint32_t rank, int code, const char *detail)
{
    rank_state *s = ctx;
    fprintf(stderr, "rpc_stress: rank %u: on_error(%u, %s): %s\n", s->rank, rank,
            hdmlp_err_name(code), detail);
    pthread_mutex_lock(&s->mu);
    s->errors++;
    if (code != HDMLP_E_PEER || strstr(detail, "rank ") == NULL) {
        s->bad++;
    }
    s->failed_mask |= 1u << rank;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

typedef struct sender {
    uint32_t rank, thread;
    uint64_t base; /* first seq (phase 2 continues phase 1's numbering) */
    int tolerate_failure;
    uint64_t sent_fail;
} sender;

static void *send_main(void *arg)
{
    sender *x = arg;
    rank_state *s = &ranks[x->rank];
    for (uint64_t seq = 0; seq < PER_PEER; seq++) {
        for (uint32_t to = 0; to < WORLD; to++) {
            if (to == x->rank) {
                continue;
            }
            peer_msg m;
            memset(&m, 0, sizeof m);
            m.from = x->rank;
            m.to = to;
            m.position = pos_of(x->thread, x->base + seq / 2);
            if (seq % 2 == 0) {
                m.kind = PEER_REQUEST;
                m.credit = seq;
            } else {
                m.kind = PEER_SAMPLE;
                m.prefetch = 1;
                m.data = payload;
                m.size = (seq * 37) % sizeof payload;
            }
            const int rc = s->t->send(s->t, &m);
            if (rc != HDMLP_OK) {
                CHECK(x->tolerate_failure && rc == HDMLP_E_PEER, "send: %s",
                      hdmlp_last_error());
                x->sent_fail++;
            }
        }
    }
    return NULL;
}

static void *stats_main(void *arg)
{
    atomic_int *stop = arg;
    uint64_t calls = 0;
    while (!*stop) {
        for (uint32_t r = 0; r < WORLD; r++) {
            rpc_stats st;
            rpc_transport_stats(ranks[r].t, &st);
            calls += st.calls_sent;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return (void *)(uintptr_t)calls;
}

static int wait_counts(rank_state *s, uint64_t req, uint64_t ans, uint64_t pf, int secs)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += secs;
    pthread_mutex_lock(&s->mu);
    while (s->requests < req || s->answers < ans || s->prefetches < pf) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0) {
            break;
        }
    }
    const int ok = s->requests >= req && s->answers >= ans && s->prefetches >= pf;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

int main(void)
{
    for (size_t i = 0; i < sizeof payload; i++) {
        payload[i] = (uint8_t)(i * 13 + 5);
    }
    char eps[WORLD][64];
    const char *ptrs[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        CHECK(rpc_pick_endpoint("127.0.0.1", eps[r], sizeof eps[r]) == HDMLP_OK, "%s",
              hdmlp_last_error());
        ptrs[r] = eps[r];
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        rank_state *s = &ranks[r];
        s->rank = r;
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cv, NULL);
        hdmlp_config *cfg;
        CHECK(hdmlp_config_create(&cfg) == HDMLP_OK, "config");
        hdmlp_config_set_rank(cfg, r, WORLD);
        hdmlp_config_set_peers(cfg, ptrs, WORLD);
        hdmlp_config_set_job_token(cfg, 99);
        hdmlp_config_set_peer_timeout(cfg, 5000);
        const peer_handler h = {s, on_msg, on_error};
        CHECK(rpc_transport_create(cfg, &h, &s->t) == HDMLP_OK, "create %u: %s", r,
              hdmlp_last_error());
        hdmlp_config_free(cfg);
    }
    /* Phase 1: everyone sends to everyone from two threads each. */
    atomic_int stop = 0;
    pthread_t st;
    pthread_create(&st, NULL, stats_main, &stop);
    pthread_t th[WORLD][THREADS];
    sender sx[WORLD][THREADS];
    for (uint32_t r = 0; r < WORLD; r++) {
        for (uint32_t k = 0; k < THREADS; k++) {
            sx[r][k] = (sender){r, k, 0, 0, 0};
            pthread_create(&th[r][k], NULL, send_main, &sx[r][k]);
        }
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        for (uint32_t k = 0; k < THREADS; k++) {
            pthread_join(th[r][k], NULL);
        }
    }
    const uint64_t per_rank = (uint64_t)(WORLD - 1) * THREADS * (PER_PEER / 2);
    for (uint32_t r = 0; r < WORLD; r++) {
        rank_state *s = &ranks[r];
        CHECK(wait_counts(s, per_rank, per_rank, per_rank, 120),
              "rank %u: %llu requests %llu answers %llu prefetches of %llu (%llu errors, "
              "failed mask %#x)",
              r, (unsigned long long)s->requests, (unsigned long long)s->answers,
              (unsigned long long)s->prefetches, (unsigned long long)per_rank,
              (unsigned long long)s->errors, s->failed_mask);
        CHECK(s->bad == 0 && s->errors == 0, "rank %u: %llu bad, %llu errors", r,
              (unsigned long long)s->bad, (unsigned long long)s->errors);
    }
    /* Phase 2: rank 2 goes away while 0 and 1 keep sending to everyone. */
    for (uint32_t r = 0; r < 2; r++) {
        for (uint32_t k = 0; k < THREADS; k++) {
            sx[r][k] = (sender){r, k, PER_PEER / 2, 1, 0};
            pthread_create(&th[r][k], NULL, send_main, &sx[r][k]);
        }
    }
    stop = 1;
    pthread_join(st, NULL);
    ranks[2].t->destroy(ranks[2].t);
    ranks[2].t = NULL;
    for (uint32_t r = 0; r < 2; r++) {
        for (uint32_t k = 0; k < THREADS; k++) {
            pthread_join(th[r][k], NULL);
        }
    }
    for (uint32_t r = 0; r < 2; r++) {
        rank_state *s = &ranks[r];
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 60;
        pthread_mutex_lock(&s->mu);
        while (!(s->failed_mask & 4u)) {
            if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0) {
                break;
            }
        }
        CHECK(s->failed_mask == 4u && s->bad == 0, "rank %u: failed mask %#x, %llu bad", r,
              s->failed_mask, (unsigned long long)s->bad);
        pthread_mutex_unlock(&s->mu);
    }
    for (uint32_t r = 0; r < 2; r++) {
        ranks[r].t->destroy(ranks[r].t);
    }
    printf("rpc_stress: ok (%llu messages per rank in phase 1)\n",
           (unsigned long long)(3 * per_rank));
    return 0;
}
