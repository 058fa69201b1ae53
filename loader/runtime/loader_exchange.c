/*
 * Exchange with peers (DESIGN.md §5). Every rank decides the positions of the groups it
 * owns, in global order, whoever requested them; decisions for other ranks wait in a
 * per-peer outbox. A peer blocked on a position sends a request; the owner answers it first,
 * then pushes that peer's next positions within the prefetch window whose samples are in
 * memory (never reading storage for them), as far as the peer's free remote memory allows.
 * Received samples wait in a map keyed by this rank's sequence number until consumed.
 */
#include "loader_exchange.h"
#include "loader_core.h"
#include "loader_plan.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* This rank's sequence number of global position (epoch, position) it requested. */
static uint64_t seq_of(const struct hdmlp_loader *ld, uint64_t epoch, uint64_t position)
{
    return epoch * ld->epoch_len + position / ld->world;
}

static int later(uint64_t e1, uint64_t p1, uint64_t e2, uint64_t p2)
{
    return e1 > e2 || (e1 == e2 && p1 > p2);
}

static ld_out *outbox_at(ld_outbox *b, uint64_t i) { return &b->q[(b->head + i) % b->cap]; }

static void outbox_purge(ld_outbox *b)
{
    while (b->count > 0 && outbox_at(b, 0)->sent) {
        b->head = (b->head + 1) % b->cap;
        b->count--;
    }
}

static void queue_send(struct hdmlp_loader *ld, const peer_msg *m, ld_sample *s)
{
    ld_send *e = hd_calloc(1, sizeof(*e));
    if (e == NULL) {
        /* Cannot even queue: fail the loader rather than lose a sample. */
        if (ld->failed == 0) {
            ld->failed = HDMLP_E_NOMEM;
            snprintf(ld->fail_detail, sizeof(ld->fail_detail),
                     "loader: out of memory queueing a message for rank %u", m->to);
        }
        return;
    }
    e->m = *m;
    e->s = s;
    if (ld->send_tail != NULL) {
        ld->send_tail->next = e;
    } else {
        ld->send_head = e;
    }
    ld->send_tail = e;
}

static void queue_sample(struct hdmlp_loader *ld, uint32_t peer, ld_out *o, int prefetch)
{
    ld_sample *s = o->s;
    peer_msg m;
    memset(&m, 0, sizeof(m));
    m.kind = PEER_SAMPLE;
    m.from = ld->rank;
    m.to = peer;
    m.token = ld->cfg.token;
    m.epoch = o->epoch;
    m.position = o->position;
    m.group = o->group;
    m.slot = o->slot;
    m.prefetch = (uint32_t)prefetch;
    m.index = s->index;
    m.label = s->label;
    m.data = s->data;
    m.size = s->size;
    /* A block of the transport's shared memory is handed over: lent to a same-host peer. */
    m.lend = s->home != NULL && s->lender == PEER_MEM_OWN;
    o->sent = 1;
    o->s = NULL;
    ld->charged -= loader_sample_charge(s->size);
    ld->st.net_bytes_out += s->size;
    if (prefetch) {
        ld->st.prefetch_sent++;
    } else {
        ld->st.answers_sent++;
    }
    queue_send(ld, &m, s);
}

/* Answers peer q's pending request if its sample is decided and in memory, then pushes
 * prefetches. */
static void serve_peer(struct hdmlp_loader *ld, uint32_t q)
{
    ld_outbox *b = &ld->out[q];
    outbox_purge(b);
    if (!b->want) {
        return;
    }
    if (b->count == 0 || later(outbox_at(b, 0)->epoch, outbox_at(b, 0)->position, b->want_epoch,
                               b->want_position)) {
        /* Either not decided yet, or already sent as a prefetch. */
        if (later(ld->plan_epoch, ld->plan_pos, b->want_epoch, b->want_position) ||
            ld->plan_done) {
            b->want = 0;
        }
        return;
    }
    ld_out *head = outbox_at(b, 0);
    if (head->s->state == SAMPLE_PENDING) {
        return; /* the worker's completion serves it */
    }
    if (head->s->state < 0) {
        return; /* our refill failed: the loader is failing; the peer times out */
    }
    const uint64_t want_local = b->want_position / ld->world;
    const uint64_t want_epoch = b->want_epoch;
    queue_sample(ld, q, head, 0);
    b->want = 0;
    const uint64_t window = ld->cfg.prefetch;
    for (uint64_t i = 1; window > 0 && i < b->count; i++) {
        ld_out *o = outbox_at(b, i);
        const uint64_t ahead = (o->epoch - want_epoch) * ld->epoch_len_of[q] +
                               o->position / ld->world - want_local;
        if (ahead > window) {
            break;
        }
        if (o->sent || o->s->state != SAMPLE_READY ||
            b->pushed + loader_sample_charge(o->s->size) > b->limit) {
            continue;
        }
        b->pushed += loader_sample_charge(o->s->size);
        queue_sample(ld, q, o, 1);
    }
    outbox_purge(b);
}

