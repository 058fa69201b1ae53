/* Shared state of the rings' side of the transport (rpc_shm.c: the thread and life cycle,
 * rpc_shm_send.c: towards each peer, rpc_shm_recv.c: from each peer). Internal to rpc/. */
#ifndef HDMLP_RPC_SHM_INTERNAL_H
#define HDMLP_RPC_SHM_INTERNAL_H

#include "rpc_arena.h"
#include "rpc_shm.h"
#include "rpc_shm_link.h"
#include "rpc_shm_ring.h"

typedef struct shm_mem shm_mem; /* the sample memory, below */

#define SHM_RETRY_NS 50000000ull /* between attempts to reach a peer's ring socket */

enum { EV_LISTEN = 1, EV_WAKE, EV_OUT_SOCK, EV_OUT_SPACE, EV_IN_SOCK, EV_IN_DATA };
enum { OUT_DIAL, OUT_HELLO, OUT_READY, OUT_FAILED };

/* A message waiting for room in a ring, with its own copy of the payload. */
typedef struct shm_item {
    struct shm_item *next;
    peer_msg m;
    uint8_t *data; /* the copy, or (m.lend) the arena block itself */
    uint64_t sent; /* payload bytes already in the ring (a fragmented message) */
} shm_item;

/* Towards one peer: its ring (we write, it reads). Guarded by rpc_shm.lock. */
typedef struct shm_out {
    int used; /* the lane of this rank is ours */
    int state;
    int lend_ok; /* the peer mapped our arena: SAMPLEs in it are lent, not copied */
    int sock, data_efd, space_efd;
    rpc_shm_ring ring;
    shm_item *urg_h, *urg_t, *pre_h, *pre_t;
    shm_item *cur; /* partly written: nothing else goes in before its last fragment */
    uint64_t queued;
    uint64_t start_ns, retry_ns, last_write_ns, progress_ns, seen_tail;
    int reported;
    uint64_t msg_end; /* ring position past the last message (not probe) written */
    uint64_t hup_ns;  /* when the peer's ring socket hung up (0: it has not) */
    char name[RPC_SHM_ADDR_MAX];
    char why[256];
} shm_out;

/* From one peer: its ring (it writes, we read). Only the thread touches these. */
typedef struct shm_in {
    int sock, data_efd, space_efd; /* sock < 0: free slot */
    int ready;                     /* hello accepted, ring mapped */
    int lend_ok;                   /* the sender's arena is mapped: it may lend */
    uint32_t rank;
    uint64_t since_ns;
    rpc_shm_ring ring;
    int more;         /* records left after a round: read again without waiting */
    uint8_t *asm_buf; /* a fragmented SAMPLE being assembled */
    rpc_shm_rec asm_hdr;
    uint64_t asm_got;
} shm_in;

struct rpc_shm {
    rpc_tr *t;
    pthread_mutex_t lock;
    pthread_cond_t cv; /* broadcast after each round of the thread */
    int closing, stop;
    int ep, wake_efd, listen_fd;
    shm_mem *mem; /* this rank's arena and the peers' (NULL: none) */
    shm_out *out; /* world entries */
    shm_in *in;
    uint32_t n_in;
    uint64_t ring_bytes, frag_max;
    pthread_t th;
    int started;
};

/* ---- Sample memory (rpc_shm_mem.c) ----
 * This rank's arena (rpc_arena.h), which same-host peers map when their rings are set
 * up, so that a SAMPLE in it is lent by offset instead of copied; the peers' arenas mapped
 * here; and the releases of the peers' blocks this rank has given back, which the ring
 * thread writes into the rings. It outlives the transport (shm_mem_detach) until every
 * block handed out is back. Thread-safe; its lock is taken after rpc_shm.lock, never
 * before. */
int shm_mem_create(uint64_t arena_bytes, uint32_t world, int wake_efd, shm_mem **out);
/* The transport is gone: no more allocations or releases; freed once every block is back. */
void shm_mem_detach(shm_mem *m);
peer_mem *shm_mem_iface(shm_mem *m);
int shm_mem_fd(const shm_mem *m);
uint64_t shm_mem_used(shm_mem *m); /* bytes in use or lent (0 for NULL) */
uint64_t shm_mem_bytes(const shm_mem *m);
/* Marks this rank's block p lent to rank `to` (its offset in *off). */
int shm_mem_lend(shm_mem *m, const void *p, uint32_t to, uint64_t *off);
void shm_mem_free_own(shm_mem *m, void *p);
/* Maps rank's arena from the descriptor of its hello (once per rank). */
int shm_mem_map_peer(shm_mem *m, uint32_t rank, int fd, uint64_t bytes);
/* The block rank lent at off (size bytes), counted as held here; NULL if it does not lie
 * within rank's mapped arena. */
const uint8_t *shm_mem_peer_block(shm_mem *m, uint32_t rank, uint64_t off, uint64_t size);
/* Rank `by` gave back our block at off: HDMLP_E_PEER if it was not lent to it. */
int shm_mem_released(shm_mem *m, uint32_t by, uint64_t off, uint64_t len);
/* Takes up to cap of the releases waiting for lender. */
uint32_t shm_mem_take_releases(shm_mem *m, uint32_t lender, rpc_shm_rel *out, uint32_t cap);

/* rpc_shm.c */
uint64_t shm_since(uint64_t now, uint64_t then); /* ns from then to now; 0 if then is later */
void shm_ep_add(rpc_shm *s, int fd, int kind, uint32_t i, uint32_t events);
void shm_close_fd(rpc_shm *s, int *fd); /* out of the epoll set, closed, -1 */
void shm_ring_bell(int efd);
void shm_drain_efd(int efd);

/* rpc_shm_send.c; all with s->lock held. */
/* Marks the lane failed (once), drops its queue, closes its ring; reported by the thread. */
void shm_out_fail(rpc_shm *s, uint32_t rank, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Dials, takes the ring, flushes, probes, checks liveness; returns the ms until this lane
 * next needs the thread (UINT64_MAX: only an event). */
uint64_t shm_out_tick(rpc_shm *s, uint32_t rank, uint64_t now);
/* Reads the peer's answer to our hello (a ring, a rejection) or its hangup. */
void shm_out_answer(rpc_shm *s, uint32_t rank);

/* rpc_shm_recv.c; the thread only. */
void shm_in_accept(rpc_shm *s);
void shm_in_hello(rpc_shm *s, shm_in *c, uint32_t slot);
/* Reads what the ring holds, up to one ring's worth (then c->more). */
void shm_in_read(rpc_shm *s, shm_in *c);
/* Rejects a sender: says why on its socket, counts it, closes the ring. */
void shm_in_reject(rpc_shm *s, shm_in *c, const char *why);
void shm_in_close(rpc_shm *s, shm_in *c);

#endif
