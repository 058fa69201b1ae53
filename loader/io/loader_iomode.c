/* Buffered or direct segment reads, from the page cache's room (see loader_iomode.h). */
#include "loader_iomode.h"
#include "loader_sizing.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* The first number in FILE (UINT64_MAX when FILE is missing or says "max"). */
static uint64_t read_u64_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return UINT64_MAX;
    }
    unsigned long long v = 0;
    const int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    return ok ? (uint64_t)v : UINT64_MAX;
}

/* The value of `key` (e.g. "MemAvailable:" in kB, or "total_cache " in bytes) in a
 * key-value file, times `unit`; UINT64_MAX when absent. */
static uint64_t read_key(const char *path, const char *key, uint64_t unit)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return UINT64_MAX;
    }
    char line[256];
    uint64_t v = UINT64_MAX;
    const size_t klen = strlen(key);
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long x;
        if (strncmp(line, key, klen) == 0 && sscanf(line + klen, "%llu", &x) == 1) {
            v = (uint64_t)x * unit;
            break;
        }
    }
    fclose(f);
    return v;
}

/* Room of one cgroup directory: its limit less the memory that is not page cache, or with
 * `limit_only` its limit. UINT64_MAX when it has none. */
static uint64_t group_room(const char *dir, int v2, int limit_only)
{
    char p[4200];
    snprintf(p, sizeof(p), "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    const uint64_t limit = read_u64_file(p);
    if (limit == UINT64_MAX || limit >= (UINT64_C(1) << 60)) {
        return UINT64_MAX; /* no limit */
    }
    if (limit_only) {
        return limit;
    }
    snprintf(p, sizeof(p), "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    const uint64_t usage = read_u64_file(p);
    snprintf(p, sizeof(p), "%s/memory.stat", dir);
    uint64_t cache = read_key(p, v2 ? "file " : "total_cache ", 1);
    if (usage == UINT64_MAX) {
        return limit;
    }
    cache = cache == UINT64_MAX || cache > usage ? 0 : cache;
    const uint64_t used = usage - cache;
    return used < limit ? limit - used : 0;
}

/* The smallest room (or limit) over the process's memory cgroup and its ancestors; the
 * directory holding it goes to `where` (cap bytes) when not NULL. */
static uint64_t cgroup_room(int limit_only, char *where, size_t cap)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL) {
        return UINT64_MAX;
    }
    char line[2048], rel[2048] = "";
    int v2 = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *a = strchr(line, ':');
        char *b = a != NULL ? strchr(a + 1, ':') : NULL;
        if (b == NULL) {
            continue;
        }
        *b = '\0';
        const char *ctrls = a + 1;
        if (strcmp(ctrls, "memory") == 0 || strstr(ctrls, "memory,") == ctrls ||
            strstr(ctrls, ",memory") != NULL) {
            snprintf(rel, sizeof(rel), "%s", b + 1);
            v2 = 0;
            break;
        }
        if (line[0] == '0' && ctrls[0] == '\0' && v2 < 0) {
            snprintf(rel, sizeof(rel), "%s", b + 1);
            v2 = 1;
        }
    }
    fclose(f);
    if (v2 < 0) {
        return UINT64_MAX;
    }
    uint64_t room = UINT64_MAX;
    char dir[4096];
    for (;;) {
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s%s%s", v2 ? "" : "/memory",
                 rel[0] == '/' || rel[0] == '\0' ? "" : "/", rel);
        const uint64_t r = group_room(dir, v2, limit_only);
        if (r < room) {
            room = r;
            if (where != NULL) {
                snprintf(where, cap, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
            }
        }
        char *slash = strrchr(rel, '/');
        if (slash == NULL || rel[0] == '\0' || strcmp(rel, "/") == 0) {
            break;
        }
        *slash = '\0';
        if (rel[0] == '\0') {
            /* the root group: no limit of its own worth reading */
            break;
        }
    }
    return room;
}

uint64_t iomode_cache_room(void)
{
    const uint64_t avail = read_key("/proc/meminfo", "MemAvailable:", 1024);
    const uint64_t cg = cgroup_room(0, NULL, 0);
    return cg < avail ? cg : avail;
}

