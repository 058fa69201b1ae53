/*
 * The consumer (loader_next.c): batches handed out in sequence order; what the API and
 * the exchange need of it.
 */
#ifndef HDMLP_LOADER_NEXT_H
#define HDMLP_LOADER_NEXT_H

#include "loader_core.h"

/* Gives a batch's samples back and frees it (lock held). */
void batch_discard(struct hdmlp_loader *ld, struct hdmlp_batch *batch);
/* Queues DONE for every peer once (lock held). */
void loader_announce_done(struct hdmlp_loader *ld);

#endif
