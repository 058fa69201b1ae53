/*
 * The stats ABI: a caller passes the size of the hdmlp_stats it was compiled with, and gets
 * the fields both know. Used by hdmlp_loader_stats, hdmlp_loader_forecast and the MPI stats
 * gather, below all of them.
 */
#include "loader.h"

#include <string.h>

void loader_stats_out(hdmlp_stats *out, size_t size, const hdmlp_stats *full)
{
    const size_t n = size < sizeof(*full) ? size : sizeof(*full);
    memcpy(out, full, n);
    if (size > n) {
        memset((char *)out + n, 0, size - n);
    }
}
