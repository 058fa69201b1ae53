/* The rings' sample memory (loader_peer.h peer_mem, rpc_shm_internal.h "Sample memory"):
 * this rank's arena, the peers' arenas mapped here, and the releases of peers' blocks
 * waiting for the ring thread. */
#include "rpc_shm_internal.h"

#include <string.h>
#include <unistd.h>

#define SHM_REL_BATCH 64u /* releases for one lender that wake the ring thread */

typedef struct shm_peer_arena {
    uint8_t *base;
    uint64_t bytes;
} shm_peer_arena;

typedef struct shm_rel_q {
    rpc_shm_rel *e;
    uint32_t n, cap;
} shm_rel_q;

struct shm_mem {
    peer_mem base; /* first: peer_mem * <-> shm_mem * */
    pthread_mutex_t lock;
    rpc_arena *arena;
    uint32_t world;
    shm_peer_arena *peer; /* world entries */
    shm_rel_q *rel;       /* world entries: peers' blocks to give back */
    uint64_t live;        /* blocks held here: own ones not lent, and peers' ones */
    int wake_efd;         /* the ring thread's doorbell; -1 once detached */
    int detached;
};

static void mem_free(shm_mem *m)
{
    for (uint32_t r = 0; r < m->world; r++) {
        if (m->peer[r].base != NULL) {
            rpc_arena_unmap_peer(m->peer[r].base, m->peer[r].bytes);
        }
        hd_free(m->rel[r].e);
    }
    rpc_arena_destroy(m->arena);
    hd_free(m->peer);
    hd_free(m->rel);
    pthread_mutex_destroy(&m->lock);
    hd_free(m);
}

/* With m->lock: one block fewer; returns 1 if the memory is to be freed now. */
static int drop_live(shm_mem *m)
{
    m->live--;
    return m->detached && m->live == 0;
}

static void *mem_alloc(peer_mem *pm, uint64_t len)
{
    shm_mem *m = (shm_mem *)pm;
    pthread_mutex_lock(&m->lock);
    void *p = m->detached ? NULL : rpc_arena_alloc(m->arena, len);
    m->live += p != NULL;
    pthread_mutex_unlock(&m->lock);
    return p;
}

static void queue_release(shm_mem *m, uint8_t *p, uint64_t len, uint32_t lender)
{
    const shm_peer_arena *a = &m->peer[lender];
    shm_rel_q *q = &m->rel[lender];
    if (q->n == q->cap) {
        const uint32_t cap = q->cap ? 2 * q->cap : SHM_REL_BATCH;
        rpc_shm_rel *e = hd_malloc(cap * sizeof *e);
        if (e == NULL) {
            return; /* the lender keeps the block: its arena has that much less room */
        }
        if (q->n > 0) {
            memcpy(e, q->e, q->n * sizeof *e);
        }
        hd_free(q->e);
        q->e = e;
        q->cap = cap;
    }
    q->e[q->n++] = (rpc_shm_rel){(uint64_t)(p - a->base), len};
    if (q->n == SHM_REL_BATCH) {
        shm_ring_bell(m->wake_efd);
    }
}

static void mem_give_back(peer_mem *pm, void *p, uint64_t len, uint32_t lender)
{
    shm_mem *m = (shm_mem *)pm;
    pthread_mutex_lock(&m->lock);
    if (lender == PEER_MEM_OWN) {
        rpc_arena_free(m->arena, p);
    } else if (!m->detached && lender < m->world && m->peer[lender].base != NULL) {
        queue_release(m, p, len, lender);
    }
    const int gone = drop_live(m);
    pthread_mutex_unlock(&m->lock);
    if (gone) {
        mem_free(m);
    }
}

