/* The shared-memory ring of one pair of ranks (rpc_shm_ring.h). */
#include "rpc_shm_ring.h"

#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The header page. head and its flag are the sender's, tail and its flag the receiver's:
 * each on a cache line of its own. */
typedef struct shm_hdr {
    uint64_t magic;
    uint64_t size;
    _Alignas(64) _Atomic uint64_t head;
    _Atomic uint32_t rx_waiting; /* the receiver sleeps until the doorbell rings */
    _Alignas(64) _Atomic uint64_t tail;
    _Atomic uint32_t tx_waiting; /* the sender sleeps until space is freed */
} shm_hdr;

_Static_assert(sizeof(shm_hdr) <= RPC_SHM_HDR_BYTES, "ring header fits its page");
_Static_assert(sizeof(rpc_shm_rec) == 96, "record header layout");

static shm_hdr *hdr_of(const rpc_shm_ring *r) { return (shm_hdr *)(void *)r->base; }

static int size_ok(uint64_t size)
{
    return size >= RPC_SHM_RING_MIN && size <= RPC_SHM_RING_MAX && (size & (size - 1)) == 0;
}

int rpc_shm_ring_create_fd(uint64_t size, int *fd)
{
    *fd = -1;
    if (!size_ok(size)) {
        return hd_err(HDMLP_E_INVAL,
                      "rpc: ring of %llu bytes (a power of two in 64 KiB..1 GiB)",
                      (unsigned long long)size);
    }
    const int f = memfd_create("hdmlp-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0) {
        return hd_err(HDMLP_E_IO, "rpc: memfd_create for a ring: %s", strerror(errno));
    }
    if (ftruncate(f, (off_t)(RPC_SHM_HDR_BYTES + size)) != 0 ||
        fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        const int e = errno;
        close(f);
        return hd_err(HDMLP_E_IO, "rpc: sizing and sealing a %llu-byte ring: %s",
                      (unsigned long long)size, strerror(e));
    }
    shm_hdr h;
    memset(&h, 0, sizeof h);
    h.magic = RPC_SHM_MAGIC;
    h.size = size;
    atomic_init(&h.rx_waiting, 1); /* the receiver reads only when rung until it has read */
    if (pwrite(f, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        const int e = errno;
        close(f);
        return hd_err(HDMLP_E_IO, "rpc: writing a ring header: %s", strerror(e));
    }
    *fd = f;
    return HDMLP_OK;
}

int rpc_shm_ring_map(int fd, uint64_t size, rpc_shm_ring *r)
{
    memset(r, 0, sizeof *r);
    if (!size_ok(size)) {
        return hd_err(HDMLP_E_PEER, "ring size %llu is not a power of two in 64 KiB..1 GiB",
                      (unsigned long long)size);
    }
    struct stat st;
    const int seals = fcntl(fd, F_GET_SEALS);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != RPC_SHM_HDR_BYTES + size) {
        return hd_err(HDMLP_E_PEER, "ring descriptor is not a file of %llu bytes",
                      (unsigned long long)(RPC_SHM_HDR_BYTES + size));
    }
    if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
        return hd_err(HDMLP_E_PEER, "ring memory is not sealed against shrinking");
    }
    const size_t span = RPC_SHM_HDR_BYTES + 2 * (size_t)size;
    uint8_t *base = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        return hd_err(HDMLP_E_IO, "rpc: reserving %zu bytes for a ring: %s", span,
                      strerror(errno));
    }
    const size_t first = RPC_SHM_HDR_BYTES + (size_t)size;
    if (mmap(base, first, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
            MAP_FAILED ||
        mmap(base + first, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
             RPC_SHM_HDR_BYTES) == MAP_FAILED) {
        const int e = errno;
        munmap(base, span);
        return hd_err(HDMLP_E_IO, "rpc: mapping a %llu-byte ring: %s", (unsigned long long)size,
                      strerror(e));
    }
    r->base = base;
    r->data = base + RPC_SHM_HDR_BYTES;
    r->size = size;
    const shm_hdr *h = hdr_of(r);
    if (h->magic != RPC_SHM_MAGIC || h->size != size) {
        rpc_shm_ring_unmap(r);
        return hd_err(HDMLP_E_PEER, "ring header has a wrong magic or size");
    }
    return HDMLP_OK;
}

