/*
 * The same-host paths of the transport (rpc_transport.h, "Paths"): the socket names, the
 * locality test of a peers entry, which peers a transport reaches through shared-memory
 * rings (HDMLP_SAME_HOST_SHM, the default) or dials over the gRPC socket
 * (HDMLP_SAME_HOST_SOCKET): all of them on 127.0.0.1, none with HDMLP_SAME_HOST_TCP or TLS;
 * mixed settings between ranks, socket names already taken, and real loaders exchanging
 * over each path: every sample exactly once per epoch across ranks with its bytes checked,
 * and the counter peers_same_host in the stats (world - 1 over rings or the socket, 0 over
 * TCP); the rings' contracts: order per pair with answers overtaking prefetches,
 * samples larger than a ring's fragment, a dead and a hung peer reported once, a full
 * queue, destroy draining. Hostile senders on a ring: tests/hostile/hostile_shm.c.
 * Ports come from rpc_pick_endpoint("127.0.0.1").
 */
#include "hdmlp.h"
#include "loader.h"
#include "rpc_transport.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <ifaddrs.h>
#include <netdb.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define WORLD 3

/* ---- names and locality ----------------------------------------------------------------- */

Test(samehost, address_is_abstract_and_per_endpoint)
{
    char a[RPC_SAME_HOST_ADDR_MAX], b[RPC_SAME_HOST_ADDR_MAX], a2[RPC_SAME_HOST_ADDR_MAX];
    cr_assert_eq(rpc_same_host_address("127.0.0.1:5000", a, sizeof a), HDMLP_OK);
    cr_assert_eq(rpc_same_host_address("127.0.0.1:5001", b, sizeof b), HDMLP_OK);
    cr_assert_eq(rpc_same_host_address("127.0.0.1:5000", a2, sizeof a2), HDMLP_OK);
    printf("samehost: 127.0.0.1:5000 -> %s\n", a);
    cr_assert_eq(strncmp(a, "unix-abstract:hdmlp-", 20), 0, "%s", a);
    cr_assert_str_eq(a, a2);
    cr_assert_str_neq(a, b);
    char small[16];
    cr_assert_eq(rpc_same_host_address("127.0.0.1:5000", small, sizeof small), HDMLP_E_RANGE);
}

/* A non-loopback IPv4 address of this machine's interfaces into buf, or 0 if none. */
static int interface_v4(char *buf, size_t cap)
{
    struct ifaddrs *ifs = NULL;
    int found = 0;
    if (getifaddrs(&ifs) != 0) {
        return 0;
    }
    for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
        if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET &&
            getnameinfo(i->ifa_addr, sizeof(struct sockaddr_in), buf, (socklen_t)cap, NULL, 0,
                        NI_NUMERICHOST) == 0 &&
            strncmp(buf, "127.", 4) != 0) {
            found = 1;
        }
    }
    freeifaddrs(ifs);
    return found;
}

/* 1 if the host of "host:port" or "[v6]:port" is a literal address of an interface. */
static int is_interface_address(const char *endpoint)
{
    char host[64];
    const char *colon = strrchr(endpoint, ':');
    size_t len = colon != NULL ? (size_t)(colon - endpoint) : 0;
    if (len >= 2 && endpoint[0] == '[') {
        endpoint++;
        len -= 2;
    }
    if (len == 0 || len >= sizeof host) {
        return 0;
    }
    memcpy(host, endpoint, len);
    host[len] = '\0';
    struct ifaddrs *ifs = NULL;
    int found = 0;
    if (getifaddrs(&ifs) != 0) {
        return 0;
    }
    for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
        char buf[64];
        const int fam = i->ifa_addr != NULL ? i->ifa_addr->sa_family : AF_UNSPEC;
        found = (fam == AF_INET || fam == AF_INET6) &&
                getnameinfo(i->ifa_addr,
                            fam == AF_INET ? sizeof(struct sockaddr_in)
                                           : sizeof(struct sockaddr_in6),
                            buf, sizeof buf, NULL, 0, NI_NUMERICHOST) == 0 &&
                strcmp(buf, host) == 0;
    }
    freeifaddrs(ifs);
    return found;
}

