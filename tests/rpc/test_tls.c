/*
 * Mutual TLS for the peer exchange (hdmlp_config_set_tls): real loaders, each with its own
 * gRPC transport on loopback, using the committed test certificates of tests/data/tls
 * (made by make.sh: a CA, a peer certificate it signed for 127.0.0.1, and a "rogue" one
 * signed by another CA). 2 and 3 ranks with TLS deliver every sample exactly once, in the
 * same sequence as without TLS; a rank whose certificate comes from another CA, and a
 * plaintext rank among TLS ones, are refused (HDMLP_E_PEER naming the rank, within a few
 * peer timeouts, no hang); unusable files fail hdmlp_loader_create naming file and role;
 * the setter takes all three files or none. tls_bench prints what TLS costs the transport
 * (connection set-up, one-at-a-time latency, 64 KiB and 1 MiB message throughput).
 * Ports come from rpc_pick_endpoint("127.0.0.1").
 */
#include "hdmlp.h"
#include "rpc_transport.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RANKS 4
#define N_SAMPLES 2000

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* What one rank uses: on 0 = plaintext. */
typedef struct tls_files {
    int on;
    char ca[512], cert[512], key[512];
} tls_files;

/* Names are in tests/data/tls unless they are absolute paths. */
static void tls_path(char *out, size_t cap, const char *name)
{
    const char *data = getenv("HDMLP_TEST_DATA"); /* set by ctest */
    if (name[0] == '/') {
        snprintf(out, cap, "%s", name);
    } else {
        snprintf(out, cap, "%s/tls/%s", data != NULL ? data : "tests/data", name);
    }
}

static tls_files files(const char *ca, const char *cert, const char *key)
{
    tls_files t;
    t.on = 1;
    tls_path(t.ca, sizeof t.ca, ca);
    tls_path(t.cert, sizeof t.cert, cert);
    tls_path(t.key, sizeof t.key, key);
    return t;
}

static tls_files good(void) { return files("ca.pem", "rank.pem", "rank.key"); }

/* Trusts our CA, but its own certificate is signed by another one. */
static tls_files rogue(void) { return files("ca.pem", "rogue.pem", "rogue.key"); }

static const tls_files plain = {0, "", "", ""};

typedef struct rank_run {
    hdmlp_loader *ld;
    testds_seq seq;
    int rc;
    char err[512];
    uint64_t ms; /* create to the end of hdmlp_loader_free */
    uint64_t t0;
} rank_run;

static void *consume(void *arg)
{
    rank_run *r = arg;
    r->rc = testds_drain(r->ld, &r->seq);
    snprintf(r->err, sizeof r->err, "%s", hdmlp_last_error());
    hdmlp_loader_free(r->ld);
    r->ld = NULL;
    r->ms = now_ms() - r->t0;
    return NULL;
}

typedef struct fixture {
    char dir[512];
    hdmlp_dataset *ds;
} fixture;

static void fixture_open(fixture *f)
{
    cr_assert_eq(testds_mkdtemp("tls", f->dir, sizeof f->dir), 0);
    const testds_spec spec = {N_SAMPLES, 10, 0, 77, 200, 1200, 0, 0, 5, 0};
    cr_assert_eq(testds_write(f->dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_open(f->dir, &f->ds), HDMLP_OK, "%s", hdmlp_last_error());
}

static void fixture_close(fixture *f)
{
    hdmlp_dataset_close(f->ds);
    testds_rm_rf(f->dir);
}

/* A config for rank r of world with endpoints eps, TLS files t and a peer timeout. */
static hdmlp_config *rank_config(const fixture *f, uint32_t r, uint32_t world, char (*eps)[64],
                                 const tls_files *t, uint32_t timeout_ms)
{
    const char *ptrs[MAX_RANKS];
    for (uint32_t i = 0; i < world; i++) {
        ptrs[i] = eps[i];
    }
    hdmlp_config *cfg;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_rank(cfg, r, world), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_peers(cfg, ptrs, world), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_job_token(cfg, 0x715), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_peer_timeout(cfg, timeout_ms), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(f->ds) / 4), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_batch_size(cfg, 16), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_epochs(cfg, 2), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_seed(cfg, 5), HDMLP_OK);
    cr_assert_eq(t->on ? hdmlp_config_set_tls(cfg, t->ca, t->cert, t->key)
                       : hdmlp_config_set_tls(cfg, NULL, NULL, NULL),
                 HDMLP_OK, "%s", hdmlp_last_error());
    return cfg;
}

