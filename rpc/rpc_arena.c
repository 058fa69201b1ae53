/* A rank's sample arena in shared memory (rpc_arena.h). */
#include "rpc_arena.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NIL UINT32_MAX
#define EXACT 64u            /* runs of 1..EXACT units have a list per length */
#define NCLASS (EXACT + 21u) /* then one per power of two: 2^6..2^26 units */
#define MAX_UNITS (RPC_ARENA_MAX / RPC_ARENA_UNIT)

_Static_assert(MAX_UNITS == (1u << 26), "the last class holds the largest arena");

/* What the first unit of a run is; every other unit of a run is RUN_NONE. */
enum { RUN_NONE = 0, RUN_FREE, RUN_USED, RUN_LENT };

/* All metadata is private heap memory, indexed by unit (see rpc_arena.h). */
struct rpc_arena {
    pthread_mutex_t lock;
    int fd;
    uint8_t *base;
    uint64_t size;
    uint32_t units;
    uint32_t *len;  /* run length, at its first and at its last unit */
    uint8_t *kind;  /* RUN_* at a run's first unit */
    uint32_t *next; /* free run: the next in its list; lent run: the borrowing rank */
    uint32_t *prev; /* free run: the previous in its list */
    uint32_t head[NCLASS];
    uint64_t used, peak, lent, failed; /* units, except failed */
};

/* ---- runs and free lists (call with the lock held) -------------------------------------- */

static uint32_t log2_floor(uint32_t n) { return 31u - (uint32_t)__builtin_clz(n); }

static uint32_t class_of(uint32_t n)
{
    return n <= EXACT ? n - 1 : EXACT + log2_floor(n) - log2_floor(EXACT);
}

/* Sets the boundary tags and kind of the run [u, u + n). */
static void run_set(rpc_arena *a, uint32_t u, uint32_t n, uint8_t kind)
{
    a->len[u] = n;
    a->len[u + n - 1] = n;
    a->kind[u] = kind;
}

static void list_push(rpc_arena *a, uint32_t u, uint32_t n)
{
    run_set(a, u, n, RUN_FREE);
    const uint32_t c = class_of(n);
    a->prev[u] = NIL;
    a->next[u] = a->head[c];
    if (a->head[c] != NIL) {
        a->prev[a->head[c]] = u;
    }
    a->head[c] = u;
}

/* Takes the free run at u off its list; it is left RUN_NONE for the caller to re-tag. */
static void list_remove(rpc_arena *a, uint32_t u)
{
    const uint32_t nx = a->next[u], pv = a->prev[u];
    if (pv != NIL) {
        a->next[pv] = nx;
    } else {
        a->head[class_of(a->len[u])] = nx;
    }
    if (nx != NIL) {
        a->prev[nx] = pv;
    }
    a->kind[u] = RUN_NONE;
}

/* First fit for n units: the smallest class that holds a run of n or more (the first
 * class may also hold shorter runs, so it is searched; any run of a later class fits). */
static uint32_t run_find(const rpc_arena *a, uint32_t n)
{
    for (uint32_t c = class_of(n); c < NCLASS; c++) {
        for (uint32_t u = a->head[c]; u != NIL; u = a->next[u]) {
            if (a->len[u] >= n) {
                return u;
            }
        }
    }
    return NIL;
}

/* Returns the in-use or lent run at u to the free lists, merged with free neighbours. */
static void run_free(rpc_arena *a, uint32_t u)
{
    uint32_t n = a->len[u];
    a->used -= n;
    a->kind[u] = RUN_NONE;
    if (u + n < a->units && a->kind[u + n] == RUN_FREE) {
        const uint32_t r = u + n;
        n += a->len[r];
        list_remove(a, r);
    }
    if (u > 0) {
        const uint32_t l = u - a->len[u - 1]; /* the left run's tag is at u - 1 */
        if (a->kind[l] == RUN_FREE) {
            n += a->len[l];
            list_remove(a, l);
            u = l;
        }
    }
    list_push(a, u, n);
}

/* The unit starting a block at byte offset off, or NIL when off is not a unit boundary
 * inside the arena. */
static uint32_t unit_at(const rpc_arena *a, uint64_t off)
{
    if (off >= a->size || off % RPC_ARENA_UNIT != 0) {
        return NIL;
    }
    return (uint32_t)(off / RPC_ARENA_UNIT);
}

static uint64_t off_of(const rpc_arena *a, const void *p)
{
    return rpc_arena_owns(a, p) ? (uint64_t)((const uint8_t *)p - a->base) : UINT64_MAX;
}

