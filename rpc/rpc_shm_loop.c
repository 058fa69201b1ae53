/* The ring thread's primitives (rpc_shm_internal.h): its epoll set and the eventfd
 * doorbells. Used by rpc_shm.c, rpc_shm_send.c and rpc_shm_recv.c; calls none of them. */
#include "rpc_shm_internal.h"

#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

uint64_t shm_since(uint64_t now, uint64_t then) { return now > then ? now - then : 0; }

static uint64_t ev_key(int kind, uint32_t i) { return (uint64_t)kind << 32 | i; }

void shm_ep_add(rpc_shm *s, int fd, int kind, uint32_t i, uint32_t events)
{
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = events;
    e.data.u64 = ev_key(kind, i);
    epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e);
}

void shm_close_fd(rpc_shm *s, int *fd)
{
    if (*fd >= 0) {
        epoll_ctl(s->ep, EPOLL_CTL_DEL, *fd, NULL);
        close(*fd);
        *fd = -1;
    }
}

void shm_ring_bell(int efd)
{
    const uint64_t one = 1;
    if (efd >= 0 && write(efd, &one, sizeof one) < 0) {
        /* a full counter already wakes the reader */
    }
}

void shm_drain_efd(int efd)
{
    uint64_t v;
    if (read(efd, &v, sizeof v) < 0) {
        /* nothing pending */
    }
}