static void pick_endpoints(uint32_t world, char (*eps)[64])
{
    for (uint32_t r = 0; r < world; r++) {
        cr_assert_eq(rpc_pick_endpoint("127.0.0.1", eps[r], sizeof eps[r]), HDMLP_OK, "%s",
                     hdmlp_last_error());
    }
}

/* Runs world loaders (rank r with files t[r]) to their end on threads; fills runs. */
static void run_world(const fixture *f, uint32_t world, const tls_files *t, uint32_t timeout_ms,
                      rank_run *runs)
{
    char eps[MAX_RANKS][64];
    pick_endpoints(world, eps);
    memset(runs, 0, world * sizeof *runs);
    for (uint32_t r = 0; r < world; r++) {
        hdmlp_config *cfg = rank_config(f, r, world, eps, &t[r], timeout_ms);
        runs[r].t0 = now_ms();
        const int rc = hdmlp_loader_create(f->ds, cfg, &runs[r].ld);
        cr_assert_eq(rc, HDMLP_OK, "rank %u: %s: %s", r, hdmlp_err_name(rc),
                     hdmlp_last_error());
        hdmlp_config_free(cfg);
    }
    pthread_t th[MAX_RANKS];
    for (uint32_t r = 0; r < world; r++) {
        cr_assert_eq(pthread_create(&th[r], NULL, consume, &runs[r]), 0);
    }
    for (uint32_t r = 0; r < world; r++) {
        pthread_join(th[r], NULL);
    }
}

static void runs_free(rank_run *runs, uint32_t world)
{
    for (uint32_t r = 0; r < world; r++) {
        testds_seq_free(&runs[r].seq);
    }
}

/* Every sample once per epoch across the ranks. */
static void check_exactly_once(const rank_run *runs, uint32_t world)
{
    uint8_t *seen = calloc(2 * N_SAMPLES, 1);
    uint64_t total = 0;
    for (uint32_t r = 0; r < world; r++) {
        cr_assert_eq(runs[r].rc, HDMLP_END, "rank %u: %s: %s", r, hdmlp_err_name(runs[r].rc),
                     runs[r].err);
        const testds_seq *q = &runs[r].seq;
        for (uint64_t i = 0; i < q->n; i++) {
            cr_assert_lt(q->idx[i], N_SAMPLES);
            cr_assert_lt(q->ep[i], 2);
            uint8_t *s = &seen[q->ep[i] * N_SAMPLES + q->idx[i]];
            cr_assert_eq(*s, 0, "sample %llu twice", (unsigned long long)q->idx[i]);
            *s = 1;
            total++;
        }
    }
    cr_assert_eq(total, 2 * N_SAMPLES);
    free(seen);
}

