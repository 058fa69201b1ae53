/* The shared-memory path of the transport: the ring thread and the life cycle (rpc_shm.h,
 * rpc_transport.h "Rings"); towards peers rpc_shm_send.c, from peers rpc_shm_recv.c. */
#include "rpc_shm_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

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

/* Whether rpc_shm_stop asked the thread to end (it sets the flag, then rings the wake
 * eventfd). */
static int shm_stopping(rpc_shm *s)
{
    pthread_mutex_lock(&s->lock);
    const int stop = s->stop;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

static void *shm_main(void *arg)
{
    rpc_shm *s = arg;
    const uint64_t timeout_ns = (uint64_t)s->t->cfg.peer_timeout_ms * 1000000ull;
    int wait_ms = 0;
    for (;;) {
        /* Checked before each wait as well as after it: handling EV_WAKE drains the wake
         * eventfd, and a stop rung while this thread handled an earlier batch would
         * otherwise be drained with it and wait out the peer timeout unseen. */
        if (shm_stopping(s)) {
            return NULL;
        }
        struct epoll_event ev[32];
        const int n = epoll_wait(s->ep, ev, 32, wait_ms);
        if (shm_stopping(s)) {
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            const int kind = (int)(ev[i].data.u64 >> 32);
            const uint32_t idx = (uint32_t)ev[i].data.u64;
            if (kind == EV_LISTEN) {
                shm_in_accept(s);
            } else if (kind == EV_WAKE) {
                shm_drain_efd(s->wake_efd);
            } else if (kind == EV_OUT_SOCK || kind == EV_OUT_SPACE) {
                pthread_mutex_lock(&s->lock);
                if (kind == EV_OUT_SPACE && s->out[idx].space_efd >= 0) {
                    shm_drain_efd(s->out[idx].space_efd);
                } else if (kind == EV_OUT_SOCK && s->out[idx].sock >= 0) {
                    shm_out_answer(s, idx);
                }
                pthread_mutex_unlock(&s->lock);
            } else if (kind == EV_IN_DATA && s->in[idx].ready) {
                shm_drain_efd(s->in[idx].data_efd);
                shm_in_read(s, &s->in[idx]);
            } else if (kind == EV_IN_SOCK && s->in[idx].sock >= 0) {
                shm_in *c = &s->in[idx];
                if (!c->ready) {
                    shm_in_hello(s, c, idx);
                } else {
                    /* The sender hung up (or wrote on a socket it must not): what it
                     * completed is delivered, a message cut short is dropped. */
                    shm_in_read(s, c);
                    if (c->sock >= 0) {
                        shm_in_close(s, c);
                    }
                }
            }
        }
        const uint64_t now = rpc_now_ns();
        uint64_t next = UINT64_MAX;
        for (uint32_t i = 0; i < s->n_in; i++) {
            shm_in *c = &s->in[i];
            if (c->ready && c->more) {
                shm_in_read(s, c);
            }
            next = c->ready && c->more ? 0 : next;
            if (c->sock >= 0 && !c->ready && shm_since(now, c->since_ns) > timeout_ns) {
                shm_in_reject(s, c, "no hello within the peer timeout");
            }
            if (c->sock >= 0 && !c->ready) {
                const uint64_t left = shm_since(c->since_ns + timeout_ns, now) / 1000000u + 1;
                next = left < next ? left : next;
            }
        }
        pthread_mutex_lock(&s->lock);
        for (uint32_t r = 0; r < s->t->world; r++) {
            if (s->out[r].used) {
                const uint64_t w = shm_out_tick(s, r, now);
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
    uint32_t ring_peers = 0;
    for (uint32_t r = 0; r < t->world; r++) {
        ring_peers += s->out[r].used;
    }
    if (ring_peers > 0 && t->o.shm_arena_bytes > 0) {
        rc = shm_mem_create(t->o.shm_arena_bytes, t->world, s->wake_efd, &s->mem);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    shm_ep_add(s, s->listen_fd, EV_LISTEN, 0, EPOLLIN);
    shm_ep_add(s, s->wake_efd, EV_WAKE, 0, EPOLLIN);
    if (pthread_create(&s->th, NULL, shm_main, s) != 0) {
        return hd_err(HDMLP_E_NOMEM, "rpc: cannot start the ring thread");
    }
    s->started = 1;
    return HDMLP_OK;
}

peer_mem *rpc_shm_mem(rpc_shm *s) { return s != NULL ? shm_mem_iface(s->mem) : NULL; }

uint64_t rpc_shm_arena_used(rpc_shm *s) { return s != NULL ? shm_mem_used(s->mem) : 0; }

void rpc_shm_closing(rpc_shm *s)
{
    if (s != NULL) {
        pthread_mutex_lock(&s->lock);
        s->closing = 1;
        pthread_mutex_unlock(&s->lock);
        shm_ring_bell(s->wake_efd);
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
        shm_ring_bell(s->wake_efd);
        pthread_join(s->th, NULL);
    }
    for (uint32_t i = 0; s->in != NULL && i < s->n_in; i++) {
        shm_in_close(s, &s->in[i]);
    }
    for (uint32_t r = 0; s->out != NULL && r < s->t->world; r++) {
        s->closing = 1;
        shm_out_fail(s, r, "closed");
    }
    shm_mem_detach(s->mem); /* freed once the loader has given every block back */
    shm_close_fd(s, &s->listen_fd);
    shm_close_fd(s, &s->wake_efd);
    if (s->ep >= 0) {
        close(s->ep);
    }
    hd_free(s->out);
    hd_free(s->in);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->lock);
    hd_free(s);
}
