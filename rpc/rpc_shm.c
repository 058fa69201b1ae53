/* The shared-memory path of the transport: the ring thread, send() into rings, delivery
 * from rings, probes and liveness (rpc_shm.h, rpc_transport.h). */
#include "rpc_shm.h"

#include "rpc_shm_link.h"
#include "rpc_shm_ring.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define SHM_RETRY_NS 50000000ull /* between attempts to reach a peer's ring socket */

enum { EV_LISTEN = 1, EV_WAKE, EV_OUT_SOCK, EV_OUT_SPACE, EV_IN_SOCK, EV_IN_DATA };
enum { OUT_DIAL, OUT_HELLO, OUT_READY, OUT_FAILED };

/* A message waiting for room in a ring, with its own copy of the payload. */
typedef struct shm_item {
    struct shm_item *next;
    peer_msg m;
    uint8_t *data;
    uint64_t sent; /* payload bytes already in the ring (a fragmented message) */
} shm_item;

/* Towards one peer: its ring (we write, it reads). Guarded by rpc_shm.lock. */
typedef struct shm_out {
    int used; /* the lane of this rank is ours */
    int state;
    int sock, data_efd, space_efd;
    rpc_shm_ring ring;
    shm_item *urg_h, *urg_t, *pre_h, *pre_t;
    shm_item *cur; /* partly written: nothing else goes in before its last fragment */
    uint64_t queued;
    uint64_t start_ns, retry_ns, last_write_ns, progress_ns, seen_tail;
    int reported;
    uint64_t msg_end; /* ring position past the last message (not probe) written */
    uint64_t hup_ns;  /* when the peer's ring socket hung up (0: it has not) */
    char name[RPC_SHM_ADDR_MAX];
    char why[256];
} shm_out;

/* From one peer: its ring (it writes, we read). Only the thread touches these. */
typedef struct shm_in {
    int sock, data_efd, space_efd; /* sock < 0: free slot */
    int ready;                     /* hello accepted, ring mapped */
    uint32_t rank;
    uint64_t since_ns;
    rpc_shm_ring ring;
    int more;         /* records left after a round: read again without waiting */
    uint8_t *asm_buf; /* a fragmented SAMPLE being assembled */
    rpc_shm_rec asm_hdr;
    uint64_t asm_got;
} shm_in;

struct rpc_shm {
    rpc_tr *t;
    pthread_mutex_t lock;
    pthread_cond_t cv; /* broadcast after each round of the thread */
    int closing, stop;
    int ep, wake_efd, listen_fd;
    shm_out *out; /* world entries */
    shm_in *in;
    uint32_t n_in;
    uint64_t ring_bytes, frag_max;
    pthread_t th;
    int started;
};

/* ns from then to now; 0 if then is later (another thread wrote meanwhile). */
static uint64_t since(uint64_t now, uint64_t then) { return now > then ? now - then : 0; }

static uint64_t ev_key(int kind, uint32_t i) { return (uint64_t)kind << 32 | i; }

static void ep_add(rpc_shm *s, int fd, int kind, uint32_t i, uint32_t events)
{
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = events;
    e.data.u64 = ev_key(kind, i);
    epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e);
}

static void close_fd(rpc_shm *s, int *fd)
{
    if (*fd >= 0) {
        epoll_ctl(s->ep, EPOLL_CTL_DEL, *fd, NULL);
        close(*fd);
        *fd = -1;
    }
}

static void ring_bell(int efd)
{
    const uint64_t one = 1;
    if (efd >= 0 && write(efd, &one, sizeof one) < 0) {
        /* a full counter already wakes the reader */
    }
}

static void drain_efd(int efd)
{
    uint64_t v;
    if (read(efd, &v, sizeof v) < 0) {
        /* nothing pending */
    }
}

/* ---- the sending side ------------------------------------------------------------------ */

static void items_free(shm_item *it)
{
    while (it != NULL) {
        shm_item *next = it->next;
        hd_free(it->data);
        hd_free(it);
        it = next;
    }
}