void exchange_serve(struct hdmlp_loader *ld)
{
    for (uint32_t q = 0; q < ld->world; q++) {
        if (q != ld->rank) {
            serve_peer(ld, q);
        }
    }
}

static void send_list(struct hdmlp_loader *ld, peer_transport *net, ld_send *list)
{
    while (list != NULL) {
        ld_send *next = list->next;
        const int rc = net->send(net, &list->m);
        if (list->m.lend) {
            list->s->data = NULL; /* the transport's now, whatever rc says */
            list->s->home = NULL;
        }
        if (rc != HDMLP_OK) {
            pthread_mutex_lock(&ld->lock);
            if (ld->failed == 0) {
                ld->failed = rc;
                snprintf(ld->fail_detail, sizeof(ld->fail_detail), "%s", hdmlp_last_error());
            }
            pthread_cond_broadcast(&ld->ready_cv);
            pthread_mutex_unlock(&ld->lock);
        }
        sample_free(list->s);
        hd_free(list);
        list = next;
    }
}

void exchange_flush(struct hdmlp_loader *ld)
{
    pthread_mutex_lock(&ld->lock);
    /* No transport yet: sent once it is published. Another flusher: it sends ours too. */
    if (ld->net == NULL || ld->flushing) {
        pthread_mutex_unlock(&ld->lock);
        return;
    }
    ld->flushing = 1;
    while (ld->send_head != NULL && ld->net != NULL) {
        peer_transport *net = ld->net;
        ld_send *list = ld->send_head;
        ld->send_head = ld->send_tail = NULL;
        pthread_mutex_unlock(&ld->lock);
        send_list(ld, net, list);
        pthread_mutex_lock(&ld->lock);
    }
    ld->flushing = 0;
    pthread_cond_broadcast(&ld->ready_cv); /* exchange_close waits for the last flush */
    pthread_mutex_unlock(&ld->lock);
}

peer_transport *exchange_close(struct hdmlp_loader *ld)
{
    pthread_mutex_lock(&ld->lock);
    while (ld->flushing || ld->send_head != NULL) {
        if (ld->flushing) {
            pthread_cond_wait(&ld->ready_cv, &ld->lock); /* the flush under way ends */
        } else {
            pthread_mutex_unlock(&ld->lock);
            exchange_flush(ld);
            pthread_mutex_lock(&ld->lock);
        }
    }
    peer_transport *net = ld->net;
    ld->net = NULL;
    ld->mem = NULL;
    pthread_mutex_unlock(&ld->lock);
    return net;
}

/* Each owner may have its share of the remote memory in prefetches sent and not yet consumed
 * (in flight or held): the credit is what was consumed of its prefetches plus the share. */
static uint64_t credit_for(const struct hdmlp_loader *ld, uint32_t owner)
{
    return ld->out[owner].taken +
           budget_share_bytes(&ld->budget, BUDGET_REMOTE) / (ld->world > 1 ? ld->world - 1 : 1);
}

void exchange_request(struct hdmlp_loader *ld, ld_item *it)
{
    peer_msg m;
    memset(&m, 0, sizeof(m));
    m.kind = PEER_REQUEST;
    m.from = ld->rank;
    m.to = it->owner;
    m.token = ld->cfg.token;
    m.epoch = it->epoch;
    m.position = it->position;
    m.group = it->group;
    m.slot = it->slot;
    m.credit = credit_for(ld, it->owner);
    it->requested = 1;
    it->requested_ns = loader_now_ns();
    ld->st.remote_requests++;
    queue_send(ld, &m, NULL);
}

