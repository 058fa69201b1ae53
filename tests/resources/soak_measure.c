/*
 * rel_soak's process measurements: RSS, peak RSS (VmHWM, reset through clear_refs) and open
 * file descriptors, from /proc/self (see soak.c).
 */
#include "resources/soak.h"

#include <dirent.h>
#include <string.h>
#include <unistd.h>

/* ---- process measurements --------------------------------------------------------------- */

uint64_t rss_bytes(void)
{
    FILE *const f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &rss) != 2) {
            rss = 0;
        }
        fclose(f);
    }
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

int open_fds(void)
{
    DIR *const d = opendir("/proc/self/fd");
    if (!d) {
        return -1;
    }
    int n = 0;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        n += de->d_name[0] != '.';
    }
    closedir(d);
    return n - 1; /* the directory stream's own fd */
}

/* Prints the open descriptors and what they refer to (for a failed fd check). */
void show_fds(void)
{
    DIR *const d = opendir("/proc/self/fd");
    const struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') {
            continue;
        }
        char path[300], target[4096];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
        const ssize_t n = readlink(path, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        fprintf(stderr, "soak:   fd %s -> %s\n", de->d_name, target);
    }
    if (d) {
        closedir(d);
    }
}

/* VmHWM (peak RSS) in bytes; reset_hwm() restarts it from the current RSS. */
uint64_t hwm_bytes(void)
{
    FILE *const f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "VmHWM: %llu kB", &kib) == 1) {
            break;
        }
    }
    if (f) {
        fclose(f);
    }
    return (uint64_t)kib * 1024;
}

int reset_hwm(void)
{
    FILE *const f = fopen("/proc/self/clear_refs", "w");
    if (!f) {
        return -1;
    }
    const int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}
