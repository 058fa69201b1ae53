/*
 * bench_scale — what a loader costs at a large sample count (issue 27, scale_bench.sh).
 *
 *   bench_scale DIR [--memory BYTES] [--batch B] [--threads T] [--seed S] [--every N]
 *               [--samples M]
 *
 * Opens DIR (timed), creates a loader with a budget of BYTES (default 32 MiB; a budget
 * below the dataset's least is refused, not raised), takes the first batch (timed), then
 * runs the rest of one epoch, reading the process's resident memory from
 * /proc/self/status (RssAnon, RssFile, VmHWM) at each phase and every N batches
 * (default 64) during the epoch, and /proc/self/smaps_rollup at the end of the epoch
 * (before the loader is freed). Prints one JSON object on stdout:
 *   open_s, create_s, first_batch_s (create's return to the first batch), ttfb_s (open's
 *   start to the first batch), epoch_s (create's start to the epoch's end, as hdmlp-bench
 *   counts), samples_per_s (samples / epoch_s), samples_per_s_steady (after the first
 *   batch), rss.{start,open,create,first,end,freed}.{anon,file}_kib, peak_{anon,file}_kib
 *   (the largest sampled values), vm_hwm_kib, smaps_rollup (KiB: Rss, Anonymous,
 *   Private_Clean, Private_Dirty, Shared_Clean, Shared_Dirty) and the loader's stats
 *   (budget, accounted peak, direct I/O, chunk loads, bytes read).
 * --samples M stops after the batch that reaches M samples (of a count too large for a
 * whole epoch here): "samples_taken" says how many, "partial" is true, and the rates count
 * what was taken. Uses only the public header. Exit status: 0, 1 failure, 2 usage.
 */
#include "hdmlp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The value (KiB) of each of `n` fields named in `names` (with their colon) in `path`;
 * -1 for a field that is not there. */
static void proc_fields(const char *path, const char *const *names, long *vals, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        vals[i] = -1;
    }
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return;
    }
    char line[256];
    while (fgets(line, sizeof line, f) != NULL) {
        for (size_t i = 0; i < n; i++) {
            const size_t len = strlen(names[i]);
            if (strncmp(line, names[i], len) == 0) {
                vals[i] = strtol(line + len, NULL, 10);
            }
        }
    }
    fclose(f);
}

enum { ST_ANON, ST_FILE, ST_HWM, ST_N };
static const char *const status_names[ST_N] = {"RssAnon:", "RssFile:", "VmHWM:"};

typedef struct rss {
    long anon, file;
} rss;

