/* Internal loader structures shared by loader_*.c and in-tree tests. */
#ifndef HDMLP_LOADER_H
#define HDMLP_LOADER_H

#include "format.h"

struct hdmlp_config {
    uint64_t memory;
    uint32_t batch;
    uint64_t seed;
    uint64_t epochs; /* 0 = unbounded */
    int drop_last;
    uint32_t rank, world;
    uint32_t threads;
    hdmlp_engine engine;
    int direct;
    uint64_t lookahead; /* 0 = memory-bound only */
    hdmlp_policy policy;
    hdmlp_refill refill;
    double op_us;
    double bytes_per_s;
};

void config_defaults(struct hdmlp_config *cfg);

/* Slots of abstract memory currently holding a valid sample (at the planning frontier). */
uint64_t loader_slots_occupied(const hdmlp_loader *ld);

#endif