void rpc_shm_ring_unmap(rpc_shm_ring *r)
{
    if (r->base != NULL) {
        munmap(r->base, RPC_SHM_HDR_BYTES + 2 * (size_t)r->size);
    }
    memset(r, 0, sizeof *r);
}

uint64_t rpc_shm_rec_bytes(uint64_t frag) { return (sizeof(rpc_shm_rec) + frag + 7) & ~7ull; }

/* ---- sender ----------------------------------------------------------------------------- */

uint64_t rpc_shm_ring_tail(const rpc_shm_ring *r)
{
    return atomic_load_explicit(&hdr_of(r)->tail, memory_order_acquire);
}

uint64_t rpc_shm_ring_space(const rpc_shm_ring *r)
{
    const uint64_t used = r->local - rpc_shm_ring_tail(r);
    return used > r->size ? UINT64_MAX : r->size - used;
}

int rpc_shm_ring_empty(const rpc_shm_ring *r) { return rpc_shm_ring_tail(r) == r->local; }

int rpc_shm_ring_put(rpc_shm_ring *r, rpc_shm_rec *h, const uint8_t *payload, uint64_t frag)
{
    h->len = (uint32_t)(sizeof *h + frag);
    uint8_t *at = r->data + (r->local & (r->size - 1));
    memcpy(at, h, sizeof *h);
    if (frag > 0) {
        memcpy(at + sizeof *h, payload, (size_t)frag);
    }
    r->local += rpc_shm_rec_bytes(frag);
    shm_hdr *sh = hdr_of(r);
    atomic_store_explicit(&sh->head, r->local, memory_order_seq_cst);
    return atomic_exchange_explicit(&sh->rx_waiting, 0, memory_order_seq_cst) != 0;
}

uint64_t rpc_shm_ring_wait_space(rpc_shm_ring *r)
{
    atomic_store_explicit(&hdr_of(r)->tx_waiting, 1, memory_order_seq_cst);
    return rpc_shm_ring_space(r);
}

/* ---- receiver --------------------------------------------------------------------------- */

int rpc_shm_ring_peek(rpc_shm_ring *r, rpc_shm_rec *h, const uint8_t **payload)
{
    const uint64_t head = atomic_load_explicit(&hdr_of(r)->head, memory_order_acquire);
    const uint64_t avail = head - r->local;
    if (avail == 0) {
        return 0;
    }
    if (avail > r->size || (avail & 7) != 0) {
        hd_err(HDMLP_E_CORRUPT, "ring head %llu is %llu bytes past tail %llu (ring of %llu)",
               (unsigned long long)head, (unsigned long long)avail,
               (unsigned long long)r->local, (unsigned long long)r->size);
        return -1;
    }
    const uint8_t *at = r->data + (r->local & (r->size - 1));
    memcpy(h, at, sizeof *h); /* copy, then validate: the peer may still write there */
    if (h->len < sizeof *h || rpc_shm_rec_bytes(h->len - sizeof *h) > avail) {
        hd_err(HDMLP_E_CORRUPT, "record of %u bytes at ring position %llu (%llu written)",
               h->len, (unsigned long long)r->local, (unsigned long long)avail);
        return -1;
    }
    *payload = at + sizeof *h;
    return 1;
}

int rpc_shm_ring_pop(rpc_shm_ring *r, uint32_t len)
{
    r->local += rpc_shm_rec_bytes(len - sizeof(rpc_shm_rec));
    shm_hdr *sh = hdr_of(r);
    atomic_store_explicit(&sh->tail, r->local, memory_order_seq_cst);
    return atomic_exchange_explicit(&sh->tx_waiting, 0, memory_order_seq_cst) != 0;
}

int rpc_shm_ring_wait_data(rpc_shm_ring *r)
{
    shm_hdr *sh = hdr_of(r);
    atomic_store_explicit(&sh->rx_waiting, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&sh->head, memory_order_seq_cst) != r->local) {
        atomic_store_explicit(&sh->rx_waiting, 0, memory_order_relaxed);
        return 1;
    }
    return 0;
}
