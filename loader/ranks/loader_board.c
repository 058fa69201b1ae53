/*
 * The node board's mechanism: the named segment, its life cycle and the slots (see
 * loader_board.h for the contracts).
 */
#include "loader_board.h"

#include "format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BOARD_MAGIC 0x6864626f61726431ull /* "hdboard1" */

typedef struct board_slot {
    _Atomic uint64_t heartbeat_ns; /* 0 = never written or detached */
    _Atomic uint64_t lead_items, lead_bytes, inflight, stall_ns, stall_window_ns;
    _Atomic uint64_t lent, borrowed;
    _Atomic uint64_t waits_on;
    uint64_t pad[7];
} board_slot;

typedef struct board_header {
    _Atomic uint64_t magic;
    _Atomic uint64_t world;
    _Atomic uint64_t pool;
    uint64_t pad[5];
} board_header;

_Static_assert(sizeof(board_slot) == 128, "two cache lines per slot");
_Static_assert(sizeof(board_header) == 64, "one cache line for the header");

struct board {
    int fd;
    uint32_t world, rank;
    size_t len;
    board_header *h;
    board_slot *slots;
    char name[96];
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ c[i]) * 0x100000001b3ull;
    }
    return h;
}

#define BOARD_SWEEP_AGE_S 10

unsigned board_sweep(const char *keep, unsigned min_age_s)
{
    /* shm_open's names live in /dev/shm on Linux; elsewhere nothing is swept. */
    DIR *d = opendir("/dev/shm");
    if (d == NULL) {
        return 0;
    }
    char prefix[48];
    snprintf(prefix, sizeof(prefix), "hdmlp-board-%u-", (unsigned)getuid());
    const size_t plen = strlen(prefix);
    const time_t now = time(NULL);
    unsigned swept = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, plen) != 0 || strlen(e->d_name) > 90 ||
            (keep != NULL && strcmp(e->d_name, keep + 1) == 0)) {
            continue;
        }
        char name[NAME_MAX + 2];
        snprintf(name, sizeof(name), "/%s", e->d_name);
        const int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0) {
            continue;
        }
        struct stat st;
        if (fstat(fd, &st) == 0 && now - st.st_ctime >= (time_t)min_age_s &&
            flock(fd, LOCK_EX | LOCK_NB) == 0) {
            swept += shm_unlink(name) == 0;
        }
        close(fd); /* drops the lock */
    }
    closedir(d);
    return swept;
}