Test(samehost, endpoint_locality)
{
    const char *local[] = {"127.0.0.1:1",         "127.3.2.1:9", "[::1]:1",
                           "localhost:1",         "0.0.0.0:1",   "[::]:1",
                           "[::ffff:127.0.0.1]:1"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++) {
        cr_assert_eq(rpc_endpoint_is_local(local[i]), 1, "%s", local[i]);
    }
    /* documentation ranges (RFC 5737, 3849; unless this machine uses one) and a name that
     * never resolves (RFC 6761) */
    const char *remote[] = {"203.0.113.9:1",
                            "198.51.100.9:1",
                            "[2001:db8::9]:1",
                            "no-such-host.invalid:1",
                            ":1",
                            ""};
    for (size_t i = 0; i < sizeof remote / sizeof remote[0]; i++) {
        if (!is_interface_address(remote[i])) {
            cr_assert_eq(rpc_endpoint_is_local(remote[i]), 0, "%s", remote[i]);
        }
    }
    char ip[64], ep[80];
    if (interface_v4(ip, sizeof ip)) {
        snprintf(ep, sizeof ep, "%s:7", ip);
        cr_assert_eq(rpc_endpoint_is_local(ep), 1, "%s", ep);
        printf("samehost: interface address %s is local\n", ep);
    }
    char host[256];
    if (gethostname(host, sizeof host) == 0) {
        host[sizeof host - 1] = '\0';
        snprintf(ep, sizeof ep, "%.70s:7", host);
        struct addrinfo *res = NULL;
        if (getaddrinfo(host, NULL, NULL, &res) == 0) {
            freeaddrinfo(res);
            cr_assert_eq(rpc_endpoint_is_local(ep), 1, "own host name %s", ep);
        }
    }
}

/* ---- transports ------------------------------------------------------------------------- */

typedef struct sink {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t n;
} sink;

static void sink_msg(void *ctx, const peer_msg *m)
{
    (void)m;
    sink *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->n++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void sink_error(void *ctx, uint32_t rank, int code, const char *detail)
{
    (void)ctx;
    cr_log_error("unexpected on_error: rank %u %d %s", rank, code, detail);
}

static int sink_wait(sink *s, size_t n, int seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&s->mu);
    while (s->n < n && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {
    }
    const int ok = s->n >= n;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

typedef struct cluster {
    char eps[WORLD][64];
    hdmlp_config *cfg[WORLD];
    sink sinks[WORLD];
    peer_transport *t[WORLD];
} cluster;

/* WORLD configs on 127.0.0.1; same_host[r] for rank r. */
static void cluster_config(cluster *c, const int *same_host)
{
    memset(c, 0, sizeof *c);
    const char *ptrs[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        cr_assert_eq(rpc_pick_endpoint("127.0.0.1", c->eps[r], sizeof c->eps[r]), HDMLP_OK,
                     "%s", hdmlp_last_error());
        ptrs[r] = c->eps[r];
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        cr_assert_eq(hdmlp_config_create(&c->cfg[r]), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_rank(c->cfg[r], r, WORLD), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_peers(c->cfg[r], ptrs, WORLD), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_job_token(c->cfg[r], 31), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_same_host(c->cfg[r], same_host[r]), HDMLP_OK);
        pthread_mutex_init(&c->sinks[r].mu, NULL);
        pthread_cond_init(&c->sinks[r].cv, NULL);
    }
}

static void cluster_free(cluster *c)
{
    for (uint32_t r = 0; r < WORLD; r++) {
        if (c->t[r] != NULL) {
            c->t[r]->destroy(c->t[r]);
        }
        hdmlp_config_free(c->cfg[r]);
        pthread_cond_destroy(&c->sinks[r].cv);
        pthread_mutex_destroy(&c->sinks[r].mu);
    }
}

static void cluster_start(cluster *c)
{
    for (uint32_t r = 0; r < WORLD; r++) {
        const peer_handler h = {&c->sinks[r], sink_msg, sink_error};
        const int rc = rpc_transport_create(c->cfg[r], &h, &c->t[r]);
        cr_assert_eq(rc, HDMLP_OK, "rank %u: %s", r, hdmlp_last_error());
    }
}

/* 1 if something accepts connections on the abstract socket of endpoint. */
static int socket_listening(const char *endpoint)
{
    char addr[RPC_SAME_HOST_ADDR_MAX];
    cr_assert_eq(rpc_same_host_address(endpoint, addr, sizeof addr), HDMLP_OK);
    const char *name = addr + strlen("unix-abstract:");
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path + 1, name, strlen(name));
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    const int ok =
        connect(fd, (const struct sockaddr *)&sa,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))) == 0;
    close(fd);
    return ok;
}

