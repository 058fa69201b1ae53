/*
 * The probe's measurement (internal to loader_probe*.c): the reads, the page-cache checks
 * and the fit described in loader_probe.h, over a target whose limits are already resolved.
 */
#ifndef HDMLP_LOADER_PROBE_MEASURE_H
#define HDMLP_LOADER_PROBE_MEASURE_H

#include "loader_probe.h"

#include <time.h>

#define PROBE_MAX_LARGE 64u
#define PROBE_SMALL_SHARE 0.4 /* of the time left when measuring starts */
#define PROBE_NAME_MAX 4200u

static inline uint64_t probe_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t probe_align_down(uint64_t v)
{
    return v & ~(uint64_t)(PROBE_SMALL_LEN - 1);
}

/* probe_storage with resolved limits (every field set) and the caller's start time t0
 * (probe_now_ns), which the time limit counts from. */
int probe_measure(const probe_target *t, const probe_limits *lim, uint64_t t0,
                  probe_result *out);

#endif
