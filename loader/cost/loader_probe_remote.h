/* Storage probe of a remote dataset (loader_probe_remote.c): the figures of loader_probe.h
 * measured with HTTP range requests to the dataset's store. */
#ifndef HDMLP_LOADER_PROBE_REMOTE_H
#define HDMLP_LOADER_PROBE_REMOTE_H

#include "loader_dataset.h"
#include "loader_probe.h"

/* Probes ds's store (ds->store set) within lim (already resolved: every field set): small
 * 4 KiB range GETs at random page offsets one at a time (their mean time is the
 * per-request cost, latency included), then range GETs of the largest segment doubling
 * from 256 KiB to lim->large_len for the bandwidth, as probe_storage computes it.
 * HDMLP_E_RANGE when no segment holds PROBE_MIN_FILE bytes; request errors as
 * src_conn_read. t0_ns: when the caller's time limit started (probe_now_ns). */
int probe_remote(hdmlp_dataset *ds, const probe_limits *lim, uint64_t t0_ns, probe_result *out);

#endif
