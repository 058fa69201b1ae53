/* The gRPC peer transport: creation, send(), destroy() (rpc_transport.h). */
#include "rpc_arena.h"
#include "rpc_internal.h"
#include "rpc_shm.h"

#include <string.h>
#include <time.h>

void rpc_opts_default(const struct hdmlp_config *cfg, rpc_opts *o)
{
    o->max_data = RPC_DEFAULT_MAX_DATA;
    o->queue_bytes = (uint64_t)64 << 20;
    o->batch_bytes = (uint64_t)1 << 20;
    o->drain_ms = cfg->peer_timeout_ms < 2000 ? cfg->peer_timeout_ms : 2000;
    o->shm_ring_bytes = RPC_SHM_RING_DEFAULT;
    /* The arena's size is the loader's to give (its budget's owner sizes it). */
    o->shm_arena_bytes = cfg->peer_arena < RPC_ARENA_MAX ? cfg->peer_arena : RPC_ARENA_MAX;
}

/* send() through the gRPC lane of m->to (a copy of the payload is encoded). */
static int grpc_send(rpc_tr *t, const peer_msg *m)
{
    rpc_item *it = hd_malloc(sizeof *it);
    if (it == NULL) {
        return hd_err(HDMLP_E_NOMEM, "rpc: out of memory queueing a message");
    }
    it->next = NULL;
    int rc = rpc_encode_msg(m, &it->buf, &it->len);
    if (rc != HDMLP_OK) {
        hd_free(it);
        return rc;
    }
    rpc_start start = {NULL, NULL, NULL};
    pthread_mutex_lock(&t->lock);
    rpc_lane *l = &t->lanes[m->to];
    if (t->closing) {
        rc = hd_err(HDMLP_E_STATE, "rpc: send to rank %u after destroy began", m->to);
    } else if (l->failed) {
        rc = hd_err(HDMLP_E_PEER, "rpc: %s", l->why);
    } else if (l->queued > 0 && l->queued + it->len > t->o.queue_bytes) {
        rpc_lane_fail(t, l, "send queue full (%llu bytes unsent, cap %llu)",
                      (unsigned long long)l->queued, (unsigned long long)t->o.queue_bytes);
        rc = hd_err(HDMLP_E_PEER, "rpc: %s", l->why);
    } else {
        rpc_fifo *q = m->kind == PEER_SAMPLE && m->prefetch ? &l->prefetch : &l->urgent;
        if (q->tail != NULL) {
            q->tail->next = it;
        } else {
            q->head = it;
        }
        q->tail = it;
        l->queued += it->len;
        it = NULL;
        if (l->call == NULL) {
            start = rpc_lane_take(t, l, 0);
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (it != NULL) {
        hd_free(it->buf);
        hd_free(it);
    }
    rpc_call_start(t, start);
    return rc;
}

static int tr_send(peer_transport *base, const peer_msg *m)
{
    rpc_tr *t = (rpc_tr *)base;
    const int rc = rpc_msg_check_send(m, t->world, t->self, t->o.max_data);
    if (rc == HDMLP_OK && t->lanes[m->to].shm) { /* fixed at creation */
        return rpc_shm_send(t->shm, m);          /* it lends m->data, or frees it */
    }
    const int sent = rc == HDMLP_OK ? grpc_send(t, m) : rc;
    if (m->lend && base->mem != NULL) {
        base->mem->give_back(base->mem, (void *)(uintptr_t)m->data, m->size, PEER_MEM_OWN);
    }
    return sent;
}

/* Frees everything; the threads must be stopped (or never started). */
static void tr_free(rpc_tr *t)
{
    for (uint32_t r = 0; t->lanes != NULL && r < t->world; r++) {
        rpc_fifo_free(&t->lanes[r].urgent);
        rpc_fifo_free(&t->lanes[r].prefetch);
    }
    hd_free(t->lanes);
    rpc_tls_free(&t->tls);
    config_clear(&t->cfg);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->deliver);
    pthread_mutex_destroy(&t->lock);
    hd_free(t);
}

static int lanes_drained(const rpc_tr *t)
{
    for (uint32_t r = 0; r < t->world; r++) {
        const rpc_lane *l = &t->lanes[r];
        if (r != t->self && !l->failed &&
            (l->queued > 0 || (l->call != NULL && !l->call->probe))) {
            return 0;
        }
    }
    return 1;
}

static void tr_destroy(peer_transport *base)
{
    rpc_tr *t = (rpc_tr *)base;
    if (t == NULL) {
        return;
    }
    /* 1. Let what is queued go out, for a bounded time; the server keeps serving. */
    rpc_shm_closing(t->shm);
    pthread_mutex_lock(&t->lock);
    t->closing = 1;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += t->o.drain_ms / 1000;
    until.tv_nsec += (long)(t->o.drain_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!lanes_drained(t)) {
        if (pthread_cond_timedwait(&t->cv, &t->lock, &until) != 0) {
            break;
        }
    }
    pthread_mutex_unlock(&t->lock);
    rpc_shm_drain(t->shm, (uint64_t)until.tv_sec * 1000000000u + (uint64_t)until.tv_nsec);
    /* 2. Stop the rings; cancel what is left, stop the client; 3. stop the server. */
    rpc_shm_stop(t->shm);
    t->shm = NULL;
    rpc_client_stop(t);
    rpc_server_stop(t);
    tr_free(t);
    grpc_shutdown();
}

int rpc_transport_port(const peer_transport *t) { return ((const rpc_tr *)t)->port; }

void rpc_transport_stats(peer_transport *base, rpc_stats *out)
{
    rpc_tr *t = (rpc_tr *)base;
    pthread_mutex_lock(&t->lock);
    *out = t->st;
    pthread_mutex_unlock(&t->lock);
    out->arena_used = rpc_shm_arena_used(t->shm);
}

int rpc_transport_create_opts(const struct hdmlp_config *cfg, const peer_handler *h,
                              const rpc_opts *opts, peer_transport **out)
{
    *out = NULL;
    if (cfg == NULL || h == NULL || h->on_msg == NULL) {
        return hd_err(HDMLP_E_INVAL, "rpc: transport needs a config and an on_msg handler");
    }
    if (cfg->world < 2 || cfg->rank >= cfg->world) {
        return hd_err(HDMLP_E_INVAL,
                      "rpc: transport needs world >= 2 and rank < world (%u of %u)", cfg->rank,
                      cfg->world);
    }
    if (cfg->peers == NULL || cfg->n_peers != cfg->world) {
        return hd_err(HDMLP_E_INVAL, "rpc: %u peer endpoints for a world of %u",
                      cfg->peers != NULL ? cfg->n_peers : 0, cfg->world);
    }
    if (cfg->peer_timeout_ms == 0) {
        return hd_err(HDMLP_E_INVAL, "rpc: peer timeout must be positive");
    }
    rpc_opts o;
    rpc_opts_default(cfg, &o);
    if (opts != NULL) {
        o = *opts;
    }
    if (o.shm_ring_bytes == 0) {
        o.shm_ring_bytes = RPC_SHM_RING_DEFAULT;
    }
    if (o.max_data == 0 || o.max_data > ((uint64_t)1 << 30) || o.queue_bytes == 0 ||
        o.batch_bytes == 0 || o.shm_ring_bytes < ((uint64_t)64 << 10) ||
        o.shm_ring_bytes > ((uint64_t)1 << 30) ||
        (o.shm_ring_bytes & (o.shm_ring_bytes - 1)) != 0) {
        return hd_err(HDMLP_E_INVAL, "rpc: transport limits out of range");
    }
    if (o.batch_bytes > o.max_data) {
        o.batch_bytes = o.max_data;
    }
    rpc_tr *t = hd_calloc(1, sizeof *t);
    if (t == NULL) {
        return hd_err(HDMLP_E_NOMEM, "rpc: out of memory");
    }
    if (config_copy(&t->cfg, cfg) != HDMLP_OK) {
        hd_free(t);
        return HDMLP_E_NOMEM;
    }
    const int trc = rpc_tls_load(cfg, &t->tls);
    if (trc != HDMLP_OK) {
        config_clear(&t->cfg);
        hd_free(t);
        return trc;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_init(&t->deliver, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* destroy() waits with a deadline */
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    t->base.send = tr_send;
    t->base.destroy = tr_destroy;
    t->h = *h;
    t->o = o;
    t->self = cfg->rank;
    t->world = cfg->world;
    t->chk.token = cfg->token;
    t->chk.world = cfg->world;
    t->chk.self = cfg->rank;
    t->chk.max_data = o.max_data;
    t->probe_ns = (uint64_t)cfg->peer_timeout_ms * 1000000u / 4;
    t->listen = t->cfg.listen != NULL ? t->cfg.listen : t->cfg.peers[t->self];
    t->lanes = hd_calloc(t->world, sizeof *t->lanes);
    if (t->lanes == NULL) {
        tr_free(t);
        return hd_err(HDMLP_E_NOMEM, "rpc: out of memory for %u lanes", cfg->world);
    }
    grpc_init();
    int rc = rpc_server_start(t);
    if (rc == HDMLP_OK) {
        rc = rpc_client_start(t);
    }
    if (rc == HDMLP_OK && t->tls.ca == NULL) {
        rc = rpc_shm_start(t, &t->shm);
        t->base.mem = rpc_shm_mem(t->shm);
    }
    if (rc != HDMLP_OK) {
        t->closing = 1;
        rpc_shm_stop(t->shm);
        t->shm = NULL;
        rpc_client_stop(t);
        rpc_server_stop(t);
        tr_free(t);
        grpc_shutdown();
        return rc;
    }
    *out = &t->base;
    return HDMLP_OK;
}

int rpc_transport_create(const struct hdmlp_config *cfg, const peer_handler *h,
                         peer_transport **out)
{
    return rpc_transport_create_opts(cfg, h, NULL, out);
}