/* What is left of resource limit `res` (soft) after `used` bytes; UINT64_MAX without one. */
static uint64_t rlimit_room(int res, uint64_t used)
{
    struct rlimit rl;
    if (getrlimit(res, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
        return UINT64_MAX;
    }
    const uint64_t lim = (uint64_t)rl.rlim_cur;
    return used == UINT64_MAX ? lim : used < lim ? lim - used : 0;
}

uint64_t iomode_memory_ceiling(char *what, size_t cap)
{
    uint64_t best = read_key("/proc/meminfo", "MemTotal:", 1024);
    snprintf(what, cap, "the machine's memory (MemTotal in /proc/meminfo)");
    char where[4300] = "";
    const uint64_t cg = cgroup_room(1, where, sizeof(where));
    if (cg < best) {
        best = cg;
        snprintf(what, cap, "the limit of this process's memory cgroup (%s)", where);
    }
    const uint64_t vm = read_key("/proc/self/status", "VmSize:", 1024);
    const uint64_t as = rlimit_room(RLIMIT_AS, vm);
    if (as < best) {
        best = as;
        snprintf(what, cap,
                 "the address space left under RLIMIT_AS (ulimit -v) less the %llu bytes "
                 "this process maps now",
                 (unsigned long long)(vm == UINT64_MAX ? 0 : vm));
    }
    const uint64_t data = read_key("/proc/self/status", "VmData:", 1024);
    const uint64_t ds = rlimit_room(RLIMIT_DATA, data);
    if (ds < best) {
        best = ds;
        snprintf(what, cap,
                 "the data segment left under RLIMIT_DATA (ulimit -d) less the %llu bytes "
                 "this process uses now",
                 (unsigned long long)(data == UINT64_MAX ? 0 : data));
    }
    return best;
}

int iomode_resolve(hdmlp_dataset *ds, const struct hdmlp_config *cfg, int *direct,
                   uint64_t *room)
{
    *room = 0;
    if (cfg->direct != HDMLP_DIRECT_IO_AUTO) {
        *direct = cfg->direct;
        return HDMLP_OK;
    }
    *room = iomode_cache_room();
    *direct = 0;
    if (ds->ix.h.n_segments == 0 ||
        loader_aligned_chunk_bytes(&ds->ix) / (cfg->world ? cfg->world : 1) <= *room / 2) {
        return HDMLP_OK;
    }
    const int fd = ds_segment_fd(ds, 0, 1);
    if (fd == HDMLP_E_UNSUPPORTED) {
        return HDMLP_OK; /* the file system refuses O_DIRECT: buffered */
    }
    if (fd < 0) {
        return fd;
    }
    *direct = 1;
    return HDMLP_OK;
}

uint64_t iomode_max_request(hdmlp_dataset *ds)
{
    if (ds->ix.h.n_segments == 0) {
        return 0;
    }
    char seg[4096];
    ds_segment_path(ds, 0, seg, sizeof(seg));
    struct stat sb;
    if (stat(seg, &sb) != 0) {
        return 0;
    }
    const unsigned maj = major(sb.st_dev), min = minor(sb.st_dev);
    char p[128];
    snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue/max_sectors_kb", maj, min);
    uint64_t kb = read_u64_file(p);
    if (kb == UINT64_MAX || kb == 0) { /* a partition: its disk's queue */
        snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/../queue/max_sectors_kb", maj, min);
        kb = read_u64_file(p);
    }
    return kb == UINT64_MAX ? 0 : kb * 1024;
}

/* v as "12.3 GiB". */
static void human(char *buf, size_t cap, uint64_t v)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024.0 && u < 6) {
        d /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", d, units[u]);
}

int iomode_check_budget(uint64_t budget)
{
    char what[4600];
    const uint64_t ceiling = iomode_memory_ceiling(what, sizeof(what));
    if (budget <= ceiling) {
        return HDMLP_OK;
    }
    char want[32], have[32];
    human(want, sizeof(want), budget);
    human(have, sizeof(have), ceiling);
    return hd_err(HDMLP_E_RANGE,
                  "memory budget %s (%llu bytes) is more than this process can get: %s (%llu "
                  "bytes), %s; a budget is a ceiling the loader may fill, so ask for at most "
                  "%llu bytes (less what the rest of the process needs)",
                  want, (unsigned long long)budget, have, (unsigned long long)ceiling, what,
                  (unsigned long long)ceiling);
}