static void same_sequence_as_plaintext(uint32_t world)
{
    fixture f;
    fixture_open(&f);
    tls_files tls[MAX_RANKS], off[MAX_RANKS];
    for (uint32_t r = 0; r < world; r++) {
        tls[r] = good();
        off[r] = plain;
    }
    rank_run a[MAX_RANKS], b[MAX_RANKS];
    run_world(&f, world, tls, 5000, a);
    run_world(&f, world, off, 5000, b);
    check_exactly_once(a, world);
    check_exactly_once(b, world);
    for (uint32_t r = 0; r < world; r++) {
        const testds_seq *qa = &a[r].seq, *qb = &b[r].seq;
        cr_assert_eq(qa->n, qb->n, "rank %u: %llu samples with TLS, %llu without", r,
                     (unsigned long long)qa->n, (unsigned long long)qb->n);
        for (uint64_t i = 0; i < qa->n; i++) {
            cr_assert(qa->idx[i] == qb->idx[i] && qa->ep[i] == qb->ep[i],
                      "rank %u position %llu: sample %llu with TLS, %llu without", r,
                      (unsigned long long)i, (unsigned long long)qa->idx[i],
                      (unsigned long long)qb->idx[i]);
        }
        printf("tls: world %u rank %u: %llu samples, %llu ms with TLS, %llu ms without\n",
               world, r, (unsigned long long)qa->n, (unsigned long long)a[r].ms,
               (unsigned long long)b[r].ms);
    }
    runs_free(a, world);
    runs_free(b, world);
    fixture_close(&f);
}

Test(tls_loader, two_ranks_same_sequence_as_plaintext, .timeout = 20)
{
    same_sequence_as_plaintext(2);
}

Test(tls_loader, three_ranks_same_sequence_as_plaintext, .timeout = 20)
{
    same_sequence_as_plaintext(3);
}

/* Rank r failed with HDMLP_E_PEER naming rank q, soon after the peer timeout. The
 * message is the transport's ("rank q (host:port): no answer ...", with a TLS hint when
 * this rank uses TLS) or the loader's ("rank q did not send the sample ..."), whichever
 * notices first; gRPC itself logs the failed handshakes on stderr. */
static int names_rank(const rank_run *run, uint32_t q)
{
    char want[32];
    snprintf(want, sizeof want, "rank %u ", q);
    return strstr(run->err, want) != NULL;
}

static void check_failed(const rank_run *runs, uint32_t r, uint32_t timeout)
{
    cr_assert_eq(runs[r].rc, HDMLP_E_PEER, "rank %u: %s: %s", r, hdmlp_err_name(runs[r].rc),
                 runs[r].err);
    /* Detection at about one timeout, then a bounded drain on free. */
    cr_assert_lt(runs[r].ms, 5 * (uint64_t)timeout, "rank %u took %llu ms", r,
                 (unsigned long long)runs[r].ms);
    printf("tls: rank %u failed after %llu ms: %s\n", r, (unsigned long long)runs[r].ms,
           runs[r].err);
}

/* Two ranks with files t[0] and t[1] that cannot talk: each fails, naming the other. */
static void two_ranks_refused(const tls_files t[2])
{
    fixture f;
    fixture_open(&f);
    rank_run runs[2];
    run_world(&f, 2, t, 1000, runs);
    for (uint32_t r = 0; r < 2; r++) {
        check_failed(runs, r, 1000);
        cr_assert(names_rank(&runs[r], 1 - r), "rank %u does not name rank %u: %s", r, 1 - r,
                  runs[r].err);
    }
    runs_free(runs, 2);
    fixture_close(&f);
}

Test(tls_loader, other_ca_refused_two_ranks, .timeout = 20)
{
    const tls_files t[2] = {good(), rogue()};
    two_ranks_refused(t);
}

/* Ranks 0 and 1 trust each other; both fail because of rank 2 (one of them may instead
 * name the other, when that one has already left because of rank 2). */
Test(tls_loader, other_ca_refused_three_ranks, .timeout = 20)
{
    fixture f;
    fixture_open(&f);
    const tls_files t[3] = {good(), good(), rogue()};
    rank_run runs[3];
    run_world(&f, 3, t, 1000, runs);
    for (uint32_t r = 0; r < 3; r++) {
        check_failed(runs, r, 1000);
    }
    cr_assert(names_rank(&runs[0], 2) || names_rank(&runs[1], 2), "%s | %s", runs[0].err,
              runs[1].err);
    cr_assert(names_rank(&runs[2], 0) || names_rank(&runs[2], 1), "%s", runs[2].err);
    runs_free(runs, 3);
    fixture_close(&f);
}

