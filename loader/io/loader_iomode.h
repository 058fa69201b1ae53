/*
 * Buffered or direct reads of the dataset's segments (policy), from the memory the page
 * cache can use on this machine (mechanism: /proc/meminfo and the process's memory cgroup).
 *
 * Rule (HDMLP_DIRECT_IO_AUTO): read with O_DIRECT when this rank's share of the dataset
 * (its stored, aligned chunk bytes / world) is more than half of the page cache's room;
 * buffered otherwise (the cache may then keep the data for later epochs and runs), and
 * buffered when the file system refuses O_DIRECT (tmpfs, some network file systems). The
 * room is MemAvailable, and, in a memory cgroup with a limit (v1 or v2, every ancestor
 * too), the limit less the group's memory that is not page cache. Buffered segment fds have
 * readahead off (POSIX_FADV_RANDOM), so a read fetches exactly its bytes in large requests
 * however the device's readahead is set.
 */
#ifndef HDMLP_LOADER_IOMODE_H
#define HDMLP_LOADER_IOMODE_H

#include "loader.h"
#include "loader_dataset.h"

/* Bytes the page cache can use now (UINT64_MAX when nothing says). */
uint64_t iomode_cache_room(void);

/* The most memory this process can get (bytes; UINT64_MAX when nothing says), with what
 * sets it in `what` (cap bytes): the smallest of the machine's memory (MemTotal), the limit
 * of the process's memory cgroup (v1 memory.limit_in_bytes or v2 memory.max, the smallest
 * over its group and their ancestors), and what RLIMIT_AS and RLIMIT_DATA leave beyond the
 * address space (VmSize) and data (VmData) the process holds now. Limits, not what is free:
 * the answer does not move with other processes' use or the page cache. */
uint64_t iomode_memory_ceiling(char *what, size_t cap);

/* HDMLP_E_RANGE naming both numbers and what sets the ceiling when a memory budget is above
 * iomode_memory_ceiling; HDMLP_OK otherwise. */
int iomode_check_budget(uint64_t budget);

/* The largest request (bytes) the block device holding ds's segments takes (its
 * queue/max_sectors_kb in sysfs; a partition's from its disk): the block layer splits a
 * longer read into several, each an operation to the device. 0 when unknown (no limit). */
uint64_t iomode_max_request(hdmlp_dataset *ds);

/* Resolves cfg->direct (0, 1 or HDMLP_DIRECT_IO_AUTO) into 0 or 1 for ds; *room gets the
 * page-cache room the rule saw (0 when the choice was not automatic). Errors: an explicit
 * O_DIRECT the file system refuses (HDMLP_E_UNSUPPORTED naming the segment), open failures
 * (naming the segment). */
int iomode_resolve(hdmlp_dataset *ds, const struct hdmlp_config *cfg, int *direct,
                   uint64_t *room);

#endif
