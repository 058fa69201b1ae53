/*
 * The shared-memory ring of one (sender, receiver) pair of ranks on this host: mechanism
 * only (no threads, sockets or policy; rpc_shm.c runs them). Why hdmlp.torch's data plane
 * and the node board have their own: README "Shared memory: three mechanisms, not one".
 *
 * Memory. The receiver creates a sealed memfd (it cannot shrink or grow, so a peer cannot
 * make an access fault) of one header page and `size` data bytes (a power of two), and
 * passes it to the sender. Each side maps the data area twice, back to back, so a record
 * that wraps around the end is contiguous in the mapping: the sender writes a record with
 * one memcpy of its payload and the receiver reads it in place.
 *
 * Positions. head (written only by the sender) and tail (only by the receiver) count bytes
 * since creation; the ring holds head - tail bytes. Records are 8-byte aligned: a header
 * (rpc_shm_rec) then `frag` payload bytes. The side that reads a position written by the
 * other never trusts it: head - tail must lie within 0..size, and every header is copied
 * out of the ring before it is validated (rpc_shm_ring_peek).
 *
 * Doorbells. A side about to sleep sets its waiting flag, then re-reads the other's
 * position; the other side, after publishing its position, rings the eventfd only if the
 * flag was set (and clears it). So an idle pair costs no system call per record.
 */
#ifndef HDMLP_RPC_SHM_RING_H
#define HDMLP_RPC_SHM_RING_H

#include "loader_peer.h"

#include <stddef.h>
#include <stdint.h>

#define RPC_SHM_MAGIC 0x68646d6c70726e67ull /* "hdmlprng" */
#define RPC_SHM_HDR_BYTES 4096u
#define RPC_SHM_RING_MIN ((uint64_t)64 << 10)
#define RPC_SHM_RING_MAX ((uint64_t)1 << 30)

/* Record flags. */
#define RPC_SHM_MORE 1u /* further fragments of this message follow */
#define RPC_SHM_LENT                                                                           \
    2u /* a SAMPLE lent: no payload, its bytes at `offset` in the sender's                     \
          arena (rpc_arena.h) until the receiver releases them */
/* A record kind of the transport itself, never delivered: the receiver of the sender's
 * lent SAMPLEs gives them back; its payload is rpc_shm_rel entries. */
#define RPC_SHM_RELEASE 16u
typedef struct rpc_shm_rel {
    uint64_t off, len;
} rpc_shm_rel;
#define RPC_SHM_REL_MAX 64u /* entries in one RELEASE record */

/* The header of one record, as stored in the ring (8-byte aligned, 96 bytes). kind 0 is a
 * probe (no message). A SAMPLE larger than a fragment travels as several records with the
 * same fields and increasing offsets. */
typedef struct rpc_shm_rec {
    uint32_t len;  /* header + frag bytes (the record occupies len rounded up to 8) */
    uint32_t kind; /* 0 (probe) or a peer_kind */
    uint64_t token;
    uint32_t from, to;
    uint32_t flags;
    uint32_t slot;
    uint64_t epoch, position, group, credit, index;
    uint32_t label, prefetch;
    uint64_t size;   /* the whole payload (SAMPLE) */
    uint64_t offset; /* of this fragment's bytes in the payload */
} rpc_shm_rec;

typedef struct rpc_shm_ring {
    uint8_t *base;  /* the mapping: header page, then the data area twice */
    uint8_t *data;  /* base + RPC_SHM_HDR_BYTES */
    uint64_t size;  /* data bytes (power of two) */
    uint64_t local; /* this side's own position (head for the sender, tail for receiver) */
} rpc_shm_ring;

/* Receiver: a new sealed memfd for a ring of size bytes (a power of two within
 * RPC_SHM_RING_MIN..MAX), its header initialised. *fd owned by the caller. HDMLP_E_IO. */
int rpc_shm_ring_create_fd(uint64_t size, int *fd);
/* Maps fd (both sides). The sender calls it on a descriptor from the peer: the file must
 * be sealed against shrinking and hold exactly the header and size bytes, with the magic
 * and size in its header. HDMLP_E_PEER (what is wrong), HDMLP_E_IO. */
int rpc_shm_ring_map(int fd, uint64_t size, rpc_shm_ring *r);
void rpc_shm_ring_unmap(rpc_shm_ring *r);

/* Bytes a record with frag payload bytes occupies. */
uint64_t rpc_shm_rec_bytes(uint64_t frag);

/* ---- sender ---- */
/* Free bytes (size - (head - tail)); UINT64_MAX if the peer's tail is impossible. */
uint64_t rpc_shm_ring_space(const rpc_shm_ring *r);
/* 1 if everything written has been consumed. */
int rpc_shm_ring_empty(const rpc_shm_ring *r);
/* The peer's tail as last read. */
uint64_t rpc_shm_ring_tail(const rpc_shm_ring *r);
/* Writes header h (h->len set here) and frag bytes of payload, publishes the new head and
 * returns 1 if the receiver must be woken. The caller checked the space. */
int rpc_shm_ring_put(rpc_shm_ring *r, rpc_shm_rec *h, const uint8_t *payload, uint64_t frag);
/* Before sleeping for space: sets the flag; returns the space now (re-read). */
uint64_t rpc_shm_ring_wait_space(rpc_shm_ring *r);

/* ---- receiver ---- */
/* Copies the next record's header into *h and points *payload at its bytes in the ring.
 * Returns 1 with a record, 0 when the ring is empty, -1 when the peer's head or the
 * record's length is impossible (detail in hdmlp_last_error()). The bytes stay valid until
 * rpc_shm_ring_pop. */
int rpc_shm_ring_peek(rpc_shm_ring *r, rpc_shm_rec *h, const uint8_t **payload);
/* Consumes the record peeked (len from its header); returns 1 if the sender must be woken
 * (it waits for space). */
int rpc_shm_ring_pop(rpc_shm_ring *r, uint32_t len);
/* Before sleeping for data: sets the flag; returns 1 if data arrived meanwhile (then the
 * flag is cleared again and the caller keeps reading). */
int rpc_shm_ring_wait_data(rpc_shm_ring *r);

#endif