static rss rss_now(long *hwm)
{
    long v[ST_N];
    proc_fields("/proc/self/status", status_names, v, ST_N);
    if (hwm != NULL) {
        *hwm = v[ST_HWM];
    }
    return (rss){v[ST_ANON], v[ST_FILE]};
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "bench_scale: %s: %s: %s\n", what, hdmlp_strerror(rc), hdmlp_last_error());
    return 1;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_scale DIR [--memory BYTES] [--batch B] [--threads T] "
                    "[--seed S] [--every N] [--samples M]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    unsigned long long memory = 32ull << 20, seed = 0;
    unsigned long batch = 32, threads = 2, every = 64;
    uint64_t stop = 0; /* --samples: 0 for the whole epoch */
    for (int i = 1; i < argc; i++) {
        const char *const a = argv[i];
        const int more = i + 1 < argc;
        if (strcmp(a, "--memory") == 0 && more) {
            memory = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(a, "--batch") == 0 && more) {
            batch = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(a, "--threads") == 0 && more) {
            threads = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(a, "--seed") == 0 && more) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(a, "--samples") == 0 && more) {
            stop = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(a, "--every") == 0 && more) {
            every = strtoul(argv[++i], NULL, 10);
        } else if (a[0] != '-' && dir == NULL) {
            dir = a;
        } else {
            return usage();
        }
    }
    if (dir == NULL || memory == 0 || batch == 0 || threads == 0 || every == 0) {
        return usage();
    }

    rss r_start = rss_now(NULL), r_open, r_create, r_first, r_end, r_freed;
    hdmlp_dataset *ds = NULL;
    hdmlp_config *cfg = NULL;
    hdmlp_loader *ld = NULL;
    hdmlp_batch *b = NULL;

    const double t0 = now();
    int rc = hdmlp_dataset_open(dir, &ds);
    const double t_open = now();
    if (rc != HDMLP_OK) {
        return fail("open", rc);
    }
    r_open = rss_now(NULL);
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    const unsigned k = hdmlp_dataset_chunk_size(ds);

    rc = hdmlp_config_create(&cfg);
    if (rc == HDMLP_OK) {
        rc = hdmlp_config_set_memory(cfg, memory);
    }
    if (rc == HDMLP_OK) {
        rc = hdmlp_config_set_batch_size(cfg, (uint32_t)batch);
    }
    if (rc == HDMLP_OK) {
        rc = hdmlp_config_set_threads(cfg, (uint32_t)threads);
    }
    if (rc == HDMLP_OK) {
        rc = hdmlp_config_set_seed(cfg, seed);
    }
    if (rc == HDMLP_OK) {
        rc = hdmlp_config_set_epochs(cfg, 1);
    }
    if (rc != HDMLP_OK) {
        return fail("config", rc);
    }

    const double t_c0 = now();
    rc = hdmlp_loader_create(ds, cfg, &ld);
    const double t_c1 = now();
    if (rc != HDMLP_OK) {
        return fail("create", rc);
    }
    r_create = rss_now(NULL);

    uint64_t samples = 0, batches = 0, first_n = 0;
    double t_first = 0;
    rss peak = r_create;
    r_first = r_create;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const size_t got = hdmlp_batch_size(b);
        samples += got;
        hdmlp_batch_release(b);
        if (batches++ == 0) {
            t_first = now();
            first_n = got;
            r_first = rss_now(NULL);
            peak = r_first;
        } else if (batches % every == 0) {
            const rss r = rss_now(NULL);
            peak.anon = r.anon > peak.anon ? r.anon : peak.anon;
            peak.file = r.file > peak.file ? r.file : peak.file;
        }
        if (stop != 0 && samples >= stop) {
            rc = HDMLP_END;
            break;
        }
    }
    const double t_end = now();
    if (rc != HDMLP_END) {
        return fail("next", rc);
    }
    long hwm = -1;
    r_end = rss_now(&hwm);
    peak.anon = r_end.anon > peak.anon ? r_end.anon : peak.anon;
    peak.file = r_end.file > peak.file ? r_end.file : peak.file;
    static const char *const rollup_names[] = {
        "Rss:",           "Anonymous:",    "Private_Clean:",
        "Private_Dirty:", "Shared_Clean:", "Shared_Dirty:"};
    long rollup[6];
    proc_fields("/proc/self/smaps_rollup", rollup_names, rollup, 6);

    hdmlp_stats st;
    memset(&st, 0, sizeof st);
    rc = hdmlp_loader_stats(ld, &st, sizeof st);
    if (rc != HDMLP_OK) {
        return fail("stats", rc);
    }
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    r_freed = rss_now(NULL);
    hdmlp_dataset_close(ds);

    const int partial = stop != 0 && samples < n;
    if (samples != n && !partial) {
        fprintf(stderr, "bench_scale: %" PRIu64 " samples delivered of %" PRIu64 "\n", samples,
                n);
        return 1;
    }
    const double epoch = t_end - t_c0;
    printf("{\"dir\": \"%s\", \"samples\": %" PRIu64 ", \"samples_taken\": %" PRIu64
           ", \"partial\": %s, \"chunk_size\": %u, \"memory\": %llu, "
           "\"batch\": %lu, \"threads\": %lu, \"seed\": %llu, ",
           dir, n, samples, partial ? "true" : "false", k, memory, batch, threads, seed);
    printf("\"open_s\": %.6f, \"create_s\": %.6f, \"first_batch_s\": %.6f, \"ttfb_s\": %.6f, "
           "\"epoch_s\": %.6f, \"samples_per_s\": %.1f, \"samples_per_s_steady\": %.1f, ",
           t_open - t0, t_c1 - t_c0, t_first - t_c1, t_first - t0, epoch,
           (double)samples / epoch,
           t_end > t_first ? (double)(samples - first_n) / (t_end - t_first) : 0.0);
    printf("\"rss\": {");
    const rss *const phase[] = {&r_start, &r_open, &r_create, &r_first, &r_end, &r_freed};
    static const char *const phase_name[] = {"start", "open", "create",
                                             "first", "end",  "freed"};
    for (size_t i = 0; i < 6; i++) {
        printf("%s\"%s\": {\"anon_kib\": %ld, \"file_kib\": %ld}", i ? ", " : "", phase_name[i],
               phase[i]->anon, phase[i]->file);
    }
    printf("}, \"peak_anon_kib\": %ld, \"peak_file_kib\": %ld, \"vm_hwm_kib\": %ld, ",
           peak.anon, peak.file, hwm);
    printf("\"smaps_rollup\": {");
    for (size_t i = 0; i < 6; i++) {
        const size_t len = strlen(rollup_names[i]) - 1;
        printf("%s\"%.*s_kib\": %ld", i ? ", " : "", (int)len, rollup_names[i], rollup[i]);
    }
    printf("}, \"memory_budget\": %" PRIu64 ", \"accounted_peak\": %" PRIu64
           ", \"direct_io\": %" PRIu64 ", \"abstract_chunks\": %" PRIu64
           ", \"chunk_loads\": %" PRIu64 ", \"bytes_read\": %" PRIu64 "}\n",
           st.memory_budget, st.peak_memory_bytes, st.direct_io, st.abstract_chunks,
           st.chunk_loads, st.bytes_read);
    return 0;
}