/* Every rank sends `per` REQUESTs to every other rank; all arrive. */
static void exchange_all(cluster *c, size_t per)
{
    for (uint32_t from = 0; from < WORLD; from++) {
        for (uint32_t to = 0; to < WORLD; to++) {
            for (size_t i = 0; i < per && to != from; i++) {
                peer_msg m;
                memset(&m, 0, sizeof m);
                m.kind = PEER_REQUEST;
                m.from = from;
                m.to = to;
                m.position = i;
                m.token = 31;
                cr_assert_eq(c->t[from]->send(c->t[from], &m), HDMLP_OK, "%s",
                             hdmlp_last_error());
            }
        }
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        cr_assert(sink_wait(&c->sinks[r], per * (WORLD - 1), 10), "rank %u got %zu of %zu", r,
                  c->sinks[r].n, per * (WORLD - 1));
    }
}

/* Messages each rank received through rings and through gRPC calls. */
static void path_counts(cluster *c, uint32_t r, uint64_t *shm, uint64_t *grpc)
{
    rpc_stats st;
    rpc_transport_stats(c->t[r], &st);
    *shm = st.shm_msgs_recv;
    *grpc = st.msgs_recv - st.shm_msgs_recv;
}

Test(samehost, transports_on_loopback_dial_the_socket, .timeout = 30)
{
    cluster c;
    const int on[WORLD] = {HDMLP_SAME_HOST_SOCKET, HDMLP_SAME_HOST_SOCKET,
                           HDMLP_SAME_HOST_SOCKET};
    cluster_config(&c, on);
    cluster_start(&c);
    for (uint32_t r = 0; r < WORLD; r++) {
        cr_assert_eq(c.t[r]->peers_same_host, WORLD - 1, "rank %u", r);
        cr_assert(socket_listening(c.eps[r]), "rank %u's socket", r);
    }
    exchange_all(&c, 50);
    for (uint32_t r = 0; r < WORLD; r++) {
        uint64_t shm, grpc;
        path_counts(&c, r, &shm, &grpc);
        cr_assert_eq(shm, 0, "rank %u: %llu messages through rings", r,
                     (unsigned long long)shm);
        cr_assert_eq(grpc, 50 * (WORLD - 1), "rank %u", r);
    }
    cluster_free(&c);
    /* Destroyed servers leave no socket behind. */
    cr_assert_not(socket_listening(c.eps[0]));
}

Test(samehost, transports_on_loopback_use_rings_by_default, .timeout = 30)
{
    cluster c;
    const int on[WORLD] = {HDMLP_SAME_HOST_SHM, HDMLP_SAME_HOST_SHM, HDMLP_SAME_HOST_SHM};
    cluster_config(&c, on);
    hdmlp_config *dflt;
    cr_assert_eq(hdmlp_config_create(&dflt), HDMLP_OK);
    cr_assert_eq(((const struct hdmlp_config *)dflt)->same_host, HDMLP_SAME_HOST_SHM);
    hdmlp_config_free(dflt);
    cluster_start(&c);
    for (uint32_t r = 0; r < WORLD; r++) {
        cr_assert_eq(c.t[r]->peers_same_host, WORLD - 1, "rank %u", r);
    }
    exchange_all(&c, 200);
    for (uint32_t r = 0; r < WORLD; r++) {
        uint64_t shm, grpc;
        path_counts(&c, r, &shm, &grpc);
        cr_assert_eq(shm, 200 * (WORLD - 1), "rank %u", r);
        cr_assert_eq(grpc, 0, "rank %u: %llu messages through gRPC", r,
                     (unsigned long long)grpc);
        rpc_stats st;
        rpc_transport_stats(c.t[r], &st);
        cr_assert_eq(st.calls_sent, 0, "rank %u made %llu gRPC calls", r,
                     (unsigned long long)st.calls_sent);
        cr_assert_eq(st.shm_msgs_sent, 200 * (WORLD - 1), "rank %u", r);
    }
    cluster_free(&c);
}

Test(samehost, override_and_mixed_settings, .timeout = 30)
{
    /* Rank 0 writes into rings, rank 1 dials TCP, rank 2 the socket: everything still
     * arrives, each rank receiving on every path. */
    cluster c;
    const int mixed[WORLD] = {HDMLP_SAME_HOST_SHM, HDMLP_SAME_HOST_TCP, HDMLP_SAME_HOST_SOCKET};
    cluster_config(&c, mixed);
    cluster_start(&c);
    cr_assert_eq(c.t[0]->peers_same_host, WORLD - 1);
    cr_assert_eq(c.t[1]->peers_same_host, 0);
    cr_assert_eq(c.t[2]->peers_same_host, WORLD - 1);
    cr_assert(socket_listening(c.eps[1]), "a TCP-dialling rank still serves the socket");
    exchange_all(&c, 50);
    for (uint32_t r = 0; r < WORLD; r++) {
        uint64_t shm, grpc;
        path_counts(&c, r, &shm, &grpc);
        cr_assert_eq(shm, r == 0 ? 0 : 50, "rank %u: %llu from rank 0's rings", r,
                     (unsigned long long)shm);
        cr_assert_eq(grpc, r == 0 ? 100 : 50, "rank %u", r);
    }
    cluster_free(&c);
    cr_assert_eq(hdmlp_config_set_same_host(NULL, 1), HDMLP_E_INVAL);
    hdmlp_config *cfg;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_same_host(cfg, 3), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_config_set_same_host(cfg, -1), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "same_host") != NULL, "%s", hdmlp_last_error());
    hdmlp_config_free(cfg);
}

