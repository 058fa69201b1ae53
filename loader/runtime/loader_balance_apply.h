/*
 * Per-GPU balance over the node board (loader_balance_apply.c): the loader's hooks into
 * the board and its policy (loader/ranks/). Lock held unless said.
 */
#ifndef HDMLP_LOADER_BALANCE_APPLY_H
#define HDMLP_LOADER_BALANCE_APPLY_H

#include "loader_core.h"

typedef struct balance_state balance_state;
/* Attaches the board when the config and the peers call for it (lock not held). */
int node_balance_start(struct hdmlp_loader *ld, uint64_t lookahead_share);
void node_balance_tick(struct hdmlp_loader *ld);
int node_balance_io_allowed(const struct hdmlp_loader *ld, uint32_t i);
void node_balance_io_wait(struct hdmlp_loader *ld);
/* Lifts the I/O hold (at shutdown); balance_free detaches (lock not held, threads gone). */
void node_balance_release(struct hdmlp_loader *ld);
void node_balance_free(struct hdmlp_loader *ld);

#endif