Test(tls_loader, plaintext_peer_refused, .timeout = 20)
{
    const tls_files t[2] = {good(), plain};
    two_ranks_refused(t);
}

/* hdmlp_loader_create of rank 0 of 2 with files t: returns its status, message in err. */
static int create_with(const fixture *f, const tls_files *t, char *err, size_t cap)
{
    char eps[2][64];
    pick_endpoints(2, eps);
    hdmlp_config *cfg = rank_config(f, 0, 2, eps, t, 1000);
    hdmlp_loader *ld = (hdmlp_loader *)&ld;
    const int rc = hdmlp_loader_create(f->ds, cfg, &ld);
    snprintf(err, cap, "%s", hdmlp_last_error());
    if (rc != HDMLP_OK) {
        cr_assert_null(ld);
    }
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    return rc;
}

Test(tls_loader, missing_key_file, .timeout = 20)
{
    fixture f;
    fixture_open(&f);
    const tls_files t = files("ca.pem", "rank.pem", "no-such.key");
    char err[512];
    const uint64_t t0 = now_ms();
    const int rc = create_with(&f, &t, err, sizeof err);
    cr_assert_eq(rc, HDMLP_E_IO, "%s: %s", hdmlp_err_name(rc), err);
    cr_assert(strstr(err, "no-such.key") != NULL && strstr(err, "key_file") != NULL &&
                  strstr(err, "No such file") != NULL,
              "%s", err);
    cr_assert_lt(now_ms() - t0, 5000);
    printf("tls: missing key: %s\n", err);
    fixture_close(&f);
}

Test(tls_loader, unusable_files, .timeout = 20)
{
    fixture f;
    fixture_open(&f);
    char empty[600], text[600];
    snprintf(empty, sizeof empty, "%s/empty.pem", f.dir);
    snprintf(text, sizeof text, "%s/text.pem", f.dir);
    cr_assert_eq(testds_write_file(empty, "", 0), 0);
    cr_assert_eq(testds_write_file(text, "not a certificate\n", 18), 0);
    struct {
        tls_files t;
        int rc;
        const char *names[2];
    } cases[] = {
        {files("no-such-ca.pem", "rank.pem", "rank.key"),
         HDMLP_E_IO,
         {"no-such-ca", "ca_file"}},
        {files("ca.pem", empty, "rank.key"), HDMLP_E_INVAL, {"empty.pem", "cert_file"}},
        {files("ca.pem", "rank.pem", text), HDMLP_E_INVAL, {"text.pem", "key_file"}},
        /* a certificate where the key belongs */
        {files("ca.pem", "rank.pem", "rank.pem"), HDMLP_E_INVAL, {"rank.pem", "key_file"}},
        /* a directory */
        {files(f.dir, "rank.pem", "rank.key"), HDMLP_E_IO, {f.dir, "ca_file"}},
        /* the key of another certificate: refused by gRPC when the server starts */
        {files("ca.pem", "rank.pem", "rogue.key"), HDMLP_E_INVAL, {"rank.pem", "rogue.key"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512];
        const int rc = create_with(&f, &cases[i].t, err, sizeof err);
        cr_assert_eq(rc, cases[i].rc, "case %zu: %s: %s", i, hdmlp_err_name(rc), err);
        for (int k = 0; k < 2; k++) {
            cr_assert(strstr(err, cases[i].names[k]) != NULL, "case %zu: no \"%s\" in: %s", i,
                      cases[i].names[k], err);
        }
        printf("tls: case %zu: %s: %s\n", i, hdmlp_err_name(rc), err);
    }
    fixture_close(&f);
}

Test(tls_config, all_three_or_none)
{
    hdmlp_config *cfg;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_tls(cfg, NULL, NULL, NULL), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_tls(cfg, "ca", "cert", NULL), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "key_file") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_config_set_tls(cfg, NULL, "cert", "key"), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "ca_file") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_config_set_tls(cfg, "ca", NULL, "key"), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_config_set_tls(cfg, "ca", "", "key"), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "cert_file") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_config_set_tls(NULL, "ca", "cert", "key"), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_config_set_tls(cfg, "ca", "cert", "key"), HDMLP_OK);
    /* Replaced, then turned off again; freeing with paths set leaks nothing (ASan). */
    cr_assert_eq(hdmlp_config_set_tls(cfg, "ca2", "cert2", "key2"), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_tls(cfg, NULL, NULL, NULL), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_tls(cfg, "ca", "cert", "key"), HDMLP_OK);
    hdmlp_config_free(cfg);
}