Test(samehost, socket_in_use_fails_creation, .timeout = 30)
{
    cluster c;
    const int on[WORLD] = {HDMLP_SAME_HOST_SHM, HDMLP_SAME_HOST_SHM, HDMLP_SAME_HOST_SHM};
    cluster_config(&c, on);
    char addr[RPC_SAME_HOST_ADDR_MAX];
    cr_assert_eq(rpc_same_host_address(c.eps[0], addr, sizeof addr), HDMLP_OK);
    const char *name = addr + strlen("unix-abstract:");
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path + 1, name, strlen(name));
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(bind(fd, (const struct sockaddr *)&sa,
                      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))),
                 0);
    const peer_handler h = {&c.sinks[0], sink_msg, sink_error};
    peer_transport *t = (peer_transport *)1;
    cr_assert_eq(rpc_transport_create(c.cfg[0], &h, &t), HDMLP_E_IO);
    cr_assert_null(t);
    printf("samehost.socket_in_use: %s\n", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "same-host socket") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), addr) != NULL, "%s", hdmlp_last_error());
    close(fd);
    /* Released: now it binds (and the TCP port was released by the failed attempt). */
    cr_assert_eq(rpc_transport_create(c.cfg[0], &h, &c.t[0]), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cluster_free(&c);
}

Test(samehost, tls_keeps_tcp, .timeout = 30)
{
    const char *data = getenv("HDMLP_TEST_DATA");
    char ca[512], cert[512], key[512];
    snprintf(ca, sizeof ca, "%s/tls/ca.pem", data != NULL ? data : "tests/data");
    snprintf(cert, sizeof cert, "%s/tls/rank.pem", data != NULL ? data : "tests/data");
    snprintf(key, sizeof key, "%s/tls/rank.key", data != NULL ? data : "tests/data");
    cluster c;
    const int on[WORLD] = {HDMLP_SAME_HOST_SHM, HDMLP_SAME_HOST_SHM, HDMLP_SAME_HOST_SHM};
    cluster_config(&c, on);
    for (uint32_t r = 0; r < WORLD; r++) {
        cr_assert_eq(hdmlp_config_set_tls(c.cfg[r], ca, cert, key), HDMLP_OK);
    }
    cluster_start(&c);
    for (uint32_t r = 0; r < WORLD; r++) {
        cr_assert_eq(c.t[r]->peers_same_host, 0, "rank %u", r);
        cr_assert_not(socket_listening(c.eps[r]), "rank %u opened a socket with TLS", r);
    }
    exchange_all(&c, 10);
    cluster_free(&c);
}

/* ---- loaders over each path ------------------------------------------------------------- */

static const testds_spec SPEC = {1500, 10, 0, 91, 300, 6000, 0, 0, 7, 0};

typedef struct run {
    hdmlp_loader *ld;
    uint8_t *seen; /* [epoch * N + index] */
    uint64_t bad;  /* samples whose bytes, size or label differ from the dataset's */
    int rc;
    char err[256];
    hdmlp_stats st;
} run;

/* Samples of b whose bytes, size, epoch or label differ from the dataset's. */
static uint64_t batch_bad(const hdmlp_batch *b, uint8_t *want)
{
    uint64_t bad = 0;
    const hdmlp_sample_view *v = hdmlp_batch_samples(b);
    for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
        const size_t sz = testds_size(&SPEC, v[i].index);
        testds_fill(v[i].index, SPEC.seed, want, sz);
        bad += v[i].index >= SPEC.n_samples || hdmlp_batch_epoch(b) >= 2 || v[i].size != sz ||
               memcmp(v[i].data, want, sz) != 0 || v[i].label != v[i].index % SPEC.n_labels;
    }
    return bad;
}

/* Consumes every batch; the first one is held until after the loader is freed (its samples,
 * lent by peers over rings, must stay valid until released). */
