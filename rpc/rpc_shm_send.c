/* The rings' side of the transport towards each peer: send() into its ring or its queue,
 * the queue moved into the ring as it frees up, dialling, probes and liveness
 * (rpc_shm_internal.h, rpc_transport.h "Rings"). */
#include "rpc_shm_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* ---- the sending side ------------------------------------------------------------------ */

/* Frees queued messages: a copy, or an arena block not lent (it goes back to the arena). */
static void items_free(rpc_shm *s, shm_item *it)
{
    while (it != NULL) {
        shm_item *next = it->next;
        if (it->m.lend) {
            shm_mem_free_own(s->mem, it->data);
        } else {
            hd_free(it->data);
        }
        hd_free(it);
        it = next;
    }
}

void shm_out_fail(rpc_shm *s, uint32_t rank, const char *fmt, ...)
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
    items_free(s, o->cur);
    items_free(s, o->urg_h);
    items_free(s, o->pre_h);
    o->cur = o->urg_h = o->urg_t = o->pre_h = o->pre_t = NULL;
    o->queued = 0;
    shm_close_fd(s, &o->sock);
    shm_close_fd(s, &o->space_efd);
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
    h->credit = m->credit;
    h->index = m->index;
    h->label = m->label;
    h->prefetch = m->prefetch;
    h->size = m->kind == PEER_SAMPLE ? m->size : 0;
}

/* Whether m hands over a block of this rank's arena (lent, or copied and freed). */
static int owned(const rpc_shm *s, const peer_msg *m)
{
    return m != NULL && m->kind == PEER_SAMPLE && m->lend && s->mem != NULL;
}

/* Whether m goes as a lent block: its own block, to a peer that mapped the arena. */
static int lends(const rpc_shm *s, const shm_out *o, const peer_msg *m)
{
    return owned(s, m) && o->lend_ok;
}

/* With s->lock, lane ready: writes one record if it fits. 1 written, 0 no room (the lane
 * then waits for the space doorbell), -1 the lane failed. *lent: the block was lent (the
 * peer gives it back; the caller forgets it). */
static int out_put(rpc_shm *s, uint32_t rank, const peer_msg *m, uint64_t off, int *lent)
{
    shm_out *o = &s->out[rank];
    *lent = 0;
    const int lend = lends(s, o, m) && off == 0;
    const uint64_t total = m != NULL && m->kind == PEER_SAMPLE && !lend ? m->size : 0;
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
        shm_out_fail(s, rank, "its ring's read position is impossible (ring corrupted)");
        return -1;
    }
    if (space < need + reserve) {
        return 0;
    }
    rpc_shm_rec h;
    rec_of(s, m, rank, &h);
    h.offset = off;
    h.flags = off + frag < total ? RPC_SHM_MORE : 0;
    if (lend && shm_mem_lend(s->mem, m->data, rank, &h.offset) == HDMLP_OK) {
        h.flags = RPC_SHM_LENT;
        *lent = 1;
    } else if (lend) {
        shm_out_fail(s, rank, "a SAMPLE to lend is not a block of this rank's arena");
        return -1;
    }
    const uint64_t now = rpc_now_ns();
    if (rpc_shm_ring_empty(&o->ring)) {
        o->progress_ns = now; /* the peer's time to consume starts now */
    }
    if (rpc_shm_ring_put(&o->ring, &h, m != NULL ? m->data + off : NULL, frag)) {
        shm_ring_bell(o->data_efd);
    }
    o->last_write_ns = now;
    o->msg_end = m != NULL ? o->ring.local : o->msg_end;
    if (m != NULL) {
        const int whole = h.flags == 0 || h.flags == RPC_SHM_LENT;
        pthread_mutex_lock(&s->t->lock);
        s->t->st.bytes_sent += need;
        s->t->st.msgs_sent += whole;
        s->t->st.shm_msgs_sent += whole;
        s->t->st.shm_lent += *lent;
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
        int lent;
        const int rc = out_put(s, rank, &it->m, it->sent, &lent);
        if (rc <= 0) {
            return;
        }
        const uint64_t frag = total - it->sent < s->frag_max ? total - it->sent : s->frag_max;
        it->sent = lent ? total : it->sent + frag;
        if (lent) {
            it->m.lend = 0; /* the peer's now */
            it->data = NULL;
        }
        if (it->sent == total) {
            o->queued -= total + sizeof(rpc_shm_rec);
            o->cur = NULL;
            it->next = NULL;
            items_free(s, it);
        }
    }
}