int board_open(uint64_t token, uint32_t world, uint32_t rank, const char *key, board **out)
{
    *out = NULL;
    if (world == 0 || rank >= world) {
        return hd_err(HDMLP_E_INVAL, "node board: rank %u is not below world %u", rank, world);
    }
    board *b = hd_calloc(1, sizeof(*b));
    if (b == NULL) {
        return hd_err(HDMLP_E_NOMEM, "node board: out of memory");
    }
    uint64_t h = fnv(0xcbf29ce484222325ull, &world, sizeof(world));
    if (key != NULL) {
        h = fnv(h, key, strlen(key));
    }
    snprintf(b->name, sizeof(b->name), "/hdmlp-board-%u-%016llx-%016llx", (unsigned)getuid(),
             (unsigned long long)token, (unsigned long long)h);
    board_sweep(b->name, BOARD_SWEEP_AGE_S);
    b->world = world;
    b->rank = rank;
    b->len = sizeof(board_header) + (size_t)world * sizeof(board_slot);
    b->fd = shm_open(b->name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (b->fd < 0) {
        const int e = errno;
        hd_free(b);
        return hd_err(HDMLP_E_IO, "node board: cannot open shared memory %s: %s", b->name,
                      strerror(e));
    }
    const char *what = NULL;
    /* Alone (no live rank holds the shared lock): clear what a dead job may have left. */
    if (flock(b->fd, LOCK_EX | LOCK_NB) == 0) {
        if (ftruncate(b->fd, 0) != 0 || ftruncate(b->fd, (off_t)b->len) != 0) {
            what = "size";
        }
    }
    struct stat st;
    if (what == NULL && flock(b->fd, LOCK_SH) != 0) {
        what = "lock";
    }
    if (what == NULL && (fstat(b->fd, &st) != 0 || (size_t)st.st_size != b->len)) {
        what = "size (another job with the same token has a different world)";
    }
    void *m = MAP_FAILED;
    if (what == NULL) {
        m = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
        if (m == MAP_FAILED) {
            what = "map";
        }
    }
    if (what != NULL) {
        const int e = errno;
        close(b->fd);
        const int rc = hd_err(HDMLP_E_IO, "node board: cannot %s shared memory %s: %s", what,
                              b->name, strerror(e));
        hd_free(b);
        return rc;
    }
    b->h = m;
    b->slots = (board_slot *)((char *)m + sizeof(board_header));
    uint64_t expect = 0;
    atomic_compare_exchange_strong(&b->h->magic, &expect, BOARD_MAGIC);
    atomic_store(&b->h->world, world);
    board_slot *s = &b->slots[rank];
    atomic_store(&s->lent, 0);
    atomic_store(&s->borrowed, 0);
    atomic_store(&s->heartbeat_ns, 0);
    *out = b;
    return HDMLP_OK;
}

void board_close(board *b)
{
    if (b == NULL) {
        return;
    }
    atomic_store(&b->slots[b->rank].heartbeat_ns, 0);
    munmap(b->h, b->len);
    flock(b->fd, LOCK_UN);
    /* Last out (no other shared lock) removes the name; a rank attaching meanwhile holds
     * its own descriptor and only loses the others' slots, never correctness. */
    if (flock(b->fd, LOCK_EX | LOCK_NB) == 0) {
        shm_unlink(b->name);
    }
    close(b->fd);
    hd_free(b);
}

const char *board_name(const board *b) { return b->name; }

uint32_t board_world(const board *b) { return b->world; }

void board_publish(board *b, const board_slot_values *v, uint64_t now_ns)
{
    board_slot *s = &b->slots[b->rank];
    atomic_store_explicit(&s->lead_items, v->lead_items, memory_order_relaxed);
    atomic_store_explicit(&s->lead_bytes, v->lead_bytes, memory_order_relaxed);
    atomic_store_explicit(&s->inflight, v->inflight, memory_order_relaxed);
    atomic_store_explicit(&s->stall_ns, v->stall_ns, memory_order_relaxed);
    atomic_store_explicit(&s->stall_window_ns, v->stall_window_ns, memory_order_relaxed);
    atomic_store_explicit(&s->lent, v->lent, memory_order_relaxed);
    atomic_store_explicit(&s->borrowed, v->borrowed, memory_order_relaxed);
    atomic_store_explicit(&s->waits_on, v->waits_on, memory_order_relaxed);
    atomic_store_explicit(&s->heartbeat_ns, now_ns ? now_ns : 1, memory_order_release);
}

uint32_t board_read(const board *b, uint64_t now_ns, uint64_t stale_ns, board_view *views)
{
    uint32_t fresh = 0;
    for (uint32_t r = 0; r < b->world; r++) {
        board_slot *s = &b->slots[r];
        board_view *o = &views[r];
        o->heartbeat_ns = atomic_load_explicit(&s->heartbeat_ns, memory_order_acquire);
        o->v.lead_items = atomic_load_explicit(&s->lead_items, memory_order_relaxed);
        o->v.lead_bytes = atomic_load_explicit(&s->lead_bytes, memory_order_relaxed);
        o->v.inflight = atomic_load_explicit(&s->inflight, memory_order_relaxed);
        o->v.stall_ns = atomic_load_explicit(&s->stall_ns, memory_order_relaxed);
        o->v.stall_window_ns = atomic_load_explicit(&s->stall_window_ns, memory_order_relaxed);
        o->v.lent = atomic_load_explicit(&s->lent, memory_order_relaxed);
        o->v.borrowed = atomic_load_explicit(&s->borrowed, memory_order_relaxed);
        o->v.waits_on = atomic_load_explicit(&s->waits_on, memory_order_relaxed);
        const uint64_t hb = o->heartbeat_ns;
        o->fresh = r != b->rank && hb != 0 && (hb >= now_ns || now_ns - hb <= stale_ns);
        fresh += (uint32_t)o->fresh;
    }
    return fresh;
}

uint64_t board_take(board *b, uint64_t want)
{
    uint64_t have = atomic_load(&b->h->pool);
    for (;;) {
        const uint64_t got = have < want ? have : want;
        if (got == 0) {
            return 0;
        }
        if (atomic_compare_exchange_weak(&b->h->pool, &have, have - got)) {
            return got;
        }
    }
}

void board_give(board *b, uint64_t bytes)
{
    if (bytes != 0) {
        atomic_fetch_add(&b->h->pool, bytes);
    }
}

uint64_t board_pool(const board *b) { return atomic_load(&b->h->pool); }
