/*
 * The exchange (loader_exchange.c): serving peers and receiving from them.
 */
#ifndef HDMLP_LOADER_EXCHANGE_H
#define HDMLP_LOADER_EXCHANGE_H

#include "loader_core.h"

void exchange_on_msg(void *ctx, const peer_msg *m);
void exchange_on_error(void *ctx, uint32_t rank, int code, const char *detail);
/* Queues answers and prefetches that became possible (lock held). */
void exchange_serve(struct hdmlp_loader *ld);
/* Sends what exchange_serve queued; call without the lock. */
void exchange_flush(struct hdmlp_loader *ld);
/* Sends what is still queued (DONE among it), then detaches the transport: no flush starts
 * again and new samples go to the heap. Returns the transport for the caller to destroy;
 * call without the lock. */
peer_transport *exchange_close(struct hdmlp_loader *ld);
/* A peer that announced DONE while samples this rank decided for it are still unsent: it
 * would have consumed them had it run to the end, so it stopped early (or failed) and never
 * takes them. Returns its rank and sets *left to their count, or UINT32_MAX (lock held). */
uint32_t exchange_departed(const struct hdmlp_loader *ld, uint64_t *left);
/* Queues a request for a remote item (lock held). */
void exchange_request(struct hdmlp_loader *ld, ld_item *it);
/* Takes a received sample for this rank's sequence number, or NULL (lock held). */
ld_sample *exchange_take(struct hdmlp_loader *ld, uint64_t seq);
void exchange_free(struct hdmlp_loader *ld);

#endif