/* With s->lock: marks the lane failed, drops its queue, closes its ring. */
static void out_fail(rpc_shm *s, uint32_t rank, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void out_fail(rpc_shm *s, uint32_t rank, const char *fmt, ...)
{
    shm_out *o = &s->out[rank];
    if (o->state == OUT_FAILED) {
        return;
    }
    o->state = OUT_FAILED;
    o->reported = s->closing;
    int n = snprintf(o->why, sizeof o->why, "rank %u (%s via the same-host ring): ", rank,
                     s->t->cfg.peers[rank]);
    n = n < 0 || (size_t)n >= sizeof o->why ? 0 : n;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->why + n, sizeof o->why - (size_t)n, fmt, ap);
    va_end(ap);
    items_free(o->cur);
    items_free(o->urg_h);
    items_free(o->pre_h);
    o->cur = o->urg_h = o->urg_t = o->pre_h = o->pre_t = NULL;
    o->queued = 0;
    close_fd(s, &o->sock);
    close_fd(s, &o->space_efd);
    if (o->data_efd >= 0) {
        close(o->data_efd);
        o->data_efd = -1;
    }
    rpc_shm_ring_unmap(&o->ring);
    pthread_cond_broadcast(&s->cv);
}

static void rec_of(rpc_shm *s, const peer_msg *m, uint32_t to, rpc_shm_rec *h)
{
    memset(h, 0, sizeof *h);
    h->token = s->t->cfg.token;
    h->from = s->t->self;
    h->to = to;
    if (m == NULL) {
        return; /* a probe */
    }
    h->kind = m->kind;
    h->slot = m->slot;
    h->epoch = m->epoch;
    h->position = m->position;
    h->group = m->group;
    h->free_remote = m->free_remote;
    h->index = m->index;
    h->label = m->label;
    h->prefetch = m->prefetch;
    h->size = m->kind == PEER_SAMPLE ? m->size : 0;
}

/* With s->lock, lane ready: writes one record if it fits. 1 written, 0 no room (the lane
 * then waits for the space doorbell), -1 the lane failed. */
static int out_put(rpc_shm *s, uint32_t rank, const peer_msg *m, uint64_t off)
{
    shm_out *o = &s->out[rank];
    const uint64_t total = m != NULL && m->kind == PEER_SAMPLE ? m->size : 0;
    uint64_t frag = total - off;
    if (frag > s->frag_max) {
        frag = s->frag_max;
    }
    const uint64_t need = rpc_shm_rec_bytes(frag);
    /* Prefetches may fill half the ring: an answer always finds room past them when the
     * peer reads slowly, and so overtakes the prefetches still queued. */
    const uint64_t reserve =
        m != NULL && m->kind == PEER_SAMPLE && m->prefetch ? o->ring.size / 2 : 0;
    uint64_t space = rpc_shm_ring_space(&o->ring);
    if (space != UINT64_MAX && space < need + reserve) {
        space = rpc_shm_ring_wait_space(&o->ring);
    }
    if (space == UINT64_MAX) {
        out_fail(s, rank, "its ring's read position is impossible (ring corrupted)");
        return -1;
    }
    if (space < need + reserve) {
        return 0;
    }
    rpc_shm_rec h;
    rec_of(s, m, rank, &h);
    h.offset = off;
    h.flags = off + frag < total ? RPC_SHM_MORE : 0;
    const uint64_t now = rpc_now_ns();
    if (rpc_shm_ring_empty(&o->ring)) {
        o->progress_ns = now; /* the peer's time to consume starts now */
    }
    if (rpc_shm_ring_put(&o->ring, &h, m != NULL ? m->data + off : NULL, frag)) {
        ring_bell(o->data_efd);
    }
    o->last_write_ns = now;
    o->msg_end = m != NULL ? o->ring.local : o->msg_end;
    if (m != NULL) {
        pthread_mutex_lock(&s->t->lock);
        s->t->st.bytes_sent += need;
        s->t->st.msgs_sent += h.flags == 0;
        s->t->st.shm_msgs_sent += h.flags == 0;
        pthread_mutex_unlock(&s->t->lock);
    }
    return 1;
}

/* With s->lock: moves queued messages into the ring while it has room. */
static void out_flush(rpc_shm *s, uint32_t rank)
{
    shm_out *o = &s->out[rank];
    while (o->state == OUT_READY) {
        shm_item *it = o->cur;
        if (it == NULL && o->urg_h != NULL) {
            it = o->urg_h;
            o->urg_h = it->next;
            o->urg_t = o->urg_h != NULL ? o->urg_t : NULL;
        } else if (it == NULL && o->pre_h != NULL) {
            it = o->pre_h;
            o->pre_h = it->next;
            o->pre_t = o->pre_h != NULL ? o->pre_t : NULL;
        }
        if (it == NULL) {
            return;
        }
        it->next = NULL;
        o->cur = it;
        const uint64_t total = it->m.kind == PEER_SAMPLE ? it->m.size : 0;
        const int rc = out_put(s, rank, &it->m, it->sent);
        if (rc <= 0) {
            return;
        }
        const uint64_t frag = total - it->sent < s->frag_max ? total - it->sent : s->frag_max;
        it->sent += frag;
        if (it->sent == total) {
            o->queued -= total + sizeof(rpc_shm_rec);
            o->cur = NULL;
            it->next = NULL;
            items_free(it);
        }
    }
}

