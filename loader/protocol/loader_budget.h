/*
 * The memory budget's owner: the split loader_size computes, held as named shares, and the
 * only code that moves bytes between them. Consumers ask it and never rewrite a number of
 * their own: planning and the I/O threads read the current planning limit, the image
 * pipeline takes its reserve, the node board's balance holds back, lends and borrows, the
 * exchange reads the remote cap, and the loader hands the transport its arena size.
 *
 * Why protocol/: it is bookkeeping on numbers (no system call, no lock, no allocation), the
 * continuation of the sizing arithmetic beside it, so it is tested without a loader. The
 * runtime keeps one in the loader object and calls it with the loader's lock held.
 *
 * The shares (each an amount of the budget, bytes):
 *   PLANNING   what is left: samples in slots, planned ahead and in batches, read buffers of
 *              I/O threads beyond the reserved ones (charged per job), raw batches queued
 *              for the image pipeline
 *   IO_POOL    the reserved read buffers of the first I/O threads, charged for the loader's
 *              life (shared by every thread per job for a remote source)
 *   STAGER     the SSD stager's read buffer
 *   REMOTE     samples peers push ahead of need (the remote cap)
 *   ANSWERS    one batch of answers to peers, which may arrive at any time (world > 1)
 *   RAM_CACHE  the RAM chunk cache
 *   SLOT_TABLES   the per-slot state of every abstract slot
 *   SAMPLE_TABLES a version-2 dataset's sample tables when they are held (sizing's rule)
 *   IMAGES     the image pipeline's output buffers, reserved when it starts (at most what
 *              sizing set apart for it, budget_images)
 *   LENT       planning room held back for the node's other ranks (of which budget_lent
 *              bytes are in the node board's pool)
 * Invariant: the shares add up to the budget (cfg memory, or the raised one) after every
 * operation, in any order; an operation that would break it changes nothing and fails with
 * HDMLP_E_RANGE naming the numbers. Bytes borrowed from the node's pool are other ranks'
 * budgets: they raise this rank's planning limit, never its shares.
 *
 * The planning limit is what the accounted bytes (the loader's `charged`: samples, the I/O
 * pool, read buffers charged per job) may reach: PLANNING + IO_POOL + borrowed. The
 * transport's arena is not a share: samples in it are charged where they are held (to this
 * budget, or to the peer they are lent to), so it is sized from the budget, 1.5 times it.
 */
#ifndef HDMLP_LOADER_BUDGET_H
#define HDMLP_LOADER_BUDGET_H

#include "loader_sizing.h"

typedef enum budget_share {
    BUDGET_PLANNING = 0,
    BUDGET_IO_POOL,
    BUDGET_STAGER,
    BUDGET_REMOTE,
    BUDGET_ANSWERS,
    BUDGET_RAM_CACHE,
    BUDGET_SLOT_TABLES,   /* the per-slot state of every abstract slot, held from create */
    BUDGET_SAMPLE_TABLES, /* the dataset's sample tables, held from create (or 0) */
    BUDGET_IMAGES,
    BUDGET_LENT,
    BUDGET_SHARES /* count */
} budget_share;

/* Read and change it only through the functions below (the fields are here so the loader
 * can hold one by value). */
typedef struct loader_budget {
    loader_sizing sz;                /* the split as sized (the stats' budget_* fields) */
    uint64_t share[BUDGET_SHARES];   /* adding up to sz.memory */
    uint64_t ceiling[BUDGET_SHARES]; /* the most budget_reserve may bring a share to */
    uint64_t lent;                   /* of share[BUDGET_LENT]: in the node's pool */
    uint64_t borrowed;               /* taken from the node's pool */
} loader_budget;

/* The split of a sized budget for a loader with `threads` I/O threads (the first
 * LOADER_IO_RESERVED of them hold their read buffer in the I/O pool). HDMLP_E_RANGE when the
 * fixed shares exceed sz->memory (loader_size never gives such a split). */
int budget_init(loader_budget *b, const loader_sizing *sz, uint32_t threads);

/* The split as sized. */
const loader_sizing *budget_sizing(const loader_budget *b);
/* The budget: what the shares add up to. */
uint64_t budget_memory(const loader_budget *b);
/* A share's bytes now. */
uint64_t budget_share_bytes(const loader_budget *b, budget_share s);
/* The shares added up (the invariant: equal to budget_memory). */
uint64_t budget_total(const loader_budget *b);
/* Its name in messages ("image pipeline", ...). */
const char *budget_share_name(budget_share s);

/* What the accounted bytes may reach now: PLANNING + IO_POOL + borrowed. */
uint64_t budget_plan_limit(const loader_budget *b);
/* The size of the transport's sample arena: 1.5 times the budget (it holds this rank's
 * samples, those held here and those lent to peers). */
uint64_t budget_transport_arena(const loader_budget *b);

/* Takes `bytes` from PLANNING into share s (the image pipeline's output buffers: IMAGES).
 * HDMLP_E_RANGE naming the numbers when the share would pass what sizing set apart for it
 * or planning would be left with no room (bytes at or above the planning limit); HDMLP_E_INVAL
 * for PLANNING and LENT (budget_hold_back moves LENT). */
int budget_reserve(loader_budget *b, budget_share s, uint64_t bytes);

/* Local ranks (the node board). The board's pool is the balance's mechanism; the owner
 * records what went in and out of it, so the limit follows. Each fails with HDMLP_E_RANGE
 * naming the numbers, changing nothing, where it would break the invariant. */
/* Sets the planning room held back for local ranks to `bytes` (LENT): at least what is in
 * the pool, at most what planning has. */
int budget_hold_back(loader_budget *b, uint64_t bytes);
/* `bytes` of the room held back went into the pool (at most what is held back and not yet
 * lent). */
int budget_lend(loader_budget *b, uint64_t bytes);
/* `bytes` lent were taken back from the pool (at most what is lent). */
int budget_reclaim(loader_budget *b, uint64_t bytes);
/* `bytes` were taken from the pool: the planning limit rises by them. */
int budget_borrow(loader_budget *b, uint64_t bytes);
/* `bytes` borrowed went back to the pool (at most what is borrowed). */
int budget_repay(loader_budget *b, uint64_t bytes);
/* Bytes in the pool from this rank, and taken from it. */
uint64_t budget_lent(const loader_budget *b);
uint64_t budget_borrowed(const loader_budget *b);
/* What this rank can hand to the pool now, holding `charged` accounted bytes: the limit it
 * keeps (the planning limit with the room held back but not yet lent) above charged; 0 when
 * at or over. */
uint64_t budget_room_to_give(const loader_budget *b, uint64_t charged);

#endif
