/*
 * Per-GPU balance across the local ranks of a node (policy only: a pure function of the
 * node board's snapshot; loader_balance_apply.c measures, publishes and applies it).
 *
 * Each window (~20 ms of the rank's own activity) a rank sees every fresh slot of the board
 * and decides three things for itself:
 *   - io_limit: how many of its I/O threads may take refills (0 = all);
 *   - lend: bytes of its planning limit it leaves to the node's pool;
 *   - borrow: bytes it takes from the pool above its own limit.
 * The rule. The node's most-starved rank is the one whose consumer waited longest in its
 * last window (a rank that did not wait is not starved). When no fresh rank is starved,
 * everything is released (all threads, nothing lent or borrowed). When this rank is the
 * most starved, it runs all its threads, lends nothing and borrows up to its own lookahead
 * share (so it may plan up to twice as far ahead as alone). When another rank is starved
 * and this one did not wait, is at least two batches ahead and is not an owner the starved
 * rank waited on in its window (whose samples this rank reads), it holds back: half its
 * I/O threads (at least one), and it lends half its lookahead share (its limit drops at
 * once; the bytes reach the pool as its consumer frees them). Otherwise it is neutral (all
 * threads, nothing lent, returns what it borrowed).
 *
 * What it never changes: the abstract memory (A, the slots) comes from the rank's own
 * budget at creation, and admission only decides WHEN a decided refill is read, never
 * which; so the delivered order, exactly-once and the per-epoch sequence are the same with
 * the board on or off. A lender never lends below its own planning limit minus half its
 * lookahead share, which is still above what its consumer needs to progress (the batches
 * and the slots: loader_sizing.c), so a rank that stays lowered (its borrower died holding
 * the bytes) still finishes.
 */
#ifndef HDMLP_LOADER_BALANCE_H
#define HDMLP_LOADER_BALANCE_H

#include "loader_board.h"

#include <stdint.h>

typedef struct balance_input {
    uint32_t rank, world;
    const board_view *views;  /* world; views[rank] holds this rank's current values */
    uint32_t threads;         /* this rank's I/O threads */
    uint64_t batch;           /* samples per batch */
    uint64_t lookahead_share; /* this rank's lookahead bytes (loader_sizing's lookahead) */
} balance_input;

typedef struct balance_decision {
    uint32_t io_limit; /* 0 = all threads */
    uint64_t lend;     /* target bytes lent */
    uint64_t borrow;   /* target bytes borrowed */
    int role;          /* BALANCE_* */
} balance_decision;

enum { BALANCE_NEUTRAL = 0, BALANCE_STARVED = 1, BALANCE_HOLD = 2 };

void balance_decide(const balance_input *in, balance_decision *out);

/* Whether this rank's window was idle prefetch beside a stall (stat board_idle_windows):
 * it did not wait, had `ready` >= two batches of samples ready ahead of its consumer, and
 * another fresh rank waited. What the balance exists to prevent. */
int balance_idle_prefetch(const balance_input *in, uint64_t ready);

#endif
