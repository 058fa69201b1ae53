/*
 * Hostile peers of the same-host rings (rpc_shm.c), in plain C so that it also runs under
 * TSan: rank 0 of 3 is a real transport on 127.0.0.1 (rings by default); this program
 * plays ranks 1 and 2 by hand, in this process.
 *   as receivers  rank 1's ring socket answers rank 0's hello with an unsealed memfd, rank
 *                 2's with a sealed one whose header is wrong: rank 0 reports each peer
 *                 once ("unusable ring"), and does not map what it cannot trust;
 *   as senders    hellos that are garbage, of another job, of impossible ranks, with
 *                 descriptors attached; rings fed garbage, another job's token, a record
 *                 longer than what was written, an impossible head, a SAMPLE above
 *                 max_data, fragments out of order, and a sender that dies in the middle of
 *                 a fragmented SAMPLE. Each must be refused (the ring closed, the cause sent
 *                 on the socket, counted in rejected), nothing of it delivered, and the good
 *                 messages sent between the attacks (a REQUEST, a small SAMPLE read in
 *                 place, a fragmented one) delivered with their bytes intact.
 * At the end no descriptor of the rings is left open. Exit 0 on success, 1 with the broken
 * promise named.
 */
#include "hdmlp.h"
#include "loader.h"
#include "rpc_arena.h"
#include "rpc_shm_link.h"
#include "rpc_shm_ring.h"
#include "rpc_transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WORLD 3
#define TOKEN 0xC0FFEE5EEDull
#define RING (64u << 10)

/* Under TSan: Debian's gRPC and abseil (the transport's gRPC side) are not instrumented
 * and synchronise in ways TSan cannot see; ignore their accesses, as rpc_stress does. The
 * rings' code and this program stay fully checked. */
#define TSAN_HOOK __attribute__((visibility("default"))) /* found by the TSan runtime */
TSAN_HOOK const char *__tsan_default_options(void);
TSAN_HOOK const char *__tsan_default_options(void)
{
    return "ignore_noninstrumented_modules=1";
}

static int failures;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "hostile_shm: FAILED at line %d: ", __LINE__);                     \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

/* What rank 0's handler saw. */
typedef struct seen {
    pthread_mutex_t mu;
    size_t n;
    peer_msg last;
    int data_ok; /* the last SAMPLE's bytes matched pattern() */
    size_t errs[WORLD];
    char err[WORLD][256];
} seen;

static uint8_t pattern(uint64_t index, uint64_t i) { return (uint8_t)(index * 131 + i * 7); }

static void on_msg(void *ctx, const peer_msg *m)
{
    seen *s = ctx;
    int ok = 1;
    for (uint64_t i = 0; m->kind == PEER_SAMPLE && i < m->size; i++) {
        ok &= m->data[i] == pattern(m->index, i);
    }
    pthread_mutex_lock(&s->mu);
    s->n++;
    s->last = *m;
    s->last.data = NULL;
    s->data_ok = ok;
    pthread_mutex_unlock(&s->mu);
    if (m->lent != NULL) {
        m->lent->give_back(m->lent, (void *)(uintptr_t)m->data, m->size, m->from);
    }
}

static void on_error(void *ctx, uint32_t rank, int code, const char *detail)
{
    seen *s = ctx;
    (void)code;
    pthread_mutex_lock(&s->mu);
    if (rank < WORLD) {
        s->errs[rank]++;
        snprintf(s->err[rank], sizeof s->err[rank], "%s", detail);
    }
    pthread_mutex_unlock(&s->mu);
}

