/* The rings' side of the transport from each peer: accepting a sender, checking its hello,
 * making its ring, and reading, validating and delivering its records
 * (rpc_shm_internal.h, rpc_transport.h "Rings"). */
#include "rpc_shm_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* ---- the receiving side ---------------------------------------------------------------- */

void shm_in_close(rpc_shm *s, shm_in *c)
{
    shm_close_fd(s, &c->sock);
    shm_close_fd(s, &c->data_efd);
    if (c->space_efd >= 0) {
        close(c->space_efd);
        c->space_efd = -1;
    }
    rpc_shm_ring_unmap(&c->ring);
    hd_free(c->asm_buf);
    c->asm_buf = NULL;
    c->ready = 0;
    c->lend_ok = 0;
    c->more = 0;
}

/* Rejects a sender: counts it, says why on its socket, closes the ring (counted first, so
 * a sender that has read the reason finds the rejection in the stats). */
void shm_in_reject(rpc_shm *s, shm_in *c, const char *why)
{
    pthread_mutex_lock(&s->t->lock);
    s->t->st.rejected++;
    pthread_mutex_unlock(&s->t->lock);
    rpc_shm_send_packet(c->sock, why, strlen(why), NULL, 0);
    shm_in_close(s, c);
}

void shm_in_accept(rpc_shm *s)
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
        shm_ep_add(s, fd, EV_IN_SOCK, i, EPOLLIN | EPOLLRDHUP);
    }
}

