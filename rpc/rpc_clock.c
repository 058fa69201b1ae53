/* Clocks of the transport: monotonic nanoseconds and gRPC deadlines (rpc_internal.h). The
 * lowest layer of rpc/: every other file may call it, it calls none of them. */
#include "rpc_internal.h"

#include <time.h>

uint64_t rpc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

gpr_timespec rpc_deadline_ms(uint64_t ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis((int64_t)ms, GPR_TIMESPAN));
}
