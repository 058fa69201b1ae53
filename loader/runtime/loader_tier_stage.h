/*
 * The SSD stager thread (loader_tier_stage.c): copies SSD-placed chunks into the cache
 * ahead of their loads.
 */
#ifndef HDMLP_LOADER_TIER_STAGE_H
#define HDMLP_LOADER_TIER_STAGE_H

#include "loader_core.h"

/* The stager thread's body (arg: the loader). */
void *stage_main(void *arg);
/* An I/O thread's verified whole read of an SSD-placed chunk's first load (len bytes in
 * buf, of cap bytes; the tail is zeroed up to the chunk's alignment) goes to the cache,
 * unless staging stopped. Lock not held. */
void stage_first_load(struct hdmlp_loader *ld, uint64_t chunk, uint8_t *buf, uint64_t len,
                      uint64_t cap);

#endif
