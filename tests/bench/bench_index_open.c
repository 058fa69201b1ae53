/*
 * bench_index_open — time hdmlp_dataset_open() on a (large) packed dataset.
 *
 *   bench_index_open DIR [--runs N] [--cold]
 *
 * Opens and closes DIR N times (default 7). With --cold, page caches are dropped before
 * every open (sync; echo 3 > /proc/sys/vm/drop_caches; needs root, else a warning and warm
 * runs). Prints one JSON object on stdout: median/min/max seconds of the open call, the
 * resident-set growth across the open (median/max, KiB), the peak RSS of the process, the
 * sample count and index size. Uses only the public header.
 */
#include "hdmlp.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Field `name` ("VmRSS:", "VmHWM:") of /proc/self/status in KiB, or -1. */
static long status_kib(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return -1;
    }
    char line[256];
    long v = -1;
    const size_t n = strlen(name);
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, name, n) == 0) {
            v = strtol(line + n, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

static int drop_caches(void)
{
    sync();
    const int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd < 0) {
        return -1;
    }
    const int ok = write(fd, "3\n", 2) == 2;
    close(fd);
    return ok ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    int runs = 7, cold = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--cold") == 0) {
            cold = 1;
        } else if (argv[i][0] != '-' && dir == NULL) {
            dir = argv[i];
        } else {
            dir = NULL;
            break;
        }
    }
    if (dir == NULL || runs < 1 || runs > 1000) {
        fprintf(stderr, "usage: bench_index_open DIR [--runs N] [--cold]\n");
        return 2;
    }
    char ipath[4096];
    snprintf(ipath, sizeof ipath, "%s/index", dir);
    struct stat st;
    if (stat(ipath, &st) != 0) {
        fprintf(stderr, "bench_index_open: %s: no index\n", dir);
        return 1;
    }

    double *secs = calloc((size_t)runs, sizeof *secs);
    double *grow = calloc((size_t)runs, sizeof *grow);
    if (secs == NULL || grow == NULL) {
        return 1;
    }
    uint64_t samples = 0;
    for (int r = 0; r < runs; r++) {
        if (cold && drop_caches() != 0) {
            fprintf(stderr, "bench_index_open: warning: cannot drop caches (not root?); "
                            "runs are warm\n");
            cold = 0;
        }
        const long rss0 = status_kib("VmRSS:");
        hdmlp_dataset *ds = NULL;
        const double t0 = now();
        const int rc = hdmlp_dataset_open(dir, &ds);
        const double t1 = now();
        const long rss1 = status_kib("VmRSS:");
        if (rc != HDMLP_OK) {
            fprintf(stderr, "bench_index_open: %s: %s: %s\n", dir, hdmlp_strerror(rc),
                    hdmlp_last_error());
            return 1;
        }
        samples = hdmlp_dataset_sample_count(ds);
        hdmlp_dataset_close(ds);
        secs[r] = t1 - t0;
        grow[r] = (double)(rss1 - rss0);
    }
    qsort(secs, (size_t)runs, sizeof *secs, cmp_double);
    qsort(grow, (size_t)runs, sizeof *grow, cmp_double);
    printf("{\"dir\": \"%s\", \"samples\": %llu, \"index_bytes\": %lld, \"cold\": %s, "
           "\"runs\": %d, \"open_s_median\": %.6f, \"open_s_min\": %.6f, \"open_s_max\": %.6f, "
           "\"rss_growth_kib_median\": %.0f, \"rss_growth_kib_max\": %.0f, "
           "\"peak_rss_kib\": %ld, \"goal_open_lt_0_5_s\": %s}\n",
           dir, (unsigned long long)samples, (long long)st.st_size, cold ? "true" : "false",
           runs, secs[runs / 2], secs[0], secs[runs - 1], grow[runs / 2], grow[runs - 1],
           status_kib("VmHWM:"), secs[runs / 2] < 0.5 ? "true" : "false");
    free(secs);
    free(grow);
    return 0;
}