int shm_mem_create(uint64_t arena_bytes, uint32_t world, int wake_efd, shm_mem **out)
{
    *out = NULL;
    shm_mem *m = hd_calloc(1, sizeof *m);
    if (m == NULL) {
        return hd_err(HDMLP_E_NOMEM, "rpc: out of memory");
    }
    pthread_mutex_init(&m->lock, NULL);
    m->base.alloc = mem_alloc;
    m->base.give_back = mem_give_back;
    m->world = world;
    m->wake_efd = wake_efd;
    m->peer = hd_calloc(world, sizeof *m->peer);
    m->rel = hd_calloc(world, sizeof *m->rel);
    int rc = m->peer != NULL && m->rel != NULL
                 ? HDMLP_OK
                 : hd_err(HDMLP_E_NOMEM, "rpc: out of memory for %u ranks' arenas", world);
    if (rc == HDMLP_OK) {
        rc = rpc_arena_create(arena_bytes, &m->arena);
    }
    if (rc != HDMLP_OK) {
        mem_free(m);
        return rc;
    }
    *out = m;
    return HDMLP_OK;
}

void shm_mem_detach(shm_mem *m)
{
    if (m == NULL) {
        return;
    }
    pthread_mutex_lock(&m->lock);
    m->detached = 1;
    m->wake_efd = -1;
    const int gone = m->live == 0;
    pthread_mutex_unlock(&m->lock);
    if (gone) {
        mem_free(m);
    }
}

peer_mem *shm_mem_iface(shm_mem *m) { return m != NULL ? &m->base : NULL; }

int shm_mem_fd(const shm_mem *m) { return rpc_arena_fd(m->arena); }

uint64_t shm_mem_used(shm_mem *m)
{
    if (m == NULL) {
        return 0;
    }
    rpc_arena_stats st;
    rpc_arena_stats_get(m->arena, &st);
    return st.used;
}

uint64_t shm_mem_bytes(const shm_mem *m) { return rpc_arena_size(m->arena); }

int shm_mem_lend(shm_mem *m, const void *p, uint32_t to, uint64_t *off)
{
    pthread_mutex_lock(&m->lock);
    const int rc = rpc_arena_lend(m->arena, p, to, off);
    m->live -= rc == HDMLP_OK; /* the peer holds it now */
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void shm_mem_free_own(shm_mem *m, void *p) { mem_give_back(&m->base, p, 0, PEER_MEM_OWN); }

int shm_mem_map_peer(shm_mem *m, uint32_t rank, int fd, uint64_t bytes)
{
    uint8_t *base = NULL;
    int rc = rpc_arena_map_peer(fd, bytes, &base);
    if (rc != HDMLP_OK) {
        return rc;
    }
    pthread_mutex_lock(&m->lock);
    if (m->peer[rank].base == NULL) {
        m->peer[rank] = (shm_peer_arena){base, bytes};
        base = NULL;
    }
    pthread_mutex_unlock(&m->lock);
    if (base != NULL) {
        rpc_arena_unmap_peer(base, bytes);
        return hd_err(HDMLP_E_PEER, "rank %u's arena is mapped already", rank);
    }
    return HDMLP_OK;
}

const uint8_t *shm_mem_peer_block(shm_mem *m, uint32_t rank, uint64_t off, uint64_t size)
{
    const uint8_t *p = NULL;
    pthread_mutex_lock(&m->lock);
    const shm_peer_arena *a = &m->peer[rank];
    const uint64_t need = size > 0 ? size : 1;
    if (a->base != NULL && off % RPC_ARENA_UNIT == 0 && off < a->bytes &&
        need <= a->bytes - off) {
        p = a->base + off;
        m->live++;
    }
    pthread_mutex_unlock(&m->lock);
    return p;
}

int shm_mem_released(shm_mem *m, uint32_t by, uint64_t off, uint64_t len)
{
    pthread_mutex_lock(&m->lock);
    const int rc = rpc_arena_release(m->arena, off, len, by);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

uint32_t shm_mem_take_releases(shm_mem *m, uint32_t lender, rpc_shm_rel *out, uint32_t cap)
{
    pthread_mutex_lock(&m->lock);
    shm_rel_q *q = &m->rel[lender];
    const uint32_t n = q->n < cap ? q->n : cap;
    if (n > 0) {
        memcpy(out, q->e + q->n - n, n * sizeof *out);
        q->n -= n;
    }
    pthread_mutex_unlock(&m->lock);
    return n;
}