/* ---- the arena -------------------------------------------------------------------------- */

static int map_shared(int fd, uint64_t bytes, uint8_t **base)
{
    void *m = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        *base = NULL;
        return hd_err(HDMLP_E_IO, "rpc: mapping a %llu-byte arena: %s",
                      (unsigned long long)bytes, strerror(errno));
    }
    *base = m;
    return HDMLP_OK;
}

/* A sealed memfd of `bytes`, mapped into a->fd and a->base. */
static int arena_map_new(rpc_arena *a, uint64_t bytes)
{
    a->fd = memfd_create("hdmlp-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (a->fd < 0) {
        return hd_err(HDMLP_E_IO, "rpc: memfd_create for an arena: %s", strerror(errno));
    }
    if (ftruncate(a->fd, (off_t)bytes) != 0 ||
        fcntl(a->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        return hd_err(HDMLP_E_IO, "rpc: sizing and sealing a %llu-byte arena: %s",
                      (unsigned long long)bytes, strerror(errno));
    }
    return map_shared(a->fd, bytes, &a->base);
}

int rpc_arena_create(uint64_t bytes, rpc_arena **out)
{
    *out = NULL;
    if (bytes > RPC_ARENA_MAX) {
        return hd_err(HDMLP_E_INVAL, "rpc: arena of %llu bytes (at most 64 GiB)",
                      (unsigned long long)bytes);
    }
    const uint32_t units =
        bytes == 0 ? 1 : (uint32_t)((bytes + RPC_ARENA_UNIT - 1) / RPC_ARENA_UNIT);
    rpc_arena *a = hd_calloc(1, sizeof *a);
    if (a == NULL) {
        return hd_err(HDMLP_E_NOMEM, "rpc: no memory for an arena");
    }
    a->fd = -1;
    a->units = units;
    a->size = (uint64_t)units * RPC_ARENA_UNIT;
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        hd_free(a);
        return hd_err(HDMLP_E_NOMEM, "rpc: no memory for an arena's lock");
    }
    a->len = hd_malloc((size_t)units * sizeof *a->len);
    a->next = hd_malloc((size_t)units * sizeof *a->next);
    a->prev = hd_malloc((size_t)units * sizeof *a->prev);
    a->kind = hd_calloc(units, sizeof *a->kind); /* all RUN_NONE */
    if (a->len == NULL || a->next == NULL || a->prev == NULL || a->kind == NULL) {
        rpc_arena_destroy(a);
        return hd_err(HDMLP_E_NOMEM, "rpc: no memory for the metadata of %u arena units",
                      units);
    }
    const int rc = arena_map_new(a, a->size);
    if (rc != HDMLP_OK) {
        rpc_arena_destroy(a);
        return rc;
    }
    for (uint32_t c = 0; c < NCLASS; c++) {
        a->head[c] = NIL;
    }
    list_push(a, 0, units);
    *out = a;
    return HDMLP_OK;
}

void rpc_arena_destroy(rpc_arena *a)
{
    if (a == NULL) {
        return;
    }
    if (a->base != NULL) {
        munmap(a->base, (size_t)a->size);
    }
    if (a->fd >= 0) {
        close(a->fd);
    }
    hd_free(a->len);
    hd_free(a->next);
    hd_free(a->prev);
    hd_free(a->kind);
    pthread_mutex_destroy(&a->lock);
    hd_free(a);
}

int rpc_arena_fd(const rpc_arena *a) { return a->fd; }
uint8_t *rpc_arena_base(const rpc_arena *a) { return a->base; }
uint64_t rpc_arena_size(const rpc_arena *a) { return a->size; }

int rpc_arena_owns(const rpc_arena *a, const void *p)
{
    if (a == NULL || p == NULL) {
        return 0;
    }
    const uintptr_t q = (uintptr_t)p, b = (uintptr_t)a->base;
    return q >= b && q - b < a->size;
}

void *rpc_arena_alloc(rpc_arena *a, uint64_t len)
{
    const uint64_t want = len == 0 ? 1 : len / RPC_ARENA_UNIT + (len % RPC_ARENA_UNIT != 0);
    void *p = NULL;
    pthread_mutex_lock(&a->lock);
    const uint32_t u = want > a->units ? NIL : run_find(a, (uint32_t)want);
    if (u == NIL) {
        a->failed++;
    } else {
        const uint32_t n = (uint32_t)want, have = a->len[u];
        list_remove(a, u);
        if (have > n) {
            list_push(a, u + n, have - n);
        }
        run_set(a, u, n, RUN_USED);
        a->used += n;
        if (a->used > a->peak) {
            a->peak = a->used;
        }
        p = a->base + (uint64_t)u * RPC_ARENA_UNIT;
    }
    pthread_mutex_unlock(&a->lock);
    return p;
}