static void *consume(void *arg)
{
    run *r = arg;
    uint8_t *want = malloc(SPEC.max_size);
    hdmlp_batch *b, *held = NULL;
    while ((r->rc = hdmlp_loader_next(r->ld, &b)) == HDMLP_OK) {
        const uint64_t bad = batch_bad(b, want);
        r->bad += bad;
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; bad == 0 && i < hdmlp_batch_size(b); i++) {
            r->seen[hdmlp_batch_epoch(b) * SPEC.n_samples + v[i].index]++;
        }
        if (held == NULL) {
            held = b;
        } else {
            hdmlp_batch_release(b);
        }
    }
    snprintf(r->err, sizeof r->err, "%s", hdmlp_last_error());
    hdmlp_loader_finish(r->ld);
    hdmlp_loader_stats(r->ld, &r->st, sizeof r->st);
    hdmlp_loader_free(r->ld);
    r->ld = NULL;
    if (held != NULL) {
        r->bad += batch_bad(held, want);
        hdmlp_batch_release(held);
    }
    free(want);
    return NULL;
}

/* WORLD loaders in one process, each with its gRPC transport; memory a quarter of the
 * dataset so that most samples come from peers. */
static void loaders_run(int same_host, uint64_t want_peers)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("samehost", dir, sizeof dir), 0);
    cr_assert_eq(testds_write(dir, &SPEC), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    cluster c;
    const int mode[WORLD] = {same_host, same_host, same_host};
    cluster_config(&c, mode);
    run runs[WORLD];
    memset(runs, 0, sizeof runs);
    pthread_t th[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        hdmlp_config *cfg = c.cfg[r];
        hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
        hdmlp_config_set_batch_size(cfg, 16);
        hdmlp_config_set_epochs(cfg, 2);
        hdmlp_config_set_seed(cfg, 3);
        runs[r].seen = calloc(2 * SPEC.n_samples, 1);
        const int rc = hdmlp_loader_create(ds, cfg, &runs[r].ld);
        cr_assert_eq(rc, HDMLP_OK, "rank %u: %s", r, hdmlp_last_error());
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_create(&th[r], NULL, consume, &runs[r]);
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_join(th[r], NULL);
    }
    uint64_t in = 0, lent = 0;
    for (uint32_t r = 0; r < WORLD; r++) {
        cr_assert_eq(runs[r].rc, HDMLP_END, "rank %u: %s", r, runs[r].err);
        cr_assert_eq(runs[r].bad, 0, "rank %u: %llu samples with wrong bytes", r,
                     (unsigned long long)runs[r].bad);
        cr_assert_eq(runs[r].st.peers_same_host, want_peers, "rank %u", r);
        in += runs[r].st.net_bytes_in;
        lent += runs[r].st.net_bytes_lent;
        cr_assert_leq(runs[r].st.net_bytes_lent, runs[r].st.net_bytes_in, "rank %u", r);
    }
    /* Over rings the owners lend their arena blocks; the other paths copy. */
    if (same_host == HDMLP_SAME_HOST_SHM) {
        cr_assert_gt(lent, in / 2, "%llu of %llu bytes lent", (unsigned long long)lent,
                     (unsigned long long)in);
    } else {
        cr_assert_eq(lent, 0);
    }
    for (uint64_t i = 0; i < 2 * SPEC.n_samples; i++) {
        unsigned n = 0;
        for (uint32_t r = 0; r < WORLD; r++) {
            n += runs[r].seen[i];
        }
        cr_assert_eq(n, 1, "epoch %llu sample %llu delivered %u times",
                     (unsigned long long)(i / SPEC.n_samples),
                     (unsigned long long)(i % SPEC.n_samples), n);
    }
    cr_assert_gt(in, 0, "nothing came from peers");
    printf("samehost: %s: %llu bytes from peers (%llu lent), peers_same_host %llu per rank\n",
           same_host == HDMLP_SAME_HOST_SHM      ? "shm"
           : same_host == HDMLP_SAME_HOST_SOCKET ? "socket"
                                                 : "tcp",
           (unsigned long long)in, (unsigned long long)lent, (unsigned long long)want_peers);
    for (uint32_t r = 0; r < WORLD; r++) {
        free(runs[r].seen);
    }
    cluster_free(&c);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(samehost, loaders_over_rings_exactly_once, .timeout = 120)
{
    loaders_run(HDMLP_SAME_HOST_SHM, WORLD - 1);
}

Test(samehost, loaders_over_the_socket_exactly_once, .timeout = 120)
{
    loaders_run(HDMLP_SAME_HOST_SOCKET, WORLD - 1);
}

Test(samehost, loaders_forced_tcp_exactly_once, .timeout = 120) { loaders_run(0, 0); }
