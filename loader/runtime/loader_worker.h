/*
 * The I/O threads (loader_worker.c): each takes refill jobs in queue order, reads,
 * verifies and decodes them, and reports completion.
 */
#ifndef HDMLP_LOADER_WORKER_H
#define HDMLP_LOADER_WORKER_H

#include "loader_core.h"

/* Starts w's thread with its engine, decoder and read buffer (lock not held). */
int worker_start(struct hdmlp_loader *ld, ld_worker *w);
void *worker_main(void *arg);
/* Frees what worker_start made (after the thread was joined). */
void worker_free(ld_worker *w);

#endif
