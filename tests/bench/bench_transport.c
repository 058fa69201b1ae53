/*
 * The peer transport alone, per same-host path (not a ctest test): two ranks on 127.0.0.1
 * in this process, rank 0 sending SAMPLEs of a fixed size to rank 1, whose handler copies
 * each payload out as the loader does (loader_exchange.c, on_sample). The sender keeps at
 * most --window bytes sent and not yet handled, so no queue overflows. Per path and size:
 * throughput (payload MB/s) and CPU seconds of the process (both ranks, user + sys) per GB
 * of payload, median over --repeats runs; then shm/tcp, socket/tcp and shm/socket ratios.
 *
 *   bench_transport [--paths shm,socket,tcp] [--sizes 4096,65536,1048576]
 *                   [--bytes TOTAL] [--window BYTES] [--repeats N]
 *
 * Defaults: all three paths, sizes 4 KiB, 64 KiB and 1 MiB, 512 MiB per run, window 8 MiB,
 * 3 repeats (paths rotated within each repeat).
 */
#include "hdmlp.h"
#include "loader.h"
#include "rpc_transport.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_SIZES 8
#define MAX_REPEATS 15

typedef struct sink {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t handled; /* payload bytes copied out */
    uint8_t *copy;
    int failed;
} sink;

static void on_msg(void *ctx, const peer_msg *m)
{
    sink *s = ctx;
    if (m->kind == PEER_SAMPLE) {
        memcpy(s->copy, m->data, m->size);
    }
    pthread_mutex_lock(&s->mu);
    s->handled += m->size;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void on_error(void *ctx, uint32_t rank, int code, const char *detail)
{
    sink *s = ctx;
    (void)code;
    fprintf(stderr, "bench_transport: rank %u: %s\n", rank, detail);
    pthread_mutex_lock(&s->mu);
    s->failed = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int path_mode(const char *p)
{
    return strcmp(p, "shm") == 0      ? HDMLP_SAME_HOST_SHM
           : strcmp(p, "socket") == 0 ? HDMLP_SAME_HOST_SOCKET
           : strcmp(p, "tcp") == 0    ? HDMLP_SAME_HOST_TCP
                                      : -1;
}

/* One run: returns 0 with MB/s and CPU s/GB, or -1. */
static int run(int mode, uint64_t size, uint64_t total, uint64_t window, double *mbps,
               double *cpu_gb)
{
    char eps[2][64];
    const char *ptrs[2];
    hdmlp_config *cfg[2] = {NULL, NULL};
    peer_transport *t[2] = {NULL, NULL};
    sink s[2];
    int rc = 0;
    memset(s, 0, sizeof s);
    for (int r = 0; r < 2; r++) {
        pthread_mutex_init(&s[r].mu, NULL);
        pthread_cond_init(&s[r].cv, NULL);
        s[r].copy = malloc(size);
        if (rpc_pick_endpoint("127.0.0.1", eps[r], sizeof eps[r]) != HDMLP_OK) {
            fprintf(stderr, "bench_transport: %s\n", hdmlp_last_error());
            return -1;
        }
        ptrs[r] = eps[r];
    }
    for (int r = 0; r < 2 && rc == 0; r++) {
        hdmlp_config_create(&cfg[r]);
        hdmlp_config_set_rank(cfg[r], (uint32_t)r, 2);
        hdmlp_config_set_peers(cfg[r], ptrs, 2);
        hdmlp_config_set_job_token(cfg[r], 5);
        hdmlp_config_set_same_host(cfg[r], mode);
        const peer_handler h = {&s[r], on_msg, on_error};
        if (rpc_transport_create(cfg[r], &h, &t[r]) != HDMLP_OK) {
            fprintf(stderr, "bench_transport: %s\n", hdmlp_last_error());
            rc = -1;
        }
    }
    uint8_t *data = malloc(size);
    for (uint64_t i = 0; i < size; i++) {
        data[i] = (uint8_t)(i * 31 + 7);
    }
    const uint64_t n = total / size;
    const double c0 = cpu_s(), t0 = now_s();
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        pthread_mutex_lock(&s[1].mu);
        while (!s[1].failed && (i * size) - s[1].handled + size > window &&
               s[1].handled < i * size) {
            pthread_cond_wait(&s[1].cv, &s[1].mu);
        }
        rc = s[1].failed ? -1 : 0;
        pthread_mutex_unlock(&s[1].mu);
        peer_msg m;
        memset(&m, 0, sizeof m);
        m.kind = PEER_SAMPLE;
        m.from = 0;
        m.to = 1;
        m.token = 5;
        m.position = i;
        m.index = i;
        m.data = data;
        m.size = size;
        if (rc == 0 && t[0]->send(t[0], &m) != HDMLP_OK) {
            fprintf(stderr, "bench_transport: send: %s\n", hdmlp_last_error());
            rc = -1;
        }
    }
    pthread_mutex_lock(&s[1].mu);
    while (rc == 0 && !s[1].failed && s[1].handled < n * size) {
        pthread_cond_wait(&s[1].cv, &s[1].mu);
    }
    pthread_mutex_unlock(&s[1].mu);
    const double secs = now_s() - t0, cpu = cpu_s() - c0;
    *mbps = (double)(n * size) / secs / 1e6;
    *cpu_gb = cpu / ((double)(n * size) / 1e9);
    for (int r = 0; r < 2; r++) {
        if (t[r] != NULL) {
            t[r]->destroy(t[r]);
        }
        hdmlp_config_free(cfg[r]);
        free(s[r].copy);
        pthread_cond_destroy(&s[r].cv);
        pthread_mutex_destroy(&s[r].mu);
    }
    free(data);
    return rc;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    const char *paths = "shm,socket,tcp";
    char sizes_arg[256] = "4096,65536,1048576";
    uint64_t total = (uint64_t)512 << 20, window = (uint64_t)8 << 20;
    int repeats = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--paths") == 0) {
            paths = argv[i + 1];
        } else if (strcmp(argv[i], "--sizes") == 0) {
            snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[i + 1]);
        } else if (strcmp(argv[i], "--bytes") == 0) {
            total = strtoull(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--window") == 0) {
            window = strtoull(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--repeats") == 0) {
            repeats = atoi(argv[i + 1]);
        } else {
            fprintf(stderr, "bench_transport: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (repeats < 1 || repeats > MAX_REPEATS || total == 0 || window == 0) {
        fprintf(stderr, "bench_transport: --repeats 1..%d, --bytes and --window > 0\n",
                MAX_REPEATS);
        return 2;
    }
    char names[3][8];
    int modes[3], n_paths = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", paths);
    for (char *tok = strtok(buf, ","); tok != NULL && n_paths < 3; tok = strtok(NULL, ",")) {
        if (path_mode(tok) < 0) {
            fprintf(stderr, "bench_transport: unknown path %s (shm, socket, tcp)\n", tok);
            return 2;
        }
        snprintf(names[n_paths], sizeof names[0], "%s", tok);
        modes[n_paths++] = path_mode(tok);
    }
    uint64_t sizes[MAX_SIZES];
    int n_sizes = 0;
    for (char *tok = strtok(sizes_arg, ","); tok != NULL && n_sizes < MAX_SIZES;
         tok = strtok(NULL, ",")) {
        sizes[n_sizes++] = strtoull(tok, NULL, 10);
        if (sizes[n_sizes - 1] == 0 || sizes[n_sizes - 1] > (64u << 20)) {
            fprintf(stderr, "bench_transport: size %s outside 1..64 MiB\n", tok);
            return 2;
        }
    }
    printf("bench_transport: 2 ranks on 127.0.0.1 in one process, %llu MiB per run, window "
           "%llu KiB, median of %d\n",
           (unsigned long long)(total >> 20), (unsigned long long)(window >> 10), repeats);
    printf("%9s %-6s %9s %11s\n", "size", "path", "MB/s", "CPU s/GB");
    for (int z = 0; z < n_sizes; z++) {
        double mb[3][MAX_REPEATS], cg[3][MAX_REPEATS], med_mb[3], med_cg[3];
        for (int rep = 0; rep < repeats; rep++) {
            for (int k = 0; k < n_paths; k++) {
                const int p = (k + rep) % n_paths;
                if (run(modes[p], sizes[z], total, window, &mb[p][rep], &cg[p][rep]) != 0) {
                    fprintf(stderr, "bench_transport: %s at %llu bytes failed\n", names[p],
                            (unsigned long long)sizes[z]);
                    return 1;
                }
            }
        }
        for (int p = 0; p < n_paths; p++) {
            med_mb[p] = median(mb[p], repeats);
            med_cg[p] = median(cg[p], repeats);
            printf("%9llu %-6s %9.0f %11.3f\n", (unsigned long long)sizes[z], names[p],
                   med_mb[p], med_cg[p]);
        }
        for (int a = 0; a < n_paths; a++) {
            for (int b = 0; b < n_paths; b++) {
                const int wanted =
                    (modes[a] == HDMLP_SAME_HOST_SHM && modes[b] != modes[a]) ||
                    (modes[a] == HDMLP_SAME_HOST_SOCKET && modes[b] == HDMLP_SAME_HOST_TCP);
                if (wanted) {
                    printf("%9llu %s/%s: throughput %.2fx, CPU per GB %.2fx\n",
                           (unsigned long long)sizes[z], names[a], names[b],
                           med_mb[a] / med_mb[b], med_cg[a] / med_cg[b]);
                }
            }
        }
    }
    return 0;
}
