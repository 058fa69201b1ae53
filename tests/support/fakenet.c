/* In-process peer transport for tests (see fakenet.h). */
#include "fakenet.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct fmsg {
    peer_msg m;
    uint8_t *data;
    struct timespec due; /* delivered no earlier (CLOCK_REALTIME, for the condition wait) */
    struct fmsg *next;
} fmsg;

typedef struct fnode {
    peer_transport t; /* first: the loader holds a peer_transport * */
    struct fakenet *hub;
    uint32_t rank;
    peer_handler h;
    fmsg *head, *tail;
    int stop, started;
    pthread_t thread;
} fnode;

struct fakenet {
    uint32_t world;
    fnode **nodes;
    int *dead;
    uint64_t delivered;
    uint32_t send_us, latency_us;
    pthread_mutex_t lock;
    pthread_cond_t cv;
};

static fakenet *current_hub;

int fakenet_create(uint32_t world, fakenet **out)
{
    fakenet *hub = calloc(1, sizeof(*hub));
    hub->world = world;
    hub->nodes = calloc(world, sizeof(fnode *));
    hub->dead = calloc(world, sizeof(int));
    pthread_mutex_init(&hub->lock, NULL);
    pthread_cond_init(&hub->cv, NULL);
    current_hub = hub;
    *out = hub;
    return HDMLP_OK;
}

void fakenet_free(fakenet *hub)
{
    if (hub == NULL) {
        return;
    }
    free(hub->nodes);
    free(hub->dead);
    pthread_mutex_destroy(&hub->lock);
    pthread_cond_destroy(&hub->cv);
    if (current_hub == hub) {
        current_hub = NULL;
    }
    free(hub);
}

void fakenet_kill(fakenet *hub, uint32_t dead)
{
    pthread_mutex_lock(&hub->lock);
    hub->dead[dead] = 1;
    pthread_mutex_unlock(&hub->lock);
}

void fakenet_set_delays(fakenet *hub, uint32_t send_us, uint32_t latency_us)
{
    pthread_mutex_lock(&hub->lock);
    hub->send_us = send_us;
    hub->latency_us = latency_us;
    pthread_mutex_unlock(&hub->lock);
}

static struct timespec in_us(uint32_t us)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += (long)us * 1000;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

static int before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

uint64_t fakenet_messages(const fakenet *hub)
{
    fakenet *h = (fakenet *)hub;
    pthread_mutex_lock(&h->lock);
    const uint64_t n = h->delivered;
    pthread_mutex_unlock(&h->lock);
    return n;
}

static void *dispatch(void *arg)
{
    fnode *n = arg;
    fakenet *hub = n->hub;
    pthread_mutex_lock(&hub->lock);
    for (;;) {
        while (!n->stop && n->head == NULL) {
            pthread_cond_wait(&hub->cv, &hub->lock);
        }
        if (n->head == NULL) {
            break; /* stopped and drained */
        }
        const struct timespec now = in_us(0);
        if (!n->stop && before(&now, &n->head->due)) {
            pthread_cond_timedwait(&hub->cv, &hub->lock, &n->head->due);
            continue;
        }
        fmsg *f = n->head;
        n->head = f->next;
        if (n->head == NULL) {
            n->tail = NULL;
        }
        hub->delivered++;
        pthread_mutex_unlock(&hub->lock);
        f->m.data = f->data;
        n->h.on_msg(n->h.ctx, &f->m);
        free(f->data);
        free(f);
        pthread_mutex_lock(&hub->lock);
    }
    pthread_mutex_unlock(&hub->lock);
    return NULL;
}

static int fake_send(peer_transport *t, const peer_msg *m)
{
    fnode *self = (fnode *)t;
    fakenet *hub = self->hub;
    pthread_mutex_lock(&hub->lock);
    const uint32_t send_us = hub->send_us;
    pthread_mutex_unlock(&hub->lock);
    if (send_us > 0) {
        const struct timespec d = {0, (long)send_us * 1000};
        nanosleep(&d, NULL);
    }
    pthread_mutex_lock(&hub->lock);
    if (m->to >= hub->world) {
        pthread_mutex_unlock(&hub->lock);
        return HDMLP_E_INVAL;
    }
    fnode *dst = hub->nodes[m->to];
    if (hub->dead[m->to] || hub->dead[self->rank]) {
        pthread_mutex_unlock(&hub->lock);
        if (hub->dead[m->to]) {
            char detail[128];
            snprintf(detail, sizeof(detail), "rank %u (fakenet): peer is dead", m->to);
            self->h.on_error(self->h.ctx, m->to, HDMLP_E_PEER, detail);
        }
        return HDMLP_OK;
    }
    if (dst == NULL || dst->stop) {
        pthread_mutex_unlock(&hub->lock);
        return HDMLP_OK; /* the peer has left; it needed nothing more */
    }
    fmsg *f = calloc(1, sizeof(*f));
    f->m = *m;
    f->due = in_us(hub->latency_us);
    f->data = malloc(m->size ? m->size : 1);
    if (m->size) {
        memcpy(f->data, m->data, m->size);
    }
    if (dst->tail) {
        dst->tail->next = f;
    } else {
        dst->head = f;
    }
    dst->tail = f;
    pthread_cond_broadcast(&hub->cv);
    pthread_mutex_unlock(&hub->lock);
    return HDMLP_OK;
}

static void fake_destroy(peer_transport *t)
{
    fnode *n = (fnode *)t;
    fakenet *hub = n->hub;
    pthread_mutex_lock(&hub->lock);
    n->stop = 1;
    pthread_cond_broadcast(&hub->cv);
    pthread_mutex_unlock(&hub->lock);
    pthread_join(n->thread, NULL);
    pthread_mutex_lock(&hub->lock);
    hub->nodes[n->rank] = NULL;
    pthread_mutex_unlock(&hub->lock);
    free(n);
}

int fakenet_factory(const struct hdmlp_config *cfg, const peer_handler *h, peer_transport **out)
{
    fakenet *hub = current_hub;
    if (hub == NULL || cfg->world != hub->world) {
        return HDMLP_E_INVAL;
    }
    fnode *n = calloc(1, sizeof(*n));
    n->t.send = fake_send;
    n->t.destroy = fake_destroy;
    n->hub = hub;
    n->rank = cfg->rank;
    n->h = *h;
    pthread_mutex_lock(&hub->lock);
    hub->nodes[cfg->rank] = n;
    pthread_mutex_unlock(&hub->lock);
    pthread_create(&n->thread, NULL, dispatch, n);
    *out = &n->t;
    return HDMLP_OK;
}
