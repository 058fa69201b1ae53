/*
 * A rank's sample arena: memory in a sealed memfd that same-host peer ranks map, so a
 * sample its owner decoded can be lent to a peer by offset, without a copy. The peer
 * later releases it (a message the owner receives) and the owner frees it.
 *
 * Allocator. Runs of whole RPC_ARENA_UNIT-byte units: boundary tags (a run's length at its
 * first and last unit) coalesce a freed run with both neighbours in O(1); segregated free
 * lists by run length (exact for 1..64 units, one per power of two above) give first fit
 * from the smallest class that can hold a request. Peers map the arena read-write, so all
 * of this metadata lives in the owner's private heap, never in the shared mapping: a
 * buggy peer can scribble over sample bytes but cannot corrupt the allocator.
 *
 * Threads. Every call is thread-safe (one mutex per arena): the owner's I/O threads
 * allocate, its consumer thread frees, and its transport thread lends and releases.
 */
#ifndef HDMLP_RPC_ARENA_H
#define HDMLP_RPC_ARENA_H

#include "format.h"

#include <stdint.h>

#define RPC_ARENA_UNIT 1024u
#define RPC_ARENA_MAX ((uint64_t)64 << 30) /* bytes */

typedef struct rpc_arena rpc_arena;

/* A new arena of `bytes` rounded up to whole units (at least one unit; more than
 * RPC_ARENA_MAX is HDMLP_E_INVAL): a sealed memfd (it cannot shrink or grow) mapped shared
 * read-write. HDMLP_E_IO when the memfd cannot be made or mapped, HDMLP_E_NOMEM for the
 * metadata; *out = NULL on failure. */
int rpc_arena_create(uint64_t bytes, rpc_arena **out);
/* Unmaps, closes the fd and frees the metadata. NULL is ignored. Blocks still lent are
 * gone with it: peers must have unmapped (or stop using their mapping). */
void rpc_arena_destroy(rpc_arena *a);

/* The memfd to pass to peers; owned by the arena (peers get their own copy by SCM_RIGHTS). */
int rpc_arena_fd(const rpc_arena *a);
uint8_t *rpc_arena_base(const rpc_arena *a);
/* Mapped bytes (a multiple of RPC_ARENA_UNIT). */
uint64_t rpc_arena_size(const rpc_arena *a);
/* 1 if p points into the mapping; 0 otherwise or for a NULL arena. */
int rpc_arena_owns(const rpc_arena *a, const void *p);

/* A block of at least len bytes (0 counts as 1), aligned to RPC_ARENA_UNIT, owned by the
 * caller until rpc_arena_free or, once lent, rpc_arena_release. NULL when no free run is
 * large enough (counted in stats.failed; no error detail). */
void *rpc_arena_alloc(rpc_arena *a, uint64_t len);
/* Frees a block from rpc_arena_alloc that is in use by this rank (not lent). HDMLP_E_INVAL,
 * naming the offset, when p is not the start of such a block: the arena is unchanged. */
int rpc_arena_free(rpc_arena *a, void *p);
/* Marks the in-use block at p lent to rank `to` and sets *off to its offset from the base.
 * HDMLP_E_INVAL when p is not the start of an in-use, not lent, block (arena unchanged). */
int rpc_arena_lend(rpc_arena *a, const void *p, uint32_t to, uint64_t *off);
/* Rank `by` gives back the block at offset `off` it was lent with a sample of len bytes;
 * the block is freed. HDMLP_E_PEER ("rank B released offset O, which ...") when off is not
 * the start of a block lent to `by` or len does not fit the block: the arena is unchanged. */
int rpc_arena_release(rpc_arena *a, uint64_t off, uint64_t len, uint32_t by);

/* Bytes (unit-rounded) in use or lent now and their high-water mark; bytes lent now;
 * allocations that found no room. */
typedef struct {
    uint64_t used, peak, lent, failed;
} rpc_arena_stats;
void rpc_arena_stats_get(rpc_arena *a, rpc_arena_stats *st);

/* ---- peers ---- */
/* Maps a peer's arena fd read-write shared into *base. The fd must be a regular file of
 * exactly `bytes` (1..RPC_ARENA_MAX) sealed against shrinking, so no access can fault:
 * else HDMLP_E_PEER naming what is wrong. HDMLP_E_IO when mmap fails. *base = NULL on
 * failure. The fd stays the caller's (it may be closed after mapping). */
int rpc_arena_map_peer(int fd, uint64_t bytes, uint8_t **base);
/* Unmaps a mapping from rpc_arena_map_peer. NULL base is ignored. */
void rpc_arena_unmap_peer(uint8_t *base, uint64_t bytes);

#endif