/* World 1 never reads the files: TLS only concerns the exchange. */
Test(tls_loader, single_rank_ignores_tls, .timeout = 20)
{
    fixture f;
    fixture_open(&f);
    hdmlp_config *cfg;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(
        hdmlp_config_set_tls(cfg, "/nonexistent/ca", "/nonexistent/c", "/nonexistent/k"),
        HDMLP_OK);
    hdmlp_loader *ld;
    cr_assert_eq(hdmlp_loader_create(f.ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    fixture_close(&f);
}

/* ---- what TLS costs the transport ----------------------------------------------------------
 */

typedef struct counter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t n, errors;
} counter;

/* Adds one to *field of c (c->n or c->errors) and wakes counter_wait. */
static void counter_add(counter *c, uint64_t *field)
{
    pthread_mutex_lock(&c->mu);
    (*field)++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void count_msg(void *ctx, const peer_msg *m)
{
    (void)m;
    counter *c = ctx;
    counter_add(c, &c->n);
}

static void count_error(void *ctx, uint32_t rank, int code, const char *detail)
{
    (void)rank;
    (void)code;
    (void)detail;
    counter *c = ctx;
    counter_add(c, &c->errors);
}

/* Waits (up to 30 s) until c has seen n messages. */
static void counter_wait(counter *c, uint64_t n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&c->mu);
    while (c->n < n && c->errors == 0) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &until) != 0) {
            break;
        }
    }
    const uint64_t got = c->n, errors = c->errors;
    pthread_mutex_unlock(&c->mu);
    cr_assert(got >= n && errors == 0, "%llu of %llu messages, %llu errors",
              (unsigned long long)got, (unsigned long long)n, (unsigned long long)errors);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

typedef struct cost {
    double connect_ms, one_at_a_time_us, mb_s_64k, mb_s_1m;
} cost;

static peer_msg bench_msg(uint64_t i, const uint8_t *data, uint64_t size)
{
    peer_msg m;
    memset(&m, 0, sizeof m);
    m.from = 0;
    m.to = 1;
    m.epoch = 1;
    m.position = i;
    m.group = i % 11;
    m.slot = (uint32_t)(i % 7);
    if (data != NULL) {
        m.kind = PEER_SAMPLE;
        m.index = i;
        m.data = data;
        m.size = size;
    } else {
        m.kind = PEER_REQUEST;
        m.credit = 1000;
    }
    return m;
}

/* Sends n messages of sz bytes 0 -> 1 keeping at most 16 MiB unacknowledged; MB/s. */
static double stream(peer_transport *t, counter *rx, const uint8_t *d, size_t sz, uint64_t n)
{
    const uint64_t base = rx->n, window = (16u << 20) / sz;
    const uint64_t t0 = now_us();
    for (uint64_t i = 0; i < n; i++) {
        const peer_msg m = bench_msg(i, d, sz);
        cr_assert_eq(t->send(t, &m), HDMLP_OK, "%s", hdmlp_last_error());
        if (i >= window) {
            counter_wait(rx, base + i + 1 - window);
        }
    }
    counter_wait(rx, base + n);
    return (double)n * (double)sz / ((double)(now_us() - t0) / 1e6) / 1e6;
}