int rpc_arena_free(rpc_arena *a, void *p)
{
    const uint64_t off = off_of(a, p);
    int rc = HDMLP_OK;
    pthread_mutex_lock(&a->lock);
    const uint32_t u = unit_at(a, off);
    if (off == UINT64_MAX) {
        rc = hd_err(HDMLP_E_INVAL, "rpc: arena free of %p, which is outside the arena", p);
    } else if (u == NIL || a->kind[u] != RUN_USED) {
        const int lent = u != NIL && a->kind[u] == RUN_LENT;
        rc = hd_err(HDMLP_E_INVAL, "rpc: arena free of offset %llu, which is %s",
                    (unsigned long long)off,
                    lent ? "lent to a peer" : "not the start of a block in use");
    } else {
        run_free(a, u);
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

int rpc_arena_lend(rpc_arena *a, const void *p, uint32_t to, uint64_t *off)
{
    const uint64_t o = off_of(a, p);
    int rc = HDMLP_OK;
    pthread_mutex_lock(&a->lock);
    const uint32_t u = unit_at(a, o);
    if (o == UINT64_MAX) {
        rc = hd_err(HDMLP_E_INVAL, "rpc: lending %p to rank %u, which is outside the arena", p,
                    to);
    } else if (u == NIL || a->kind[u] != RUN_USED) {
        rc = hd_err(HDMLP_E_INVAL,
                    "rpc: lending offset %llu to rank %u, which is not a block in use",
                    (unsigned long long)o, to);
    } else {
        a->kind[u] = RUN_LENT;
        a->next[u] = to;
        a->lent += a->len[u];
        *off = o;
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

int rpc_arena_release(rpc_arena *a, uint64_t off, uint64_t len, uint32_t by)
{
    int rc = HDMLP_OK;
    pthread_mutex_lock(&a->lock);
    const uint32_t u = unit_at(a, off);
    if (u == NIL || a->kind[u] == RUN_NONE || a->kind[u] == RUN_FREE) {
        rc = hd_err(HDMLP_E_PEER, "rank %u released offset %llu, which is not a block", by,
                    (unsigned long long)off);
    } else if (a->kind[u] != RUN_LENT) {
        rc = hd_err(HDMLP_E_PEER, "rank %u released offset %llu, which is not lent", by,
                    (unsigned long long)off);
    } else if (a->next[u] != by) {
        rc = hd_err(HDMLP_E_PEER, "rank %u released offset %llu, which is lent to rank %u", by,
                    (unsigned long long)off, a->next[u]);
    } else if (len > (uint64_t)a->len[u] * RPC_ARENA_UNIT) {
        rc = hd_err(HDMLP_E_PEER,
                    "rank %u released offset %llu, which holds %llu bytes, not %llu", by,
                    (unsigned long long)off, (unsigned long long)a->len[u] * RPC_ARENA_UNIT,
                    (unsigned long long)len);
    } else {
        a->lent -= a->len[u];
        run_free(a, u);
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

void rpc_arena_stats_get(rpc_arena *a, rpc_arena_stats *st)
{
    pthread_mutex_lock(&a->lock);
    st->used = a->used * RPC_ARENA_UNIT;
    st->peak = a->peak * RPC_ARENA_UNIT;
    st->lent = a->lent * RPC_ARENA_UNIT;
    st->failed = a->failed;
    pthread_mutex_unlock(&a->lock);
}

/* ---- peers ------------------------------------------------------------------------------ */

int rpc_arena_map_peer(int fd, uint64_t bytes, uint8_t **base)
{
    *base = NULL;
    if (bytes == 0 || bytes > RPC_ARENA_MAX) {
        return hd_err(HDMLP_E_PEER, "arena of %llu bytes (1 byte..64 GiB)",
                      (unsigned long long)bytes);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != bytes) {
        return hd_err(HDMLP_E_PEER, "arena descriptor is not a file of %llu bytes",
                      (unsigned long long)bytes);
    }
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
        return hd_err(HDMLP_E_PEER, "arena memory is not sealed against shrinking");
    }
    return map_shared(fd, bytes, base);
}

void rpc_arena_unmap_peer(uint8_t *base, uint64_t bytes)
{
    if (base != NULL) {
        munmap(base, (size_t)bytes);
    }
}