static size_t seen_n(seen *s)
{
    pthread_mutex_lock(&s->mu);
    const size_t n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* The last message seen and whether its bytes were right, read under the lock. */
static peer_msg seen_last(seen *s, int *data_ok)
{
    pthread_mutex_lock(&s->mu);
    const peer_msg m = s->last;
    *data_ok = s->data_ok;
    pthread_mutex_unlock(&s->mu);
    return m;
}

static int errors_of_both(seen *s)
{
    pthread_mutex_lock(&s->mu);
    const int both = s->errs[1] > 0 && s->errs[2] > 0;
    pthread_mutex_unlock(&s->mu);
    return both;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Descriptors open in this process; of them, sockets and memfds in *held. */
static int open_fds(int *held)
{
    int n = 0;
    *held = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        char path[300], to[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        const ssize_t k = readlink(path, to, sizeof to - 1);
        to[k > 0 ? k : 0] = '\0';
        *held += strncmp(to, "socket:", 7) == 0 || strncmp(to, "/memfd:", 7) == 0;
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* Waits up to 5 s for a packet on fd: its text (NUL-terminated) and length, 0 at hangup,
 * -1 on timeout. */
static long wait_packet(int fd, char *buf, size_t cap, int fds[3])
{
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) {
        return -1;
    }
    const long n = rpc_shm_recv_packet(fd, buf, cap - 1, fds);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

/* ---- rank 0's hostile receivers ---------------------------------------------------------- */

/* Accepts rank 0's connection on listen_fd, checks its hello, answers with a ring memfd
 * that is unsealed (bad 0) or has a wrong header (bad 1). */
static void fake_receiver(int listen_fd, uint32_t me, int bad)
{
    int fd = -1;
    for (int i = 0; i < 500 && fd < 0; i++) {
        if (rpc_shm_accept(listen_fd, &fd) <= 0) {
            fd = -1;
            sleep_ms(10);
        }
    }
    CHECK(fd >= 0, "rank 0 never dialled rank %u's ring socket", me);
    if (fd < 0) {
        return;
    }
    rpc_shm_hello h;
    char hb[sizeof h + 1];
    int fds[3];
    const long n = wait_packet(fd, hb, sizeof hb, fds);
    memcpy(&h, hb, sizeof h);
    CHECK(n == (long)sizeof h && h.magic == RPC_SHM_HELLO_MAGIC && h.token == TOKEN &&
              h.from == 0 && h.to == me && h.arena_bytes > 0 && fds[0] >= 0,
          "rank 0's hello to rank %u: %ld bytes, arena of %llu bytes", me, n,
          (unsigned long long)h.arena_bytes);
    for (int i = 0; i < 3; i++) {
        if (fds[i] >= 0) {
            close(fds[i]); /* rank 0's arena: this receiver lends nothing back */
        }
    }
    int mfd = memfd_create("fake-ring", MFD_CLOEXEC | (bad == 1 ? MFD_ALLOW_SEALING : 0));
    CHECK(ftruncate(mfd, RPC_SHM_HDR_BYTES + RING) == 0, "ftruncate");
    const uint64_t head[2] = {bad == 1 ? 0x1234 : RPC_SHM_MAGIC, RING};
    CHECK(pwrite(mfd, head, sizeof head, 0) == (ssize_t)sizeof head, "pwrite");
    if (bad == 1) {
        CHECK(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0, "seal");
    }
    const int e1 = eventfd(0, EFD_CLOEXEC), e2 = eventfd(0, EFD_CLOEXEC);
    const rpc_shm_reply rep = {RPC_SHM_HELLO_MAGIC, RING, 0};
    const int give[3] = {mfd, e1, e2};
    CHECK(rpc_shm_send_packet(fd, &rep, sizeof rep, give, 3) == HDMLP_OK, "reply");
    close(mfd);
    close(e1);
    close(e2);
    /* rank 0 refuses the ring and hangs up */
    char buf[64];
    CHECK(wait_packet(fd, buf, sizeof buf, fds) == 0, "rank 0 kept a ring it cannot trust");
    close(fd);
}

/* ---- hostile senders ----------------------------------------------------------------------
 */

typedef struct att {
    int sock, data_efd, space_efd;
    rpc_shm_ring ring;
} att;

static char rank0_ring[RPC_SHM_ADDR_MAX];

/* Dials rank 0's ring socket and sends hello (len bytes of it) with n_fds descriptors;
 * *a is ready when the answer carries a ring (returns 1; its flags in *flags), else the
 * answer's text is in why (returns 0). */
static int attach_fds(att *a, const void *hello, size_t len, const int *give, int n_fds,
                      uint64_t *flags, char *why, size_t cap)
{
    memset(a, 0, sizeof *a);
    a->sock = a->data_efd = a->space_efd = -1;
    if (rpc_shm_dial(rank0_ring, &a->sock) != 1) {
        snprintf(why, cap, "cannot dial");
        return 0;
    }
    rpc_shm_send_packet(a->sock, hello, len, give, n_fds);
    int fds[3];
    rpc_shm_reply rep;
    char buf[256];
    const long n = wait_packet(a->sock, buf, sizeof buf, fds);
    if (n == (long)sizeof rep && fds[2] >= 0) {
        memcpy(&rep, buf, sizeof rep);
        *flags = rep.flags;
        const int rc = rpc_shm_ring_map(fds[0], rep.ring_bytes, &a->ring);
        close(fds[0]);
        a->data_efd = fds[1];
        a->space_efd = fds[2];
        return rc == HDMLP_OK;
    }
    snprintf(why, cap, "%s", n > 0 ? buf : n == 0 ? "(hangup)" : "(no answer)");
    return 0;
}

/* attach_fds with two eventfds as descriptors (pass_fds) or none. */
static int attach(att *a, const void *hello, size_t len, int pass_fds, char *why, size_t cap)
{
    const int extra[2] = {eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC)};
    uint64_t flags;
    const int ok = attach_fds(a, hello, len, extra, pass_fds ? 2 : 0, &flags, why, cap);
    close(extra[0]);
    close(extra[1]);
    return ok;
}

static void detach(att *a)
{
    rpc_shm_ring_unmap(&a->ring);
    if (a->sock >= 0) {
        close(a->sock);
    }
    if (a->data_efd >= 0) {
        close(a->data_efd);
    }
    if (a->space_efd >= 0) {
        close(a->space_efd);
    }
    a->sock = a->data_efd = a->space_efd = -1;
}

static void bell(att *a)
{
    const uint64_t one = 1;
    CHECK(write(a->data_efd, &one, sizeof one) == (ssize_t)sizeof one, "doorbell");
}

/* A record of kind for rank 0 from rank 1 with this job's token. */
static rpc_shm_rec rec(uint32_t kind)
{
    rpc_shm_rec h;
    memset(&h, 0, sizeof h);
    h.kind = kind;
    h.token = TOKEN;
    h.from = 1;
    h.to = 0;
    return h;
}

/* Writes raw bytes at the ring's head as they are (lengths not checked), then publishes
 * a head `skew` bytes further on with a probe record. */
static void put_raw(att *a, const void *bytes, size_t len, uint64_t skew)
{
    memcpy(a->ring.data + (a->ring.local & (a->ring.size - 1)), bytes, len);
    a->ring.local += ((len + 7) & ~(size_t)7) + skew;
    rpc_shm_rec probe = rec(0);
    rpc_shm_ring_put(&a->ring, &probe, NULL, 0);
    bell(a);
}

/* Expects rank 0 to close the ring with a cause naming `what`; nothing delivered. */
static void expect_refused(att *a, seen *s, size_t before, const char *what, const char *case_)
{
    char buf[256];
    int fds[3];
    const long n = wait_packet(a->sock, buf, sizeof buf, fds);
    CHECK(n > 0 && strstr(buf, what) != NULL, "%s: rank 0 answered %ld \"%s\", want \"%s\"",
          case_, n, n > 0 ? buf : "", what);
    printf("hostile_shm: %-28s refused: %s\n", case_, n > 0 ? buf : "(nothing)");
    CHECK(wait_packet(a->sock, buf, sizeof buf, fds) == 0, "%s: the ring stayed open", case_);
    CHECK(seen_n(s) == before, "%s: %zu messages delivered", case_, seen_n(s) - before);
    detach(a);
}

/* Sends a SAMPLE of size bytes (pattern of index), in fragments of frag, then a doorbell. */
static void put_sample(att *a, uint64_t index, uint64_t size, uint64_t frag, uint64_t upto)
{
    uint8_t *d = malloc(size + 1);
    for (uint64_t i = 0; i < size; i++) {
        d[i] = pattern(index, i);
    }
    for (uint64_t off = 0; off < upto;) {
        const uint64_t n = size - off < frag ? size - off : frag;
        rpc_shm_rec h = rec(PEER_SAMPLE);
        h.index = index;
        h.position = 1;
        h.size = size;
        h.offset = off;
        h.flags = off + n < size ? RPC_SHM_MORE : 0;
        while (rpc_shm_ring_space(&a->ring) < rpc_shm_rec_bytes(n)) {
            sleep_ms(1);
        }
        rpc_shm_ring_put(&a->ring, &h, d + off, n);
        bell(a);
        off += n;
    }
    free(d);
}

static void wait_delivered(seen *s, size_t n, const char *case_);

static const rpc_shm_hello hello_of_rank1 = {RPC_SHM_HELLO_MAGIC, TOKEN, 1, 0, 0};

/* A lent SAMPLE (offset in the sender's arena) of size bytes. */
static void put_lent(att *a, uint64_t index, uint64_t off, uint64_t size)
{
    rpc_shm_rec h = rec(PEER_SAMPLE);
    h.index = index;
    h.position = 1;
    h.size = size;
    h.offset = off;
    h.flags = RPC_SHM_LENT;
    rpc_shm_ring_put(&a->ring, &h, NULL, 0);
    bell(a);
}

/* Lending: a sender's arena is mapped and its blocks delivered in place; a block outside
 * it, a lent SAMPLE on a ring without an arena, and a RELEASE of a block rank 0 never lent
 * close the ring. Returns the messages delivered so far. */
static size_t lending(seen *s, size_t n)
{
    att a;
    char why[256];
    uint64_t flags = 0;
    rpc_arena *arena;
    CHECK(rpc_arena_create(64 << 10, &arena) == HDMLP_OK, "%s", hdmlp_last_error());
    uint8_t *blk = rpc_arena_alloc(arena, 3000);
    for (uint64_t i = 0; i < 3000; i++) {
        blk[i] = pattern(11, i);
    }
    rpc_shm_hello lend = {RPC_SHM_HELLO_MAGIC, TOKEN, 1, 0, rpc_arena_size(arena)};
    const int afd = rpc_arena_fd(arena);
    CHECK(attach_fds(&a, &lend, sizeof lend, &afd, 1, &flags, why, sizeof why) &&
              (flags & RPC_SHM_LEND_OK),
          "hello with an arena: %s, flags %llu", why, (unsigned long long)flags);
    put_lent(&a, 11, (uint64_t)(blk - rpc_arena_base(arena)), 3000);
    wait_delivered(s, ++n, "lent SAMPLE");
    int ok;
    const peer_msg last = seen_last(s, &ok);
    CHECK(last.index == 11 && last.size == 3000 && last.lent != NULL && ok,
          "lent SAMPLE: fields, bytes or not lent");
    put_lent(&a, 12, 60 << 10, 8000);
    expect_refused(&a, s, n, "outside the sender's arena", "lent past the arena");
    rpc_arena_destroy(arena);

    attach(&a, &hello_of_rank1, sizeof hello_of_rank1, 0, why, sizeof why);
    put_lent(&a, 13, 0, 100);
    expect_refused(&a, s, n, "not mapped", "lent without an arena");

    attach(&a, &hello_of_rank1, sizeof hello_of_rank1, 0, why, sizeof why);
    rpc_shm_rec r = rec(RPC_SHM_RELEASE);
    const rpc_shm_rel rel = {0, 100};
    r.size = sizeof rel;
    rpc_shm_ring_put(&a.ring, &r, (const uint8_t *)&rel, sizeof rel);
    bell(&a);
    expect_refused(&a, s, n, "released offset 0", "RELEASE of a block not lent");
    return n;
}

static void wait_delivered(seen *s, size_t n, const char *case_)
{
    for (int i = 0; i < 500 && seen_n(s) < n; i++) {
        sleep_ms(10);
    }
    CHECK(seen_n(s) == n, "%s: %zu delivered, want %zu", case_, seen_n(s), n);
}

int main(void)
{
    seen s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    char eps[WORLD][64];
    const char *ptrs[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        CHECK(rpc_pick_endpoint("127.0.0.1", eps[r], sizeof eps[r]) == HDMLP_OK, "%s",
              hdmlp_last_error());
        ptrs[r] = eps[r];
    }
    /* gRPC keeps its poller's descriptors after its first use: count from after one. */
    hdmlp_config *warm;
    hdmlp_config_create(&warm);
    hdmlp_config_set_rank(warm, 1, WORLD);
    hdmlp_config_set_peers(warm, ptrs, WORLD);
    peer_transport *wt = NULL;
    const peer_handler wh = {&s, on_msg, NULL};
    CHECK(rpc_transport_create(warm, &wh, &wt) == HDMLP_OK, "%s", hdmlp_last_error());
    if (wt != NULL) {
        wt->destroy(wt);
    }
    hdmlp_config_free(warm);
    int held0, held1;
    const int fds0 = open_fds(&held0);
    /* Ranks 1 and 2 as hostile receivers: listening before rank 0 starts. */
    char name1[RPC_SHM_ADDR_MAX], name2[RPC_SHM_ADDR_MAX];
    int l1 = -1, l2 = -1;
    CHECK(rpc_shm_address(eps[1], name1, sizeof name1) == HDMLP_OK, "name");
    CHECK(rpc_shm_address(eps[2], name2, sizeof name2) == HDMLP_OK, "name");
    CHECK(rpc_shm_listen(name1, &l1) == HDMLP_OK, "%s", hdmlp_last_error());
    CHECK(rpc_shm_listen(name2, &l2) == HDMLP_OK, "%s", hdmlp_last_error());
    CHECK(rpc_shm_address(eps[0], rank0_ring, sizeof rank0_ring) == HDMLP_OK, "name");

    hdmlp_config *cfg;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_rank(cfg, 0, WORLD);
    hdmlp_config_set_peers(cfg, ptrs, WORLD);
    hdmlp_config_set_job_token(cfg, TOKEN);
    hdmlp_config_set_peer_timeout(cfg, 3000);
    rpc_opts o;
    rpc_opts_default(cfg, &o);
    o.max_data = 1 << 20;
    o.shm_arena_bytes = (uint64_t)64 << 20; /* a loader sizes it from its budget; none here */
    const peer_handler h = {&s, on_msg, on_error};
    peer_transport *t = NULL;
    const int rc = rpc_transport_create_opts(cfg, &h, &o, &t);
    CHECK(rc == HDMLP_OK, "create: %s", hdmlp_last_error());
    if (t == NULL) {
        return 1;
    }

    fake_receiver(l1, 1, 0);
    fake_receiver(l2, 2, 1);
    for (int i = 0; i < 300 && !errors_of_both(&s); i++) {
        sleep_ms(10);
    }
    pthread_mutex_lock(&s.mu);
    CHECK(s.errs[1] == 1 && strstr(s.err[1], "not sealed") != NULL, "rank 1: %zu: %s",
          s.errs[1], s.err[1]);
    CHECK(s.errs[2] == 1 && strstr(s.err[2], "wrong magic") != NULL, "rank 2: %zu: %s",
          s.errs[2], s.err[2]);
    printf(
        "hostile_shm: rank 0 on rank 1's ring: %s\nhostile_shm: rank 0 on rank 2's ring: %s\n",
        s.err[1], s.err[2]);
    pthread_mutex_unlock(&s.mu);
    close(l1);
    close(l2);

    /* Hellos. */
    att a;
    char why[256];
    rpc_shm_hello hello = {RPC_SHM_HELLO_MAGIC, TOKEN, 1, 0, 0};
    rpc_shm_hello bad = hello;
    bad.token = TOKEN + 1;
    CHECK(!attach(&a, &bad, sizeof bad, 0, why, sizeof why) && strstr(why, "token") != NULL,
          "wrong token hello: %s", why);
    detach(&a);
    CHECK(!attach(&a, "garbage", 7, 0, why, sizeof why) && strstr(why, "hello") != NULL,
          "garbage hello: %s", why);
    detach(&a);
    bad = hello;
    bad.from = 7;
    CHECK(!attach(&a, &bad, sizeof bad, 0, why, sizeof why) && strstr(why, "rank 7") != NULL,
          "hello from rank 7: %s", why);
    detach(&a);
    bad = hello;
    bad.to = 2;
    CHECK(!attach(&a, &bad, sizeof bad, 1, why, sizeof why) && strstr(why, "to rank 2") != NULL,
          "hello to rank 2 with descriptors: %s", why);
    detach(&a);
    printf("hostile_shm: hellos refused (token, garbage, rank 7, to rank 2)\n");

    /* Good messages, then each attack on a fresh ring. */
    size_t n = 0;
    CHECK(attach(&a, &hello, sizeof hello, 0, why, sizeof why), "good hello: %s", why);
    rpc_shm_rec r = rec(PEER_REQUEST);
    r.position = 4;
    rpc_shm_ring_put(&a.ring, &r, NULL, 0);
    bell(&a);
    wait_delivered(&s, ++n, "REQUEST");
    put_sample(&a, 5, 3000, 3000, 3000);
    wait_delivered(&s, ++n, "small SAMPLE");
    int ok;
    peer_msg last = seen_last(&s, &ok);
    CHECK(last.kind == PEER_SAMPLE && last.index == 5 && last.size == 3000 && ok,
          "small SAMPLE's fields or bytes");
    put_sample(&a, 6, 200000, 9000, 200000); /* 23 fragments */
    wait_delivered(&s, ++n, "fragmented SAMPLE");
    last = seen_last(&s, &ok);
    CHECK(last.index == 6 && last.size == 200000 && ok, "fragmented SAMPLE bytes");
    /* A second ring from the same rank while this one lives. */
    att b;
    CHECK(!attach(&b, &hello, sizeof hello, 0, why, sizeof why) &&
              strstr(why, "already") != NULL,
          "second ring from rank 1: %s", why);
    detach(&b);

    r = rec(PEER_REQUEST);
    r.token = TOKEN ^ 1;
    rpc_shm_ring_put(&a.ring, &r, NULL, 0);
    bell(&a);
    expect_refused(&a, &s, n, "token", "another job's token");

    uint8_t junk[512];
    srand(7);
    for (size_t i = 0; i < sizeof junk; i++) {
        junk[i] = (uint8_t)rand();
    }
    attach(&a, &hello, sizeof hello, 0, why, sizeof why);
    put_raw(&a, junk, sizeof junk, 0);
    expect_refused(&a, &s, n, "rank 0:", "garbage");

    attach(&a, &hello, sizeof hello, 0, why, sizeof why);
    r = rec(PEER_REQUEST);
    r.len = 60000; /* far past what was written */
    put_raw(&a, &r, sizeof r, 0);
    expect_refused(&a, &s, n, "record of 60000 bytes", "length past the head");

    attach(&a, &hello, sizeof hello, 0, why, sizeof why);
    r = rec(PEER_REQUEST);
    r.len = sizeof r;
    put_raw(&a, &r, sizeof r, 3 * a.ring.size);
    expect_refused(&a, &s, n, "ring head", "impossible head");

    attach(&a, &hello, sizeof hello, 0, why, sizeof why);
    r = rec(PEER_SAMPLE);
    r.size = (2u << 20); /* above max_data, with a fragment of 100 bytes */
    r.flags = RPC_SHM_MORE;
    uint8_t frag[100] = {0};
    rpc_shm_ring_put(&a.ring, &r, frag, sizeof frag);
    bell(&a);
    expect_refused(&a, &s, n, "limit", "SAMPLE above max_data");

    attach(&a, &hello, sizeof hello, 0, why, sizeof why);
    r = rec(PEER_SAMPLE);
    r.size = 1000;
    r.offset = 500; /* a continuation without its start */
    rpc_shm_ring_put(&a.ring, &r, frag, sizeof frag);
    bell(&a);
    expect_refused(&a, &s, n, "offset 500", "fragment out of order");

    attach(&a, &hello, sizeof hello, 0, why, sizeof why);
    r = rec(PEER_DONE);
    r.to = 2;
    rpc_shm_ring_put(&a.ring, &r, NULL, 0);
    bell(&a);
    expect_refused(&a, &s, n, "to rank 2", "record for another rank");

    /* Dies in the middle of a fragmented SAMPLE: nothing delivered, the next ring works. */
    attach(&a, &hello, sizeof hello, 0, why, sizeof why);
    put_sample(&a, 8, 100000, 9000, 45000);
    detach(&a);
    sleep_ms(200);
    CHECK(seen_n(&s) == n, "a SAMPLE cut short was delivered");
    CHECK(attach(&a, &hello, sizeof hello, 0, why, sizeof why), "hello after a death: %s", why);
    put_sample(&a, 9, 100000, 9000, 100000);
    wait_delivered(&s, ++n, "SAMPLE after a death");
    last = seen_last(&s, &ok);
    CHECK(last.index == 9 && ok, "SAMPLE after a death: bytes");
    detach(&a);

    n = lending(&s, n);

    rpc_stats st;
    rpc_transport_stats(t, &st);
    printf("hostile_shm: delivered %zu, rejected %llu (4 hellos + 10 rings + 1 second ring)\n",
           n, (unsigned long long)st.rejected);
    CHECK(st.rejected == 15, "rejected %llu, want 15", (unsigned long long)st.rejected);
    CHECK(st.shm_msgs_recv == n, "shm_msgs_recv %llu", (unsigned long long)st.shm_msgs_recv);
    pthread_mutex_lock(&s.mu);
    CHECK(s.errs[0] == 0 && s.errs[1] == 1 && s.errs[2] == 1, "errors reported more than once");
    pthread_mutex_unlock(&s.mu);
    t->destroy(t);
    hdmlp_config_free(cfg);
    pthread_mutex_destroy(&s.mu);
    const int fds1 = open_fds(&held1);
    CHECK(fds1 == fds0 && held1 == held0,
          "%d descriptors (%d sockets or memfds) open after destroy, %d (%d) before", fds1,
          held1, fds0, held0);
    if (failures != 0) {
        fprintf(stderr, "hostile_shm: %d broken promises\n", failures);
        return 1;
    }
    printf("hostile_shm: OK\n");
    return 0;
}