static void measure_cost(int tls, cost *out)
{
    char eps[2][64];
    pick_endpoints(2, eps);
    const tls_files t = tls ? good() : plain;
    hdmlp_config *cfg[2];
    counter c[2];
    peer_transport *tr[2];
    for (uint32_t r = 0; r < 2; r++) {
        const char *ptrs[2] = {eps[0], eps[1]};
        cr_assert_eq(hdmlp_config_create(&cfg[r]), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_rank(cfg[r], r, 2), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_peers(cfg[r], ptrs, 2), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_peer_timeout(cfg[r], 10000), HDMLP_OK);
        cr_assert_eq(t.on ? hdmlp_config_set_tls(cfg[r], t.ca, t.cert, t.key)
                          : hdmlp_config_set_tls(cfg[r], NULL, NULL, NULL),
                     HDMLP_OK);
        memset(&c[r], 0, sizeof c[r]);
        pthread_mutex_init(&c[r].mu, NULL);
        pthread_cond_init(&c[r].cv, NULL);
    }
    /* Both servers up first: the first message then times connecting (and the handshake). */
    for (uint32_t r = 0; r < 2; r++) {
        const peer_handler h = {&c[r], count_msg, count_error};
        cr_assert_eq(rpc_transport_create(cfg[r], &h, &tr[r]), HDMLP_OK, "%s",
                     hdmlp_last_error());
    }
    uint64_t t0 = now_us();
    peer_msg m = bench_msg(0, NULL, 0);
    cr_assert_eq(tr[0]->send(tr[0], &m), HDMLP_OK);
    counter_wait(&c[1], 1);
    out->connect_ms = (double)(now_us() - t0) / 1e3;
    const uint64_t n_seq = 2000;
    t0 = now_us();
    for (uint64_t i = 0; i < n_seq; i++) {
        m = bench_msg(i, NULL, 0);
        cr_assert_eq(tr[0]->send(tr[0], &m), HDMLP_OK);
        counter_wait(&c[1], 2 + i);
    }
    out->one_at_a_time_us = (double)(now_us() - t0) / (double)n_seq;
    uint8_t *d = malloc(1u << 20);
    for (size_t i = 0; i < (1u << 20); i++) {
        d[i] = (uint8_t)(i * 131u + (i >> 9));
    }
    out->mb_s_64k = stream(tr[0], &c[1], d, 64u << 10, 4000);
    out->mb_s_1m = stream(tr[0], &c[1], d, 1u << 20, 256);
    free(d);
    for (uint32_t r = 0; r < 2; r++) {
        tr[r]->destroy(tr[r]);
        hdmlp_config_free(cfg[r]);
        pthread_cond_destroy(&c[r].cv);
        pthread_mutex_destroy(&c[r].mu);
    }
}

/* Plaintext and TLS alternately, best of three each (the machine is shared and noisy). */
Test(tls_bench, cost, .timeout = 60)
{
    cost best[2];
    memset(best, 0, sizeof best);
    for (int rep = 0; rep < 3; rep++) {
        for (int tls = 0; tls < 2; tls++) {
            cost c;
            measure_cost(tls, &c);
            cost *b = &best[tls];
            if (rep == 0 || c.connect_ms < b->connect_ms) {
                b->connect_ms = c.connect_ms;
            }
            if (rep == 0 || c.one_at_a_time_us < b->one_at_a_time_us) {
                b->one_at_a_time_us = c.one_at_a_time_us;
            }
            b->mb_s_64k = c.mb_s_64k > b->mb_s_64k ? c.mb_s_64k : b->mb_s_64k;
            b->mb_s_1m = c.mb_s_1m > b->mb_s_1m ? c.mb_s_1m : b->mb_s_1m;
        }
    }
    for (int tls = 0; tls < 2; tls++) {
        printf("tls_bench %-9s: first message (connect%s) %6.2f ms, one at a time %5.0f us, "
               "64 KiB messages %6.0f MB/s, 1 MiB messages %6.0f MB/s\n",
               tls ? "TLS" : "plaintext", tls ? " + handshake" : "", best[tls].connect_ms,
               best[tls].one_at_a_time_us, best[tls].mb_s_64k, best[tls].mb_s_1m);
    }
}