int rpc_shm_send(rpc_shm *s, const peer_msg *m)
{
    const int urgent = !(m->kind == PEER_SAMPLE && m->prefetch);
    const uint64_t size = m->kind == PEER_SAMPLE ? m->size : 0;
    int rc = HDMLP_OK, wake = 0;
    pthread_mutex_lock(&s->lock);
    shm_out *o = &s->out[m->to];
    if (s->closing) {
        rc = hd_err(HDMLP_E_STATE, "rpc: send to rank %u after destroy began", m->to);
    } else if (o->state == OUT_FAILED || o->hup_ns != 0) {
        if (o->state != OUT_FAILED) {
            out_fail(s, m->to, "its ring socket hung up (peer exited?)");
            wake = 1;
        }
        rc = hd_err(HDMLP_E_PEER, "rpc: %s", o->why);
    } else if (o->state == OUT_READY && o->cur == NULL && o->urg_h == NULL &&
               (urgent || o->pre_h == NULL) && size <= s->frag_max &&
               out_put(s, m->to, m, 0) != 0) {
        /* written straight into the ring (or the lane failed: reported below) */
        rc = o->state == OUT_FAILED ? hd_err(HDMLP_E_PEER, "rpc: %s", o->why) : HDMLP_OK;
        wake = o->state == OUT_FAILED;
    } else if (o->queued > 0 && o->queued + size + sizeof(rpc_shm_rec) > s->t->o.queue_bytes) {
        out_fail(s, m->to, "send queue full (%llu bytes unsent, cap %llu)",
                 (unsigned long long)o->queued, (unsigned long long)s->t->o.queue_bytes);
        rc = hd_err(HDMLP_E_PEER, "rpc: %s", o->why);
        wake = 1;
    } else {
        shm_item *it = hd_calloc(1, sizeof *it);
        uint8_t *data = size > 0 ? hd_malloc((size_t)size) : NULL;
        if (it == NULL || (size > 0 && data == NULL)) {
            hd_free(it);
            hd_free(data);
            rc = hd_err(HDMLP_E_NOMEM, "rpc: out of memory queueing a message");
        } else {
            if (size > 0) {
                memcpy(data, m->data, (size_t)size);
            }
            it->m = *m;
            it->m.data = data;
            it->data = data;
            shm_item **h = urgent ? &o->urg_h : &o->pre_h, **t = urgent ? &o->urg_t : &o->pre_t;
            if (*t != NULL) {
                (*t)->next = it;
            } else {
                *h = it;
            }
            *t = it;
            wake = o->queued == 0;
            o->queued += size + sizeof(rpc_shm_rec);
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (wake) {
        ring_bell(s->wake_efd);
    }
    return rc;
}

/* With s->lock: dials, takes the ring, flushes, probes, checks liveness; returns the ms
 * until this lane next needs the thread (UINT64_MAX: only an event). */
static uint64_t out_tick(rpc_shm *s, uint32_t rank, uint64_t now)
{
    shm_out *o = &s->out[rank];
    const rpc_tr *t = s->t;
    const uint64_t timeout_ns = (uint64_t)t->cfg.peer_timeout_ms * 1000000ull;
    if (o->state == OUT_DIAL && now >= o->retry_ns) {
        int fd;
        const int d = rpc_shm_dial(o->name, &fd);
        if (d < 0) {
            out_fail(s, rank, "%s", hdmlp_last_error());
            return UINT64_MAX;
        }
        rpc_shm_hello hello = {RPC_SHM_HELLO_MAGIC, t->cfg.token, t->self, rank};
        if (d > 0 && rpc_shm_send_packet(fd, &hello, sizeof hello, NULL, 0) == HDMLP_OK) {
            o->sock = fd;
            o->state = OUT_HELLO;
            ep_add(s, fd, EV_OUT_SOCK, rank, EPOLLIN | EPOLLRDHUP);
        } else if (d > 0) {
            close(fd);
        }
        o->retry_ns = now + SHM_RETRY_NS;
    }
    if ((o->state == OUT_DIAL || o->state == OUT_HELLO) &&
        since(now, o->start_ns) > timeout_ns) {
        out_fail(
            s, rank, "no answer within %u ms (%s its ring socket @%s)", t->cfg.peer_timeout_ms,
            o->state == OUT_DIAL ? "cannot connect to" : "connected, no ring from", o->name);
        return UINT64_MAX;
    }
    if (o->state == OUT_DIAL) {
        return since(o->retry_ns, now) / 1000000u + 1;
    }
    if (o->state == OUT_HELLO) {
        return since(o->start_ns + timeout_ns, now) / 1000000u + 1;
    }
    if (o->state != OUT_READY) {
        return UINT64_MAX;
    }
    if (o->hup_ns != 0) {
        const uint64_t tail = rpc_shm_ring_tail(&o->ring);
        if (o->queued > 0 || o->msg_end - tail - 1 < o->ring.size ||
            since(now, o->last_write_ns) >= t->probe_ns) {
            out_fail(s, rank, "its ring socket hung up (peer exited?)%s",
                     o->queued > 0 || o->msg_end - tail - 1 < o->ring.size
                         ? " with messages not read"
                         : "");
            return UINT64_MAX;
        }
        return since(o->last_write_ns + t->probe_ns, now) / 1000000u + 1;
    }
    out_flush(s, rank);
    if (o->state == OUT_READY && o->cur == NULL && o->urg_h == NULL && o->pre_h == NULL &&
        rpc_shm_ring_empty(&o->ring) && !s->closing &&
        since(now, o->last_write_ns) >= t->probe_ns) {
        out_put(s, rank, NULL, 0);
    }
    if (o->state != OUT_READY) {
        return UINT64_MAX;
    }
    uint64_t next = o->last_write_ns + t->probe_ns;
    if (!rpc_shm_ring_empty(&o->ring)) {
        const uint64_t tail = rpc_shm_ring_tail(&o->ring);
        if (tail != o->seen_tail) {
            o->seen_tail = tail;
            o->progress_ns = now;
        } else if (since(now, o->progress_ns) > timeout_ns) {
            out_fail(s, rank,
                     "no answer within %u ms (connected, peer not responding: its ring not "
                     "read)",
                     t->cfg.peer_timeout_ms);
            return UINT64_MAX;
        }
        next = o->progress_ns + timeout_ns + 1000000u < next
                   ? o->progress_ns + timeout_ns + 1000000u
                   : next;
        if (s->closing) {
            rpc_shm_ring_wait_space(&o->ring); /* draining: wake us as it is consumed */
        }
    }
    return next > now ? (next - now) / 1000000u + 1 : 0;
}

/* The peer answered our hello (or rejected it, or hung up). */
static void out_answer(rpc_shm *s, uint32_t rank)
{
    shm_out *o = &s->out[rank];
    char buf[256];
    int fds[3];
    const long n = rpc_shm_recv_packet(o->sock, buf, sizeof buf - 1, fds);
    if (n == -1) {
        return;
    }
    if (n == 0 && o->state == OUT_READY) {
        /* The peer is gone. Reported at once if it leaves messages unread, else when its
         * next probe would be due or something is sent to it (as a probe call to a peer
         * that shut down fails), so that ranks ending together report nothing. */
        o->hup_ns = rpc_now_ns();
        close_fd(s, &o->sock);
        return;
    }
    if (n == -2 || n == 0) {
        out_fail(s, rank, "%s",
                 n == 0 ? "its ring socket hung up (peer exited?)" : hdmlp_last_error());
        return;
    }
    rpc_shm_reply rep;
    if (o->state == OUT_HELLO && (size_t)n == sizeof rep && fds[2] >= 0) {
        memcpy(&rep, buf, sizeof rep);
        int rc = rep.magic == RPC_SHM_HELLO_MAGIC
                     ? rpc_shm_ring_map(fds[0], rep.ring_bytes, &o->ring)
                     : hd_err(HDMLP_E_PEER, "a reply with a wrong magic");
        close(fds[0]);
        if (rc == HDMLP_OK) {
            o->data_efd = fds[1];
            o->space_efd = fds[2];
            o->state = OUT_READY;
            o->seen_tail = 0;
            o->progress_ns = o->last_write_ns = rpc_now_ns();
            ep_add(s, o->space_efd, EV_OUT_SPACE, rank, EPOLLIN);
            return;
        }
        close(fds[1]);
        close(fds[2]);
        out_fail(s, rank, "unusable ring: %s", hdmlp_last_error());
        return;
    }
    for (int i = 0; i < 3; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    buf[n] = '\0';
    for (long i = 0; i < n; i++) {
        buf[i] = buf[i] >= 32 && buf[i] < 127 ? buf[i] : '?';
    }
    out_fail(s, rank, "rejected by the peer: %s", buf);
}

/* ---- the receiving side ---------------------------------------------------------------- */

static void in_close(rpc_shm *s, shm_in *c)
{
    close_fd(s, &c->sock);
    close_fd(s, &c->data_efd);
    if (c->space_efd >= 0) {
        close(c->space_efd);
        c->space_efd = -1;
    }
    rpc_shm_ring_unmap(&c->ring);
    hd_free(c->asm_buf);
    c->asm_buf = NULL;
    c->ready = 0;
    c->more = 0;
}

/* Rejects a sender: says why on its socket, counts it, closes the ring. */
static void in_reject(rpc_shm *s, shm_in *c, const char *why)
{
    rpc_shm_send_packet(c->sock, why, strlen(why), NULL, 0);
    pthread_mutex_lock(&s->t->lock);
    s->t->st.rejected++;
    pthread_mutex_unlock(&s->t->lock);
    in_close(s, c);
}

static void in_accept(rpc_shm *s)
{
    for (;;) {
        int fd;
        const int a = rpc_shm_accept(s->listen_fd, &fd);
        if (a == 0) {
            return;
        }
        if (a < 0) {
            pthread_mutex_lock(&s->t->lock);
            s->t->st.rejected++;
            pthread_mutex_unlock(&s->t->lock);
            continue;
        }
        uint32_t i = 0;
        while (i < s->n_in && s->in[i].sock >= 0) {
            i++;
        }
        if (i == s->n_in) {
            static const char full[] = "too many connections to the ring socket";
            rpc_shm_send_packet(fd, full, sizeof full - 1, NULL, 0);
            close(fd);
            continue;
        }
        shm_in *c = &s->in[i];
        c->sock = fd;
        c->since_ns = rpc_now_ns();
        ep_add(s, fd, EV_IN_SOCK, i, EPOLLIN | EPOLLRDHUP);
    }
}

/* A sender's hello: checks it, makes its ring and answers with the descriptors. */
static void in_hello(rpc_shm *s, shm_in *c, uint32_t slot)
{
    const rpc_tr *t = s->t;
    rpc_shm_hello h;
    int fds[3];
    const long n = rpc_shm_recv_packet(c->sock, &h, sizeof h, fds);
    for (int i = 0; i < 3; i++) {
        if (fds[i] >= 0) {
            close(fds[i]); /* a sender has nothing to pass us */
        }
    }
    if (n == -1) {
        return;
    }
    char why[160];
    if (n != (long)sizeof h || h.magic != RPC_SHM_HELLO_MAGIC) {
        in_reject(s, c, "not a ring hello");
        return;
    }
    if (h.token != t->cfg.token) {
        in_reject(s, c, "another job's token");
        return;
    }
    if (h.to != t->self || h.from >= t->world || h.from == t->self) {
        snprintf(why, sizeof why, "hello from rank %u to rank %u (this is rank %u of %u)",
                 h.from, h.to, t->self, t->world);
        in_reject(s, c, why);
        return;
    }
    for (uint32_t i = 0; i < s->n_in; i++) {
        if (s->in[i].sock >= 0 && s->in[i].ready && s->in[i].rank == h.from) {
            snprintf(why, sizeof why, "rank %u already has a ring to rank %u", h.from, t->self);
            in_reject(s, c, why);
            return;
        }
    }
    int mfd = -1;
    int rc = rpc_shm_ring_create_fd(s->ring_bytes, &mfd);
    if (rc == HDMLP_OK) {
        rc = rpc_shm_ring_map(mfd, s->ring_bytes, &c->ring);
    }
    c->data_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    c->space_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    const rpc_shm_reply rep = {RPC_SHM_HELLO_MAGIC, s->ring_bytes};
    const int give[3] = {mfd, c->data_efd, c->space_efd};
    if (rc != HDMLP_OK || c->data_efd < 0 || c->space_efd < 0 ||
        rpc_shm_send_packet(c->sock, &rep, sizeof rep, give, 3) != HDMLP_OK) {
        if (mfd >= 0) {
            close(mfd);
        }
        in_reject(s, c, "the receiver could not make a ring");
        return;
    }
    close(mfd);
    c->rank = h.from;
    c->ready = 1;
    ep_add(s, c->data_efd, EV_IN_DATA, slot, EPOLLIN);
}

/* Checks a record's header against the pair and what came before; NULL if acceptable,
 * else why not. */
static const char *rec_problem(const rpc_shm *s, const shm_in *c, const rpc_shm_rec *h,
                               char *why, size_t cap)
{
    const rpc_tr *t = s->t;
    const uint64_t frag = h->len - sizeof *h;
    if (h->token != t->cfg.token) {
        return "a record with another job's token";
    }
    if (h->from != c->rank || h->to != t->self) {
        snprintf(why, cap, "a record from rank %u to rank %u on the ring of rank %u to %u",
                 h->from, h->to, c->rank, t->self);
        return why;
    }
    if (h->kind > PEER_DONE || (h->flags & ~RPC_SHM_MORE) != 0) {
        snprintf(why, cap, "a record of unknown kind %u or flags %u", h->kind, h->flags);
        return why;
    }
    if (h->kind != PEER_SAMPLE) {
        return frag == 0 && h->size == 0 && h->offset == 0 && h->flags == 0
                   ? NULL
                   : "a non-SAMPLE record with payload";
    }
    if (h->size > t->o.max_data || h->prefetch > 1) {
        snprintf(why, cap, "SAMPLE %llu of %llu bytes (limit %llu) or prefetch %u",
                 (unsigned long long)h->index, (unsigned long long)h->size,
                 (unsigned long long)t->o.max_data, h->prefetch);
        return why;
    }
    const uint64_t want_off = c->asm_buf != NULL ? c->asm_got : 0;
    if (h->offset != want_off || frag > h->size - h->offset ||
        ((h->flags & RPC_SHM_MORE) != 0) != (h->offset + frag < h->size)) {
        snprintf(why, cap, "SAMPLE %llu: fragment of %llu bytes at offset %llu of %llu",
                 (unsigned long long)h->index, (unsigned long long)frag,
                 (unsigned long long)h->offset, (unsigned long long)h->size);
        return why;
    }
    if (c->asm_buf != NULL &&
        (h->index != c->asm_hdr.index || h->size != c->asm_hdr.size ||
         h->epoch != c->asm_hdr.epoch || h->position != c->asm_hdr.position)) {
        return "a fragment of another SAMPLE in the middle of one";
    }
    return NULL;
}

static void deliver(rpc_shm *s, const rpc_shm_rec *h, const uint8_t *data, uint64_t bytes)
{
    rpc_tr *t = s->t;
    peer_msg m;
    memset(&m, 0, sizeof m);
    m.kind = h->kind;
    m.from = h->from;
    m.to = h->to;
    m.token = h->token;
    m.epoch = h->epoch;
    m.position = h->position;
    m.group = h->group;
    m.slot = h->slot;
    m.free_remote = h->free_remote;
    if (h->kind == PEER_SAMPLE) {
        m.prefetch = h->prefetch;
        m.index = h->index;
        m.label = h->label;
        m.size = h->size;
        m.data = data;
    }
    pthread_mutex_lock(&t->lock);
    t->st.msgs_recv++;
    t->st.shm_msgs_recv++;
    t->st.bytes_recv += bytes;
    pthread_mutex_unlock(&t->lock);
    pthread_mutex_lock(&t->deliver);
    t->h.on_msg(t->h.ctx, &m);
    pthread_mutex_unlock(&t->deliver);
}

/* Reads what the ring holds, up to one ring's worth (then c->more). */
static void in_read(rpc_shm *s, shm_in *c)
{
    uint64_t budget = c->ring.size;
    c->more = 0;
    for (;;) {
        rpc_shm_rec h;
        const uint8_t *p;
        const int k = rpc_shm_ring_peek(&c->ring, &h, &p);
        if (k == 0) {
            if (!rpc_shm_ring_wait_data(&c->ring)) {
                return;
            }
            continue;
        }
        char why[200];
        const char *bad = k < 0 ? hdmlp_last_error() : rec_problem(s, c, &h, why, sizeof why);
        if (bad != NULL) {
            char msg[256];
            snprintf(msg, sizeof msg, "rank %u: %s", s->t->self, bad);
            in_reject(s, c, msg);
            return;
        }
        const uint64_t frag = h.len - sizeof h;
        if (h.kind != 0 && h.kind == PEER_SAMPLE && (h.offset > 0 || frag < h.size)) {
            if (c->asm_buf == NULL) {
                c->asm_buf = hd_malloc((size_t)h.size);
                c->asm_hdr = h;
                c->asm_got = 0;
                if (c->asm_buf == NULL) {
                    in_reject(s, c, "the receiver is out of memory for a SAMPLE");
                    return;
                }
            }
            memcpy(c->asm_buf + c->asm_got, p, (size_t)frag);
            c->asm_got += frag;
            if (c->asm_got == h.size) {
                deliver(s, &c->asm_hdr, c->asm_buf, h.size + sizeof h);
                hd_free(c->asm_buf);
                c->asm_buf = NULL;
            }
        } else if (h.kind != 0) {
            deliver(s, &h, p, h.len); /* the payload is read in place */
        }
        const uint64_t used = rpc_shm_rec_bytes(frag);
        if (rpc_shm_ring_pop(&c->ring, h.len)) {
            ring_bell(c->space_efd);
        }
        if (used >= budget) {
            c->more = 1;
            return;
        }
        budget -= used;
    }
}

/* ---- the thread ------------------------------------------------------------------------ */

static void report(rpc_shm *s)
{
    for (;;) {
        char why[sizeof s->out[0].why];
        uint32_t rank = UINT32_MAX;
        pthread_mutex_lock(&s->lock);
        for (uint32_t r = 0; r < s->t->world && rank == UINT32_MAX; r++) {
            shm_out *o = &s->out[r];
            if (o->used && o->state == OUT_FAILED && !o->reported) {
                o->reported = 1;
                if (!s->closing) {
                    rank = r;
                    memcpy(why, o->why, sizeof why);
                }
            }
        }
        pthread_mutex_unlock(&s->lock);
        if (rank == UINT32_MAX) {
            return;
        }
        if (s->t->h.on_error != NULL) {
            s->t->h.on_error(s->t->h.ctx, rank, HDMLP_E_PEER, why);
        }
    }
}

static void *shm_main(void *arg)
{
    rpc_shm *s = arg;
    const uint64_t timeout_ns = (uint64_t)s->t->cfg.peer_timeout_ms * 1000000ull;
    int wait_ms = 0;
    for (;;) {
        struct epoll_event ev[32];
        const int n = epoll_wait(s->ep, ev, 32, wait_ms);
        pthread_mutex_lock(&s->lock);
        const int stop = s->stop;
        pthread_mutex_unlock(&s->lock);
        if (stop) {
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            const int kind = (int)(ev[i].data.u64 >> 32);
            const uint32_t idx = (uint32_t)ev[i].data.u64;
            if (kind == EV_LISTEN) {
                in_accept(s);
            } else if (kind == EV_WAKE) {
                drain_efd(s->wake_efd);
            } else if (kind == EV_OUT_SOCK || kind == EV_OUT_SPACE) {
                pthread_mutex_lock(&s->lock);
                if (kind == EV_OUT_SPACE && s->out[idx].space_efd >= 0) {
                    drain_efd(s->out[idx].space_efd);
                } else if (kind == EV_OUT_SOCK && s->out[idx].sock >= 0) {
                    out_answer(s, idx);
                }
                pthread_mutex_unlock(&s->lock);
            } else if (kind == EV_IN_DATA && s->in[idx].ready) {
                drain_efd(s->in[idx].data_efd);
                in_read(s, &s->in[idx]);
            } else if (kind == EV_IN_SOCK && s->in[idx].sock >= 0) {
                shm_in *c = &s->in[idx];
                if (!c->ready) {
                    in_hello(s, c, idx);
                } else {
                    /* The sender hung up (or wrote on a socket it must not): what it
                     * completed is delivered, a message cut short is dropped. */
                    in_read(s, c);
                    if (c->sock >= 0) {
                        in_close(s, c);
                    }
                }
            }
        }
        const uint64_t now = rpc_now_ns();
        uint64_t next = UINT64_MAX;
        for (uint32_t i = 0; i < s->n_in; i++) {
            shm_in *c = &s->in[i];
            if (c->ready && c->more) {
                in_read(s, c);
            }
            next = c->ready && c->more ? 0 : next;
            if (c->sock >= 0 && !c->ready && since(now, c->since_ns) > timeout_ns) {
                in_reject(s, c, "no hello within the peer timeout");
            }
            if (c->sock >= 0 && !c->ready) {
                const uint64_t left = since(c->since_ns + timeout_ns, now) / 1000000u + 1;
                next = left < next ? left : next;
            }
        }
        pthread_mutex_lock(&s->lock);
        for (uint32_t r = 0; r < s->t->world; r++) {
            if (s->out[r].used) {
                const uint64_t w = out_tick(s, r, now);
                next = w < next ? w : next;
            }
        }
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->lock);
        report(s);
        wait_ms = next > 60000 ? 60000 : (int)next;
    }
}

/* ---- life cycle ------------------------------------------------------------------------ */

int rpc_shm_start(rpc_tr *t, rpc_shm **out)
{
    *out = NULL;
    rpc_shm *s = hd_calloc(1, sizeof *s);
    if (s == NULL) {
        return hd_err(HDMLP_E_NOMEM, "rpc: out of memory");
    }
    s->t = t;
    s->ep = s->wake_efd = s->listen_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->ring_bytes = t->o.shm_ring_bytes;
    s->frag_max = s->ring_bytes / 4 - sizeof(rpc_shm_rec);
    s->n_in = 2 * t->world + 8;
    s->out = hd_calloc(t->world, sizeof *s->out);
    s->in = hd_calloc(s->n_in, sizeof *s->in);
    *out = s;
    if (s->out == NULL || s->in == NULL) {
        return hd_err(HDMLP_E_NOMEM, "rpc: out of memory for %u rings", t->world);
    }
    for (uint32_t i = 0; i < s->n_in; i++) {
        s->in[i].sock = s->in[i].data_efd = s->in[i].space_efd = -1;
    }
    const uint64_t now = rpc_now_ns();
    for (uint32_t r = 0; r < t->world; r++) {
        shm_out *o = &s->out[r];
        o->sock = o->data_efd = o->space_efd = -1;
        o->used = r != t->self && t->lanes[r].shm;
        o->state = OUT_DIAL;
        o->start_ns = now;
        if (o->used && rpc_shm_address(t->cfg.peers[r], o->name, sizeof o->name) != HDMLP_OK) {
            return HDMLP_E_RANGE;
        }
    }
    char name[RPC_SHM_ADDR_MAX];
    int rc = rpc_shm_address(t->cfg.peers[t->self], name, sizeof name);
    if (rc == HDMLP_OK) {
        rc = rpc_shm_listen(name, &s->listen_fd);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    s->wake_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->ep < 0 || s->wake_efd < 0) {
        return hd_err(HDMLP_E_IO, "rpc: epoll or eventfd for the ring thread: %s",
                      strerror(errno));
    }
    ep_add(s, s->listen_fd, EV_LISTEN, 0, EPOLLIN);
    ep_add(s, s->wake_efd, EV_WAKE, 0, EPOLLIN);
    if (pthread_create(&s->th, NULL, shm_main, s) != 0) {
        return hd_err(HDMLP_E_NOMEM, "rpc: cannot start the ring thread");
    }
    s->started = 1;
    return HDMLP_OK;
}

void rpc_shm_closing(rpc_shm *s)
{
    if (s != NULL) {
        pthread_mutex_lock(&s->lock);
        s->closing = 1;
        pthread_mutex_unlock(&s->lock);
        ring_bell(s->wake_efd);
    }
}

static int drained(const rpc_shm *s)
{
    for (uint32_t r = 0; r < s->t->world; r++) {
        const shm_out *o = &s->out[r];
        if (o->used && o->state != OUT_FAILED && o->hup_ns == 0 &&
            (o->queued > 0 || (o->state == OUT_READY && !rpc_shm_ring_empty(&o->ring)))) {
            return 0;
        }
    }
    return 1;
}

void rpc_shm_drain(rpc_shm *s, uint64_t until_ns)
{
    if (s == NULL || !s->started) {
        return;
    }
    struct timespec until = {(time_t)(until_ns / 1000000000u), (long)(until_ns % 1000000000u)};
    pthread_mutex_lock(&s->lock);
    while (!drained(s)) {
        if (pthread_cond_timedwait(&s->cv, &s->lock, &until) != 0) {
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

void rpc_shm_stop(rpc_shm *s)
{
    if (s == NULL) {
        return;
    }
    if (s->started) {
        pthread_mutex_lock(&s->lock);
        s->stop = 1;
        pthread_mutex_unlock(&s->lock);
        ring_bell(s->wake_efd);
        pthread_join(s->th, NULL);
    }
    for (uint32_t i = 0; s->in != NULL && i < s->n_in; i++) {
        in_close(s, &s->in[i]);
    }
    for (uint32_t r = 0; s->out != NULL && r < s->t->world; r++) {
        s->closing = 1;
        out_fail(s, r, "closed");
    }
    close_fd(s, &s->listen_fd);
    close_fd(s, &s->wake_efd);
    if (s->ep >= 0) {
        close(s->ep);
    }
    hd_free(s->out);
    hd_free(s->in);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->lock);
    hd_free(s);
}
