/*
 * loader_perfile: the per-file random-read contender of the loader benchmark (the PyTorch
 * ImageFolder access pattern, in C). Reads every file of a list once, in a seeded random
 * order, with a pool of T threads (open, read to the end, close), and prints one JSON object.
 *
 *     loader_perfile --list FILE [--root DIR] [--threads T] [--seed S] [--limit N]
 *
 * FILE holds one path per line, optionally followed by a TAB and anything (a label);
 * relative paths are taken from DIR (default: the list file's directory). --limit reads
 * only the first N files of the shuffled order. Exit 0 ok, 1 read failure, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct job {
    char **paths;
    size_t n;
    atomic_size_t next;
    atomic_uint_fast64_t bytes;
    atomic_uint_fast64_t reads;
    atomic_int failed;
    pthread_mutex_t err_lock;
    char err[512];
} job;

/* splitmix64: the seeded generator of the read order. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fail(job *j, const char *path, int err)
{
    pthread_mutex_lock(&j->err_lock);
    if (!atomic_exchange(&j->failed, 1)) {
        snprintf(j->err, sizeof(j->err), "%s: %s", path, strerror(err));
    }
    pthread_mutex_unlock(&j->err_lock);
}

static void *worker(void *arg)
{
    job *j = arg;
    const size_t cap = 1u << 20;
    char *buf = malloc(cap);
    uint64_t bytes = 0;
    uint64_t reads = 0;

    if (buf == NULL) {
        fail(j, "buffer", ENOMEM);
        return NULL;
    }
    for (;;) {
        const size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n || atomic_load(&j->failed)) {
            break;
        }
        const int fd = open(j->paths[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fail(j, j->paths[i], errno);
            break;
        }
        for (;;) {
            const ssize_t got = read(fd, buf, cap);
            if (got < 0 && errno == EINTR) {
                continue;
            }
            if (got < 0) {
                fail(j, j->paths[i], errno);
                break;
            }
            reads++;
            if (got == 0) {
                break;
            }
            bytes += (uint64_t)got;
        }
        close(fd);
    }
    atomic_fetch_add(&j->bytes, bytes);
    atomic_fetch_add(&j->reads, reads);
    free(buf);
    return NULL;
}

static int usage(const char *msg)
{
    fprintf(stderr,
            "loader_perfile: %s\nusage: loader_perfile --list FILE [--root DIR] [--threads T] "
            "[--seed S] [--limit N]\n",
            msg);
    return 2;
}

static char *join(const char *root, const char *rel)
{
    const size_t a = strlen(root);
    const size_t b = strlen(rel);
    char *p = malloc(a + b + 2);

    if (p != NULL) {
        memcpy(p, root, a);
        p[a] = '/';
        memcpy(p + a + 1, rel, b + 1);
    }
    return p;
}

int main(int argc, char **argv)
{
    const char *list = NULL;
    char *root = NULL;
    unsigned long threads = 2;
    uint64_t seed = 0;
    uint64_t limit = UINT64_MAX;
    job j;

    memset(&j, 0, sizeof(j));
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--help") == 0) {
            puts("usage: loader_perfile --list FILE [--root DIR] [--threads T] [--seed S] "
                 "[--limit N]");
            return 0;
        }
        if (v == NULL) {
            return usage("missing option or value");
        }
        if (strcmp(argv[i], "--list") == 0) {
            list = v;
        } else if (strcmp(argv[i], "--root") == 0) {
            root = strdup(v);
        } else if (strcmp(argv[i], "--threads") == 0) {
            threads = strtoul(v, NULL, 10);
        } else if (strcmp(argv[i], "--seed") == 0) {
            seed = strtoull(v, NULL, 10);
        } else if (strcmp(argv[i], "--limit") == 0) {
            limit = strtoull(v, NULL, 10);
        } else {
            return usage("unknown option");
        }
        i++;
    }
    if (list == NULL || threads < 1 || threads > 256) {
        return usage("need --list FILE and 1 <= T <= 256");
    }
    if (root == NULL) {
        const char *slash = strrchr(list, '/');
        root = slash == NULL ? strdup(".") : strndup(list, (size_t)(slash - list));
    }
    FILE *f = fopen(list, "r");
    if (f == NULL || root == NULL) {
        fprintf(stderr, "loader_perfile: %s: %s\n", list, strerror(errno));
        return 1;
    }
    char *line = NULL;
    size_t line_cap = 0;
    size_t cap = 0;
    ssize_t len = 0;
    while ((len = getline(&line, &line_cap, f)) > 0) {
        line[strcspn(line, "\t\n")] = '\0';
        if (line[0] == '\0') {
            continue;
        }
        if (j.n == cap) {
            cap = cap ? cap * 2 : 1024;
            j.paths = realloc(j.paths, cap * sizeof(*j.paths));
            if (j.paths == NULL) {
                fprintf(stderr, "loader_perfile: out of memory\n");
                return 1;
            }
        }
        j.paths[j.n] = line[0] == '/' ? strdup(line) : join(root, line);
        if (j.paths[j.n] == NULL) {
            fprintf(stderr, "loader_perfile: out of memory\n");
            return 1;
        }
        j.n++;
    }
    free(line);
    fclose(f);

    uint64_t s = seed;
    for (size_t i = j.n; i > 1; i--) {
        const size_t k = (size_t)(splitmix64(&s) % i); /* bias < 2^-40 for n < 2^24 */
        char *t = j.paths[i - 1];
        j.paths[i - 1] = j.paths[k];
        j.paths[k] = t;
    }
    if (limit < j.n) {
        j.n = (size_t)limit;
    }
    pthread_mutex_init(&j.err_lock, NULL);

    struct timespec t0, t1;
    pthread_t *tid = calloc(threads, sizeof(*tid));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long t = 0; t < threads; t++) {
        if (pthread_create(&tid[t], NULL, worker, &j) != 0) {
            fprintf(stderr, "loader_perfile: cannot start thread\n");
            return 1;
        }
    }
    for (unsigned long t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (atomic_load(&j.failed)) {
        fprintf(stderr, "loader_perfile: %s\n", j.err);
        return 1;
    }
    const double sec =
        (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    const uint64_t bytes = atomic_load(&j.bytes);
    printf("{\"samples\": %zu, \"bytes_delivered\": %" PRIu64 ", \"bytes_read\": %" PRIu64
           ", \"read_calls\": %" PRIu64 ", \"seconds\": %.6f, \"samples_per_s\": %.3f"
           ", \"mb_per_s\": %.3f, \"threads\": %lu, \"seed\": %" PRIu64 "}\n",
           j.n, bytes, bytes, (uint64_t)atomic_load(&j.reads), sec, (double)j.n / sec,
           (double)bytes / 1e6 / sec, threads, seed);
    return 0;
}