/* The rest of the hello, h NULL if it had the wrong size; arena_fd closed by the caller. */
static void shm_in_hello_checked(rpc_shm *s, shm_in *c, uint32_t slot, const rpc_shm_hello *hp,
                                 int arena_fd)
{
    const rpc_tr *t = s->t;
    if (hp == NULL || hp->magic != RPC_SHM_HELLO_MAGIC) {
        shm_in_reject(s, c, "not a ring hello");
        return;
    }
    const rpc_shm_hello h = *hp;
    char why[160];
    if (h.token != t->cfg.token) {
        shm_in_reject(s, c, "another job's token");
        return;
    }
    if (h.to != t->self || h.from >= t->world || h.from == t->self) {
        snprintf(why, sizeof why, "hello from rank %u to rank %u (this is rank %u of %u)",
                 h.from, h.to, t->self, t->world);
        shm_in_reject(s, c, why);
        return;
    }
    for (uint32_t i = 0; i < s->n_in; i++) {
        if (s->in[i].sock >= 0 && s->in[i].ready && s->in[i].rank == h.from) {
            snprintf(why, sizeof why, "rank %u already has a ring to rank %u", h.from, t->self);
            shm_in_reject(s, c, why);
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
    /* The sender's arena: mapped once, for its samples to be lent rather than copied. */
    const int lend_ok = rc == HDMLP_OK && s->mem != NULL && h.arena_bytes > 0 &&
                        arena_fd >= 0 &&
                        shm_mem_map_peer(s->mem, h.from, arena_fd, h.arena_bytes) == HDMLP_OK;
    const rpc_shm_reply rep = {RPC_SHM_HELLO_MAGIC, s->ring_bytes,
                               lend_ok ? RPC_SHM_LEND_OK : 0};
    const int give[3] = {mfd, c->data_efd, c->space_efd};
    if (rc != HDMLP_OK || c->data_efd < 0 || c->space_efd < 0 ||
        rpc_shm_send_packet(c->sock, &rep, sizeof rep, give, 3) != HDMLP_OK) {
        if (mfd >= 0) {
            close(mfd);
        }
        shm_in_reject(s, c, "the receiver could not make a ring");
        return;
    }
    close(mfd);
    c->rank = h.from;
    c->ready = 1;
    c->lend_ok = lend_ok;
    shm_ep_add(s, c->data_efd, EV_IN_DATA, slot, EPOLLIN);
}

/* A sender's hello: checks it, makes its ring and answers with the descriptors. */
void shm_in_hello(rpc_shm *s, shm_in *c, uint32_t slot)
{
    rpc_shm_hello h;
    int fds[3];
    const long n = rpc_shm_recv_packet(c->sock, &h, sizeof h, fds);
    const int arena_fd = fds[0]; /* the sender's arena, if any */
    for (int i = 1; i < 3; i++) {
        if (fds[i] >= 0) {
            close(fds[i]); /* a sender has nothing else to pass us */
        }
    }
    if (n != -1) {
        shm_in_hello_checked(s, c, slot, n == (long)sizeof h ? &h : NULL, arena_fd);
    }
    if (arena_fd >= 0) {
        close(arena_fd);
    }
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
    if (h->kind == RPC_SHM_RELEASE) {
        return frag == h->size && frag > 0 && frag <= RPC_SHM_REL_MAX * sizeof(rpc_shm_rel) &&
                       frag % sizeof(rpc_shm_rel) == 0 && h->offset == 0 && h->flags == 0 &&
                       c->asm_buf == NULL
                   ? NULL
                   : "a RELEASE record of a wrong length or with flags";
    }
    if (h->kind > PEER_DONE || (h->flags & ~(RPC_SHM_MORE | RPC_SHM_LENT)) != 0) {
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
    if (h->flags & RPC_SHM_LENT) {
        /* Where the block lies is checked against the sender's arena when it is taken. */
        if (!c->lend_ok) {
            return "a lent SAMPLE on a ring whose sender's arena is not mapped";
        }
        return h->flags == RPC_SHM_LENT && frag == 0 && c->asm_buf == NULL
                   ? NULL
                   : "a lent SAMPLE with payload, fragments or in the middle of another";
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

static void deliver(rpc_shm *s, const rpc_shm_rec *h, const uint8_t *data, uint64_t bytes,
                    peer_mem *lent)
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
    m.credit = h->credit;
    if (h->kind == PEER_SAMPLE) {
        m.prefetch = h->prefetch;
        m.index = h->index;
        m.label = h->label;
        m.size = h->size;
        m.data = data;
        m.lent = lent;
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

/* A lent SAMPLE (delivered in place in the sender's arena) or a RELEASE of our blocks
 * (freed); 0 if it was rejected. */
static int lent_record(rpc_shm *s, shm_in *c, const rpc_shm_rec *h, const uint8_t *payload)
{
    char msg[256];
    if (h->kind == PEER_SAMPLE) { /* the ring is lend_ok (rec_problem), so s->mem is set */
        const uint8_t *p = shm_mem_peer_block(s->mem, c->rank, h->offset, h->size);
        if (p == NULL) {
            snprintf(msg, sizeof msg,
                     "rank %u: SAMPLE %llu lent at offset %llu (%llu bytes), outside the "
                     "sender's arena",
                     s->t->self, (unsigned long long)h->index, (unsigned long long)h->offset,
                     (unsigned long long)h->size);
            shm_in_reject(s, c, msg);
            return 0;
        }
        deliver(s, h, p, h->len, shm_mem_iface(s->mem));
        return 1;
    }
    const uint64_t n = h->size / sizeof(rpc_shm_rel);
    for (uint64_t i = 0; i < n; i++) {
        rpc_shm_rel e;
        memcpy(&e, payload + i * sizeof e, sizeof e); /* out of the ring before it is used */
        if (s->mem == NULL || shm_mem_released(s->mem, c->rank, e.off, e.len) != HDMLP_OK) {
            snprintf(msg, sizeof msg, "rank %u: %s", s->t->self,
                     s->mem == NULL ? "a RELEASE without an arena" : hdmlp_last_error());
            shm_in_reject(s, c, msg);
            return 0;
        }
    }
    pthread_mutex_lock(&s->t->lock);
    s->t->st.shm_released += n;
    pthread_mutex_unlock(&s->t->lock);
    return 1;
}

/* Reads what the ring holds, up to one ring's worth (then c->more). */
void shm_in_read(rpc_shm *s, shm_in *c)
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
            shm_in_reject(s, c, msg);
            return;
        }
        const uint64_t frag = h.len - sizeof h;
        if (h.kind == RPC_SHM_RELEASE || (h.flags & RPC_SHM_LENT)) {
            if (!lent_record(s, c, &h, p)) {
                return; /* rejected */
            }
        } else if (h.kind == PEER_SAMPLE && (h.offset > 0 || frag < h.size)) {
            if (c->asm_buf == NULL) {
                c->asm_buf = hd_malloc((size_t)h.size);
                c->asm_hdr = h;
                c->asm_got = 0;
                if (c->asm_buf == NULL) {
                    shm_in_reject(s, c, "the receiver is out of memory for a SAMPLE");
                    return;
                }
            }
            memcpy(c->asm_buf + c->asm_got, p, (size_t)frag);
            c->asm_got += frag;
            if (c->asm_got == h.size) {
                deliver(s, &c->asm_hdr, c->asm_buf, h.size + sizeof h, NULL);
                hd_free(c->asm_buf);
                c->asm_buf = NULL;
            }
        } else if (h.kind != 0) {
            deliver(s, &h, p, h.len, NULL); /* the payload is read in place */
        }
        const uint64_t used = rpc_shm_rec_bytes(frag);
        if (rpc_shm_ring_pop(&c->ring, h.len)) {
            shm_ring_bell(c->space_efd);
        }
        if (used >= budget) {
            c->more = 1;
            return;
        }
        budget -= used;
    }
}