ld_sample *exchange_take(struct hdmlp_loader *ld, uint64_t seq)
{
    ld_remote **pp = &ld->remote[seq % ld->remote_buckets];
    for (; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->seq == seq) {
            ld_remote *r = *pp;
            ld_sample *s = r->s;
            *pp = r->next;
            hd_free(r);
            return s;
        }
    }
    return NULL;
}

static int remote_put(struct hdmlp_loader *ld, uint64_t seq, ld_sample *s)
{
    ld_remote *r = hd_malloc(sizeof(*r));
    if (r == NULL) {
        return HDMLP_E_NOMEM;
    }
    r->seq = seq;
    r->s = s;
    r->next = ld->remote[seq % ld->remote_buckets];
    ld->remote[seq % ld->remote_buckets] = r;
    return HDMLP_OK;
}

static void on_sample(struct hdmlp_loader *ld, const peer_msg *m)
{
    /* A lent block is kept as it is (given back when s is freed); other bytes are copied. */
    ld_sample *s = hd_calloc(1, sizeof(*s));
    if (s != NULL) {
        s->home = m->lent;
        s->lender = m->from;
        s->size = m->size;
        s->data =
            m->lent != NULL ? (uint8_t *)(uintptr_t)m->data : hd_malloc(m->size ? m->size : 1);
    } else if (m->lent != NULL) {
        m->lent->give_back(m->lent, (void *)(uintptr_t)m->data, m->size, m->from);
    }
    if (s == NULL || s->data == NULL || m->index >= ld->ix->h.n_samples ||
        m->position % ld->world != ld->rank) {
        sample_free(s);
        if (ld->failed == 0) {
            ld->failed = HDMLP_E_PEER;
            snprintf(ld->fail_detail, sizeof(ld->fail_detail),
                     "loader: cannot accept sample %llu for position %llu from rank %u",
                     (unsigned long long)m->index, (unsigned long long)m->position, m->from);
        }
        return;
    }
    if (m->size > 0 && m->lent == NULL) {
        memcpy(s->data, m->data, m->size);
    }
    s->index = m->index;
    s->label = m->label;
    s->state = SAMPLE_READY;
    ld->st.net_bytes_lent += m->lent != NULL ? m->size : 0;
    fmt_sample rec;
    const int rc = ds_sample_record(ld->ds, m->index, &rec);
    if (rc != HDMLP_OK) {
        sample_free(s);
        if (ld->failed == 0) {
            ld->failed = rc;
            snprintf(ld->fail_detail, sizeof(ld->fail_detail),
                     "loader: sample %llu from rank %u: %s", (unsigned long long)m->index,
                     m->from, hdmlp_last_error());
        }
        return;
    }
    s->stored = rec.stored_len;
    if (rec.raw_len != m->size || rec.label != m->label) {
        sample_free(s);
        if (ld->failed == 0) {
            ld->failed = HDMLP_E_PEER;
            snprintf(ld->fail_detail, sizeof(ld->fail_detail),
                     "loader: rank %u sent sample %llu with %llu bytes and label %u; the index "
                     "says %llu bytes and label %u (different datasets?)",
                     m->from, (unsigned long long)m->index, (unsigned long long)m->size,
                     m->label, (unsigned long long)rec.raw_len, rec.label);
        }
        return;
    }
    ld->charged += loader_sample_charge(s->size);
    loader_note_peak(ld);
    if (m->prefetch) {
        ld->remote_charged += loader_sample_charge(s->size);
        if (ld->remote_charged > ld->st.remote_peak) {
            ld->st.remote_peak = ld->remote_charged;
        }
    }
    s->prefetched = m->prefetch != 0;
    ld->st.net_bytes_in += s->size;
    if (remote_put(ld, seq_of(ld, m->epoch, m->position), s) != HDMLP_OK) {
        ld->charged -= loader_sample_charge(s->size);
        sample_free(s);
        if (ld->failed == 0) {
            ld->failed = HDMLP_E_NOMEM;
            snprintf(ld->fail_detail, sizeof(ld->fail_detail),
                     "loader: out of memory receiving from rank %u", m->from);
        }
    }
}

/* A request names one of the requester's own positions, in an epoch that exists and that
 * the requester can have reached (at most one past this owner's frontier), with a credit
 * at most the remote-memory cap every rank shares beyond what was sent to it. */