int rpc_shm_send(rpc_shm *s, const peer_msg *m)
{
    const int urgent = !(m->kind == PEER_SAMPLE && m->prefetch);
    const uint64_t size = m->kind == PEER_SAMPLE ? m->size : 0;
    const int own = owned(s, m);
    int rc = HDMLP_OK, wake = 0, handed = 0; /* handed: the block is lent or queued as is */
    pthread_mutex_lock(&s->lock);
    shm_out *o = &s->out[m->to];
    if (s->closing) {
        rc = hd_err(HDMLP_E_STATE, "rpc: send to rank %u after destroy began", m->to);
    } else if (o->state == OUT_FAILED || o->hup_ns != 0) {
        if (o->state != OUT_FAILED) {
            shm_out_fail(s, m->to, "its ring socket hung up (peer exited?)");
            wake = 1;
        }
        rc = hd_err(HDMLP_E_PEER, "rpc: %s", o->why);
    } else if (o->state == OUT_READY && o->cur == NULL && o->urg_h == NULL &&
               (urgent || o->pre_h == NULL) && (size <= s->frag_max || lends(s, o, m)) &&
               out_put(s, m->to, m, 0, &handed) != 0) {
        /* written straight into the ring (or the lane failed: reported below) */
        rc = o->state == OUT_FAILED ? hd_err(HDMLP_E_PEER, "rpc: %s", o->why) : HDMLP_OK;
        wake = o->state == OUT_FAILED;
    } else if (o->queued > 0 && o->queued + size + sizeof(rpc_shm_rec) > s->t->o.queue_bytes) {
        shm_out_fail(s, m->to, "send queue full (%llu bytes unsent, cap %llu)",
                     (unsigned long long)o->queued, (unsigned long long)s->t->o.queue_bytes);
        rc = hd_err(HDMLP_E_PEER, "rpc: %s", o->why);
        wake = 1;
    } else {
        /* Queued: an arena block waits as it is (lent or copied when written), else a copy. */
        shm_item *it = hd_calloc(1, sizeof *it);
        uint8_t *data = size > 0 && !own ? hd_malloc((size_t)size) : NULL;
        if (it == NULL || (size > 0 && !own && data == NULL)) {
            hd_free(it);
            hd_free(data);
            rc = hd_err(HDMLP_E_NOMEM, "rpc: out of memory queueing a message");
        } else {
            if (own) {
                data = (uint8_t *)(uintptr_t)m->data;
                handed = 1;
            } else if (size > 0) {
                memcpy(data, m->data, (size_t)size);
            }
            it->m = *m;
            it->m.data = data;
            it->m.lend = (uint32_t)own;
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
    if (own && !handed) { /* copied into the ring, or not sent: back to the arena */
        shm_mem_free_own(s->mem, (void *)(uintptr_t)m->data);
    }
    pthread_mutex_unlock(&s->lock);
    if (wake) {
        shm_ring_bell(s->wake_efd);
    }
    return rc;
}

/* With s->lock, lane ready: writes the releases of this peer's blocks that wait, while
 * the ring has room (else on a later round). */
static void out_releases(rpc_shm *s, uint32_t rank, uint64_t now)
{
    shm_out *o = &s->out[rank];
    rpc_shm_rel e[RPC_SHM_REL_MAX];
    while (s->mem != NULL && o->state == OUT_READY && o->cur == NULL) {
        const uint64_t space = rpc_shm_ring_space(&o->ring);
        if (space == UINT64_MAX || space < rpc_shm_rec_bytes(sizeof e)) {
            return; /* an impossible tail is reported by the next message */
        }
        const uint32_t n = shm_mem_take_releases(s->mem, rank, e, RPC_SHM_REL_MAX);
        if (n == 0) {
            return;
        }
        rpc_shm_rec h;
        rec_of(s, NULL, rank, &h);
        h.kind = RPC_SHM_RELEASE;
        h.size = n * sizeof e[0];
        if (rpc_shm_ring_empty(&o->ring)) {
            o->progress_ns = now;
        }
        if (rpc_shm_ring_put(&o->ring, &h, (const uint8_t *)e, h.size)) {
            shm_ring_bell(o->data_efd);
        }
        o->last_write_ns = now;
        o->msg_end = o->ring.local;
    }
}

/* With s->lock: dials, takes the ring, flushes, probes, checks liveness; returns the ms
 * until this lane next needs the thread (UINT64_MAX: only an event). */
uint64_t shm_out_tick(rpc_shm *s, uint32_t rank, uint64_t now)
{
    shm_out *o = &s->out[rank];
    const rpc_tr *t = s->t;
    const uint64_t timeout_ns = (uint64_t)t->cfg.peer_timeout_ms * 1000000ull;
    if (o->state == OUT_DIAL && now >= o->retry_ns) {
        int fd;
        const int d = rpc_shm_dial(o->name, &fd);
        if (d < 0) {
            shm_out_fail(s, rank, "%s", hdmlp_last_error());
            return UINT64_MAX;
        }
        const int afd = s->mem != NULL ? shm_mem_fd(s->mem) : -1;
        rpc_shm_hello hello = {RPC_SHM_HELLO_MAGIC, t->cfg.token, t->self, rank,
                               s->mem != NULL ? shm_mem_bytes(s->mem) : 0};
        if (d > 0 &&
            rpc_shm_send_packet(fd, &hello, sizeof hello, &afd, afd >= 0) == HDMLP_OK) {
            o->sock = fd;
            o->state = OUT_HELLO;
            shm_ep_add(s, fd, EV_OUT_SOCK, rank, EPOLLIN | EPOLLRDHUP);
        } else if (d > 0) {
            close(fd);
        }
        o->retry_ns = now + SHM_RETRY_NS;
    }
    if ((o->state == OUT_DIAL || o->state == OUT_HELLO) &&
        shm_since(now, o->start_ns) > timeout_ns) {
        shm_out_fail(
            s, rank, "no answer within %u ms (%s its ring socket @%s)", t->cfg.peer_timeout_ms,
            o->state == OUT_DIAL ? "cannot connect to" : "connected, no ring from", o->name);
        return UINT64_MAX;
    }
    if (o->state == OUT_DIAL) {
        return shm_since(o->retry_ns, now) / 1000000u + 1;
    }
    if (o->state == OUT_HELLO) {
        return shm_since(o->start_ns + timeout_ns, now) / 1000000u + 1;
    }
    if (o->state != OUT_READY) {
        return UINT64_MAX;
    }
    if (o->hup_ns != 0) {
        const uint64_t tail = rpc_shm_ring_tail(&o->ring);
        if (o->queued > 0 || o->msg_end - tail - 1 < o->ring.size ||
            shm_since(now, o->last_write_ns) >= t->probe_ns) {
            shm_out_fail(s, rank, "its ring socket hung up (peer exited?)%s",
                         o->queued > 0 || o->msg_end - tail - 1 < o->ring.size
                             ? " with messages not read"
                             : "");
            return UINT64_MAX;
        }
        return shm_since(o->last_write_ns + t->probe_ns, now) / 1000000u + 1;
    }
    out_flush(s, rank);
    out_releases(s, rank, now);
    if (o->state == OUT_READY && o->cur == NULL && o->urg_h == NULL && o->pre_h == NULL &&
        rpc_shm_ring_empty(&o->ring) && !s->closing &&
        shm_since(now, o->last_write_ns) >= t->probe_ns) {
        int lent;
        out_put(s, rank, NULL, 0, &lent);
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
        } else if (shm_since(now, o->progress_ns) > timeout_ns) {
            shm_out_fail(s, rank,
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
void shm_out_answer(rpc_shm *s, uint32_t rank)
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
        shm_close_fd(s, &o->sock);
        return;
    }
    if (n == -2 || n == 0) {
        shm_out_fail(s, rank, "%s",
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
            o->lend_ok = (rep.flags & RPC_SHM_LEND_OK) != 0 && s->mem != NULL;
            o->seen_tail = 0;
            o->progress_ns = o->last_write_ns = rpc_now_ns();
            shm_ep_add(s, o->space_efd, EV_OUT_SPACE, rank, EPOLLIN);
            return;
        }
        close(fds[1]);
        close(fds[2]);
        shm_out_fail(s, rank, "unusable ring: %s", hdmlp_last_error());
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
    shm_out_fail(s, rank, "rejected by the peer: %s", buf);
}
