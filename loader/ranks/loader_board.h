/*
 * The node board: a small shared-memory segment through which the local ranks of one job
 * see each other's progress and share the node's prefetch memory (mechanism only; what to
 * do with it is loader_balance.c's). Not a ring or arena like rpc/'s or the data plane's:
 * README "Shared memory: three mechanisms, not one" says why.
 *
 * Identity. The segment is a POSIX shared-memory object named from the user, the job token
 * and a hash of the world and the peer list ("/hdmlp-board-<uid>-<token>-<hash>"): every
 * rank of a job on this host finds the same one, jobs with other tokens or peers never do.
 * It holds a header and one slot (two cache lines) per rank of the job; ranks on other hosts
 * never write theirs (their slots stay stale and are ignored).
 *
 * Life. Each attached rank holds a shared flock(2) on its own descriptor of the segment.
 * Attaching tries an exclusive lock first: if it gets it, no live rank is attached (the
 * segment is new, or left by a job that died) and it clears the segment before taking the
 * shared lock. Detaching drops the shared lock and, if an exclusive one is then free,
 * unlinks the name: the last rank out removes it. A job whose ranks all died leaves its
 * segment (a few hundred bytes): the next job with the same identity clears and reuses it,
 * and any rank opening a board sweeps this user's board segments that nobody holds a lock
 * on and that are older than a few seconds (a job being set up is younger), so no segment
 * outlives the next job on the host.
 *
 * Slots. A rank writes only its own slot (relaxed atomics; readers see a recent snapshot,
 * never a torn value): a heartbeat (CLOCK_MONOTONIC ns, system-wide), its lead (samples
 * and bytes planned ahead of its consumer), refills in flight, its total stall time and
 * the stall of its last window, the ranks it waited on in that window (itself for its own
 * refills, owners for remote samples), and what it lends and borrows. A slot whose heartbeat is
 * older than the staleness bound (a rank that died, hung or finished) is ignored.
 *
 * Memory. The header's pool holds bytes that ranks lent (lowering their own planning limit
 * first) and nobody borrowed. A rank raises its limit only by bytes it took from the pool
 * (an atomic subtraction that never goes below zero), and gives bytes back to the pool
 * before it raises its own limit again. So at every instant the ranks' limits sum to at
 * most their budgets' sum: sum(limit_r) = sum(budget_r) - pool - (bytes lost with a rank
 * that died while borrowing). Bytes a dead borrower held are never returned (the dead rank
 * freed them; the pool is only ever conservative), so a lender may stay lowered by what it
 * lent (never below its own progress guarantee: see loader_balance.h).
 */
#ifndef HDMLP_LOADER_BOARD_H
#define HDMLP_LOADER_BOARD_H

#include <stdint.h>

typedef struct board board;

/* What a rank publishes about itself. */
typedef struct board_slot_values {
    uint64_t lead_items;      /* samples planned and not yet delivered */
    uint64_t lead_bytes;      /* bytes of those that are in memory or being read */
    uint64_t inflight;        /* refills queued or running */
    uint64_t stall_ns;        /* total time its consumer waited for data */
    uint64_t stall_window_ns; /* of which in its last window */
    uint64_t lent, borrowed;  /* bytes it lent to the pool / took from it */
    uint64_t waits_on;        /* owners its consumer waited on in its last window: bit
                               * (rank % 64) of each rank whose read it waited for */
} board_slot_values;

/* A snapshot of one slot. */
typedef struct board_view {
    board_slot_values v;
    uint64_t heartbeat_ns;
    int fresh; /* heartbeat within the staleness bound, and not this rank's */
} board_view;

/* Opens (creating or clearing as needed) the board of the job identified by token and key
 * (e.g. the peer list; may be NULL) for `world` ranks, and attaches `rank`. HDMLP_E_INVAL
 * on rank >= world or world 0, HDMLP_E_IO naming the segment if it cannot be created,
 * sized, locked or mapped. */
int board_open(uint64_t token, uint32_t world, uint32_t rank, const char *key, board **out);
/* Unlinks this user's board segments (other than `keep`, may be NULL) that no live rank is
 * attached to and whose status changed at least min_age_s seconds ago; returns how many.
 * board_open calls it with a few seconds. */
unsigned board_sweep(const char *keep, unsigned min_age_s);
/* Marks the slot stale, detaches, and unlinks the segment if this was the last rank.
 * NULL is fine. */
void board_close(board *b);
/* The segment's name (for messages and tests). */
const char *board_name(const board *b);

/* Writes this rank's slot and heartbeat. */
void board_publish(board *b, const board_slot_values *v, uint64_t now_ns);
/* Fills views[0..world) (this rank's own marked not fresh); returns how many other ranks
 * are fresh (heartbeat within stale_ns of now). */
uint32_t board_read(const board *b, uint64_t now_ns, uint64_t stale_ns, board_view *views);
uint32_t board_world(const board *b);

/* The node's pool of lent bytes: board_take takes up to `want` (returns what it got),
 * board_give puts bytes back. */
uint64_t board_take(board *b, uint64_t want);
void board_give(board *b, uint64_t bytes);
uint64_t board_pool(const board *b);

#endif