static int request_valid(const struct hdmlp_loader *ld, const peer_msg *m)
{
    const uint64_t n = ld->ix->h.n_samples;
    if (m->position >= n || m->position % ld->world != m->from) {
        return 0;
    }
    if (ld->cfg.epochs != 0 && m->epoch >= ld->cfg.epochs) {
        return 0;
    }
    if (m->epoch > ld->plan_epoch + 1 ||
        m->credit > ld->out[m->from].pushed + budget_share_bytes(&ld->budget, BUDGET_REMOTE)) {
        return 0;
    }
    return plan_owner(ld, m->group) == ld->rank && m->slot < ld->ix->h.chunk_size;
}

void exchange_on_msg(void *ctx, const peer_msg *m)
{
    struct hdmlp_loader *ld = ctx;
    pthread_mutex_lock(&ld->lock);
    ld->last_peer_ns = loader_now_ns();
    if (m->from >= ld->world || m->from == ld->rank) {
        pthread_mutex_unlock(&ld->lock);
        return;
    }
    switch (m->kind) {
    case PEER_REQUEST: {
        if (!request_valid(ld, m)) {
            break; /* a peer cannot ask for what it could never be owed */
        }
        ld_outbox *b = &ld->out[m->from];
        if (b->want && !later(m->epoch, m->position, b->want_epoch, b->want_position)) {
            break; /* a peer asks only for its next position: an earlier one is stale */
        }
        b->want = 1;
        b->want_epoch = m->epoch;
        b->want_position = m->position;
        b->limit = m->credit;
        const int rc = plan_advance(ld);
        if (rc != HDMLP_OK && ld->failed == 0) {
            ld->failed = rc;
            snprintf(ld->fail_detail, sizeof(ld->fail_detail), "%s", hdmlp_last_error());
        }
        exchange_serve(ld);
        break;
    }
    case PEER_SAMPLE:
        on_sample(ld, m);
        break;
    case PEER_DONE:
        if (!ld->out[m->from].done) {
            ld->out[m->from].done = 1;
            ld->peers_done++;
        }
        break;
    default:
        break;
    }
    pthread_cond_broadcast(&ld->ready_cv);
    pthread_mutex_unlock(&ld->lock);
    exchange_flush(ld);
}

uint32_t exchange_departed(const struct hdmlp_loader *ld, uint64_t *left)
{
    for (uint32_t q = 0; q < ld->world; q++) {
        ld_outbox *b = &ld->out[q];
        if (q == ld->rank || !b->done) {
            continue;
        }
        *left = 0;
        for (uint64_t i = 0; i < b->count; i++) {
            *left += !outbox_at(b, i)->sent;
        }
        if (*left > 0) {
            return q;
        }
    }
    return UINT32_MAX;
}

void exchange_on_error(void *ctx, uint32_t rank, int code, const char *detail)
{
    struct hdmlp_loader *ld = ctx;
    pthread_mutex_lock(&ld->lock);
    /* A peer that finished and left is expected to disconnect. */
    if (rank < ld->world && !ld->out[rank].done && ld->failed == 0) {
        ld->failed = code;
        ld->peer_failed = 1;
        snprintf(ld->fail_detail, sizeof(ld->fail_detail), "%s", detail);
    }
    pthread_cond_broadcast(&ld->ready_cv);
    pthread_mutex_unlock(&ld->lock);
}

void exchange_free(struct hdmlp_loader *ld)
{
    for (uint32_t q = 0; ld->out != NULL && q < ld->world; q++) {
        ld_outbox *b = &ld->out[q];
        for (uint64_t i = 0; i < b->count; i++) {
            ld_out *o = outbox_at(b, i);
            if (!o->sent) {
                sample_free(o->s);
            }
        }
        hd_free(b->q);
    }
    hd_free(ld->out);
    ld->out = NULL;
    for (uint64_t i = 0; ld->remote != NULL && i < ld->remote_buckets; i++) {
        for (ld_remote *r = ld->remote[i]; r != NULL;) {
            ld_remote *next = r->next;
            sample_free(r->s);
            hd_free(r);
            r = next;
        }
    }
    hd_free(ld->remote);
    ld->remote = NULL;
    for (ld_send *e = ld->send_head; e != NULL;) {
        ld_send *next = e->next;
        sample_free(e->s);
        hd_free(e);
        e = next;
    }
    ld->send_head = ld->send_tail = NULL;
}
