/*
 * hdmlp-bench: iterate over a packed dataset like a training loop and report the loader's
 * throughput and I/O statistics. Uses only the public API (include/hdmlp.h).
 *
 * Exit status: 0 success, 1 runtime failure, 2 usage error.
 */
#include "bench_json.h"
#include "bench_parse.h"

#include <hdmlp.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

typedef struct bench_opts {
    const char *dataset;
    const char *memory_arg; /* as given: bytes or a percentage of the raw bytes */
    uint64_t memory;        /* resolved budget in bytes */
    double memory_pct;      /* > 0 when given as a percentage */
    uint64_t batch;
    uint64_t epochs;
    uint64_t seed;
    uint64_t threads;
    hdmlp_engine engine;
    hdmlp_policy policy;
    hdmlp_refill refill;
    int direct;
    uint64_t lookahead;
    double op_us;     /* < 0: library default */
    double bandwidth; /* < 0: library default */
    double compute_ms;
    int drop_last;
    const char *ids_path;
    int json;
    int quiet;
} bench_opts;

/* What the training loop saw, independent of the loader's own counters. */
typedef struct bench_result {
    double seconds;        /* loader creation to HDMLP_END */
    double create_seconds; /* hdmlp_loader_create alone */
    double *epoch_seconds; /* per epoch, opts.epochs entries */
    uint64_t samples;
    uint64_t batches;
    uint64_t bytes;
    uint64_t peak_rss_bytes;
} bench_result;

static const char *const engine_names[] = {"auto", "pread", "io_uring"};
static const char *const policy_names[] = {"fill-rate", "random"};
static const char *const refill_names[] = {"auto", "whole", "ranges"};

static void usage(FILE *f)
{
    fputs(
        "usage: hdmlp-bench DATASET --memory SIZE [options]\n"
        "\n"
        "Iterates over the packed dataset DATASET like a training loop (each epoch a fresh\n"
        "random order, each sample once) and reports throughput and I/O statistics.\n"
        "\n"
        "  --memory SIZE        loader memory budget (required); SIZE is bytes with an\n"
        "                       optional suffix K/M/G/T (x1024; also KiB..), KB/MB/GB/TB\n"
        "                       (x1000), or P% of the dataset's raw bytes (e.g. 25%)\n"
        "  --batch B            samples per batch (default 32)\n"
        "  --epochs E           epochs to run, >= 1 (default 1)\n"
        "  --seed S             seed of the delivery order (default 0)\n"
        "  --threads T          I/O worker threads, 1..64 (default 2)\n"
        "  --engine E           auto | pread | io_uring (default auto)\n"
        "  --policy P           fill-rate | random (default fill-rate)\n"
        "  --refill R           whole | ranges | auto (default auto)\n"
        "  --direct             read segments with O_DIRECT\n"
        "  --lookahead N        most requests planned ahead; 0 = as memory allows (default)\n"
        "  --op-us US           storage cost model: microseconds per read operation\n"
        "  --bandwidth RATE     storage cost model: bytes per second (SIZE suffixes apply)\n"
        "  --compute-ms MS      simulated compute per batch (sleep), default 0\n"
        "  --drop-last          drop each epoch's last short batch\n"
        "  --ids FILE           write each epoch's delivered sample indices to FILE: one line\n"
        "                       per epoch, space-separated, in delivery order\n"
        "  --json               print the statistics as one JSON object on stdout\n"
        "  --quiet              print nothing but errors (and the JSON object with --json)\n"
        "  -h, --help           show this help;  -V, --version  show the version\n"
        "\n"
        "Exit status: 0 success, 1 runtime failure, 2 usage error.\n",
        f);
}

static int usage_error(const char *fmt, const char *arg)
{
    fputs("hdmlp-bench: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'hdmlp-bench --help'.\n", stderr);
    return EXIT_USAGE;
}

static int runtime_error(const char *what, int rc)
{
    const char *detail = hdmlp_last_error();
    fprintf(stderr, "hdmlp-bench: %s: %s%s%s\n", what, hdmlp_strerror(rc),
            detail[0] != '\0' ? ": " : "", detail);
    return EXIT_RUNTIME;
}

static int pick(const char *arg, const char *const *names, size_t n, int *out)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(arg, names[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    }
    return -1;
}

enum {
    OPT_MEMORY = 256,
    OPT_BATCH,
    OPT_EPOCHS,
    OPT_SEED,
    OPT_THREADS,
    OPT_ENGINE,
    OPT_POLICY,
    OPT_REFILL,
    OPT_DIRECT,
    OPT_LOOKAHEAD,
    OPT_OP_US,
    OPT_BANDWIDTH,
    OPT_COMPUTE_MS,
    OPT_DROP_LAST,
    OPT_IDS,
    OPT_JSON,
    OPT_QUIET
};

/* Returns -1 to continue, else the exit status (help, version, usage error). */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    static const struct option longopts[] = {
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"epochs", required_argument, NULL, OPT_EPOCHS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"engine", required_argument, NULL, OPT_ENGINE},
        {"policy", required_argument, NULL, OPT_POLICY},
        {"refill", required_argument, NULL, OPT_REFILL},
        {"direct", no_argument, NULL, OPT_DIRECT},
        {"lookahead", required_argument, NULL, OPT_LOOKAHEAD},
        {"op-us", required_argument, NULL, OPT_OP_US},
        {"bandwidth", required_argument, NULL, OPT_BANDWIDTH},
        {"compute-ms", required_argument, NULL, OPT_COMPUTE_MS},
        {"drop-last", no_argument, NULL, OPT_DROP_LAST},
        {"ids", required_argument, NULL, OPT_IDS},
        {"json", no_argument, NULL, OPT_JSON},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c = 0;
    int choice = 0;
    int percent = 0;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_MEMORY:
            o->memory_arg = optarg;
            if (bench_parse_size(optarg, 1, &o->memory, &percent, &o->memory_pct) != 0) {
                return usage_error("--memory: invalid size '%s'", optarg);
            }
            if (!percent) {
                o->memory_pct = 0;
            }
            break;
        case OPT_BATCH:
            if (bench_parse_u64(optarg, &o->batch) != 0) {
                return usage_error("--batch: invalid number '%s'", optarg);
            }
            break;
        case OPT_EPOCHS:
            if (bench_parse_u64(optarg, &o->epochs) != 0 || o->epochs == 0) {
                return usage_error("--epochs: expected a number >= 1, got '%s'", optarg);
            }
            break;
        case OPT_SEED:
            if (bench_parse_u64(optarg, &o->seed) != 0) {
                return usage_error("--seed: invalid number '%s'", optarg);
            }
            break;
        case OPT_THREADS:
            if (bench_parse_u64(optarg, &o->threads) != 0) {
                return usage_error("--threads: invalid number '%s'", optarg);
            }
            break;
        case OPT_ENGINE:
            if (pick(optarg, engine_names, 3, &choice) != 0) {
                return usage_error("--engine: expected auto, pread or io_uring, got '%s'",
                                   optarg);
            }
            o->engine = (hdmlp_engine)choice;
            break;
        case OPT_POLICY:
            if (pick(optarg, policy_names, 2, &choice) != 0) {
                return usage_error("--policy: expected fill-rate or random, got '%s'", optarg);
            }
            o->policy = (hdmlp_policy)choice;
            break;
        case OPT_REFILL:
            if (pick(optarg, refill_names, 3, &choice) != 0) {
                return usage_error("--refill: expected whole, ranges or auto, got '%s'",
                                   optarg);
            }
            o->refill = (hdmlp_refill)choice;
            break;
        case OPT_DIRECT:
            o->direct = 1;
            break;
        case OPT_LOOKAHEAD:
            if (bench_parse_u64(optarg, &o->lookahead) != 0) {
                return usage_error("--lookahead: invalid number '%s'", optarg);
            }
            break;
        case OPT_OP_US:
            if (bench_parse_double(optarg, &o->op_us) != 0) {
                return usage_error("--op-us: invalid number '%s'", optarg);
            }
            break;
        case OPT_BANDWIDTH: {
            uint64_t bw = 0;
            double unused = 0;
            if (bench_parse_size(optarg, 0, &bw, &percent, &unused) != 0 || bw == 0) {
                return usage_error("--bandwidth: expected bytes per second > 0, got '%s'",
                                   optarg);
            }
            o->bandwidth = (double)bw;
            break;
        }
        case OPT_COMPUTE_MS:
            if (bench_parse_double(optarg, &o->compute_ms) != 0) {
                return usage_error("--compute-ms: invalid number '%s'", optarg);
            }
            break;
        case OPT_DROP_LAST:
            o->drop_last = 1;
            break;
        case OPT_IDS:
            o->ids_path = optarg;
            break;
        case OPT_JSON:
            o->json = 1;
            break;
        case OPT_QUIET:
            o->quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("hdmlp-bench %s\n", hdmlp_version_string());
            return 0;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) {
        return usage_error("%s", "missing DATASET");
    }
    if (optind + 1 < argc) {
        return usage_error("unexpected argument '%s'", argv[optind + 1]);
    }
    o->dataset = argv[optind];
    if (o->memory_arg == NULL) {
        return usage_error("%s", "missing --memory SIZE");
    }
    return -1;
}

/* Applies the options to cfg; a rejected value is a usage error naming the option. */
static int configure(const bench_opts *o, hdmlp_config *cfg)
{
    static const char *const names[] = {"--memory", "--batch",     "--epochs",
                                        "--seed",   "--threads",   "--engine",
                                        "--direct", "--lookahead", "--policy",
                                        "--refill", "--drop-last", "--op-us/--bandwidth"};
    double op_us = o->op_us >= 0 ? o->op_us : 100.0;
    double bandwidth = o->bandwidth > 0 ? o->bandwidth : 1e9;
    int rc[12];

    rc[0] = hdmlp_config_set_memory(cfg, o->memory);
    rc[1] = o->batch > UINT32_MAX ? HDMLP_E_INVAL
                                  : hdmlp_config_set_batch_size(cfg, (uint32_t)o->batch);
    rc[2] = hdmlp_config_set_epochs(cfg, o->epochs);
    rc[3] = hdmlp_config_set_seed(cfg, o->seed);
    rc[4] = o->threads > UINT32_MAX ? HDMLP_E_INVAL
                                    : hdmlp_config_set_threads(cfg, (uint32_t)o->threads);
    rc[5] = hdmlp_config_set_engine(cfg, o->engine);
    rc[6] = hdmlp_config_set_direct_io(cfg, o->direct);
    rc[7] = hdmlp_config_set_lookahead(cfg, o->lookahead);
    rc[8] = hdmlp_config_set_policy(cfg, o->policy);
    rc[9] = hdmlp_config_set_refill(cfg, o->refill);
    rc[10] = hdmlp_config_set_drop_last(cfg, o->drop_last);
    rc[11] = (o->op_us >= 0 || o->bandwidth > 0)
                 ? hdmlp_config_set_storage_cost(cfg, op_us, bandwidth)
                 : HDMLP_OK;
    for (int i = 0; i < 12; i++) {
        if (rc[i] != HDMLP_OK) {
            const char *detail = hdmlp_last_error();
            fprintf(stderr, "hdmlp-bench: %s: %s%s%s\nTry 'hdmlp-bench --help'.\n", names[i],
                    hdmlp_strerror(rc[i]), detail[0] != '\0' ? ": " : "", detail);
            return EXIT_USAGE;
        }
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(double ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000.0) * 1e6);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Writes v and a separator (space, or nothing for the first index of a line). */
static void put_index(FILE *f, uint64_t v, int first)
{
    char buf[24];
    size_t n = sizeof(buf);

    do {
        buf[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    if (!first) {
        buf[--n] = ' ';
    }
    fwrite(buf + n, 1, sizeof(buf) - n, f);
}

/* The training loop. Returns 0 or an exit status. */
static int run(const bench_opts *o, hdmlp_dataset *ds, bench_result *r, hdmlp_stats *st)
{
    hdmlp_config *cfg = NULL;
    hdmlp_loader *ld = NULL;
    hdmlp_batch *batch = NULL;
    FILE *ids = NULL;
    uint64_t cur_epoch = 0;
    uint64_t lines_open = 0; /* epochs whose line was started or finished in the ids file */
    int line_empty = 1;
    int status = 0;
    int rc = hdmlp_config_create(&cfg);

    if (rc != HDMLP_OK) {
        return runtime_error("config", rc);
    }
    status = configure(o, cfg);
    if (status != 0) {
        hdmlp_config_free(cfg);
        return status;
    }
    if (o->ids_path != NULL) {
        ids = fopen(o->ids_path, "w");
        if (ids == NULL) {
            fprintf(stderr, "hdmlp-bench: --ids: cannot create '%s': %s\n", o->ids_path,
                    strerror(errno));
            hdmlp_config_free(cfg);
            return EXIT_RUNTIME;
        }
        setvbuf(ids, NULL, _IOFBF, 1 << 20);
    }

    const double t0 = now_s();
    rc = hdmlp_loader_create(ds, cfg, &ld);
    hdmlp_config_free(cfg);
    r->create_seconds = now_s() - t0;
    if (rc != HDMLP_OK) {
        if (ids != NULL) {
            fclose(ids);
        }
        return runtime_error("cannot create loader", rc);
    }
    double t_epoch = t0;
    double t_last = t0;
    while ((rc = hdmlp_loader_next(ld, &batch)) == HDMLP_OK) {
        const size_t n = hdmlp_batch_size(batch);
        const hdmlp_sample_view *v = hdmlp_batch_samples(batch);
        const uint64_t e = hdmlp_batch_epoch(batch);

        if (e != cur_epoch) {
            if (e < cur_epoch || e >= o->epochs) {
                fprintf(stderr,
                        "hdmlp-bench: loader bug: batch of epoch %" PRIu64
                        " after epoch %" PRIu64 " of %" PRIu64 "\n",
                        e, cur_epoch, o->epochs);
                status = EXIT_RUNTIME;
                hdmlp_batch_release(batch);
                break;
            }
            /* Epochs cur..e-1 ended with the previous batch. */
            r->epoch_seconds[cur_epoch] = t_last - t_epoch;
            t_epoch = t_last;
            cur_epoch = e;
        }
        for (size_t i = 0; i < n; i++) {
            r->bytes += v[i].size;
        }
        if (ids != NULL) {
            while (lines_open < e + 1) {
                if (lines_open > 0) {
                    fputc('\n', ids);
                }
                lines_open++;
                line_empty = 1;
            }
            for (size_t i = 0; i < n; i++) {
                put_index(ids, v[i].index, line_empty);
                line_empty = 0;
            }
        }
        r->samples += n;
        r->batches++;
        hdmlp_batch_release(batch);
        if (o->compute_ms > 0) {
            sleep_ms(o->compute_ms);
        }
        t_last = now_s();
        if (!o->quiet && !o->json && isatty(STDERR_FILENO) && (r->batches & 255) == 0) {
            fprintf(stderr, "\repoch %" PRIu64 ": %" PRIu64 " samples, %.1f s", e, r->samples,
                    t_last - t0);
        }
    }
    const double t_end = now_s();
    r->seconds = t_end - t0;
    if (status == 0 && rc != HDMLP_END) {
        status = runtime_error("loading failed", rc);
    }
    if (status == 0) {
        r->epoch_seconds[cur_epoch] = t_end - t_epoch;
    }
    if (!o->quiet && !o->json && isatty(STDERR_FILENO) && r->batches >= 256) {
        fputc('\n', stderr);
    }
    if (ids != NULL) {
        while (status == 0 && lines_open < o->epochs) {
            if (lines_open > 0) {
                fputc('\n', ids);
            }
            lines_open++;
        }
        if (lines_open > 0) {
            fputc('\n', ids);
        }
        if (fclose(ids) != 0 && status == 0) {
            fprintf(stderr, "hdmlp-bench: --ids: cannot write '%s': %s\n", o->ids_path,
                    strerror(errno));
            status = EXIT_RUNTIME;
        }
    }
    if (status == 0) {
        rc = hdmlp_loader_stats(ld, st);
        if (rc != HDMLP_OK) {
            status = runtime_error("stats", rc);
        }
    }
    hdmlp_loader_free(ld);

    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        r->peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024u;
    }
    return status;
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

typedef struct derived {
    double samples_per_s;
    double mb_per_s;
    double read_amplification;
    double loads_per_chunk;
    double ops_per_sample;
    double seconds_per_epoch;
} derived;

static derived derive(const hdmlp_stats *st, const bench_result *r, uint64_t chunks)
{
    derived d;
    const double epochs = st->epochs > 0 ? (double)st->epochs : 1.0;

    d.samples_per_s = ratio((double)st->samples, r->seconds);
    d.mb_per_s = ratio((double)st->bytes_delivered, r->seconds) / 1e6;
    d.read_amplification = ratio((double)st->bytes_read, (double)st->bytes_delivered);
    d.loads_per_chunk = ratio((double)st->chunk_loads, (double)chunks * epochs);
    d.ops_per_sample = ratio((double)st->read_ops, (double)st->samples);
    d.seconds_per_epoch = r->seconds / epochs;
    return d;
}

static void print_json(const bench_opts *o, hdmlp_dataset *ds, const hdmlp_stats *st,
                       const bench_result *r)
{
    const uint64_t chunks = hdmlp_dataset_chunk_count(ds);
    const derived d = derive(st, r, chunks);
    bench_json j;

    bench_json_begin(&j, stdout);
    bench_json_u64(&j, "samples", st->samples);
    bench_json_u64(&j, "batches", st->batches);
    bench_json_u64(&j, "epochs", st->epochs);
    bench_json_double(&j, "seconds", r->seconds);
    bench_json_double_array(&j, "epoch_seconds", r->epoch_seconds, (size_t)o->epochs);
    bench_json_double(&j, "seconds_per_epoch", d.seconds_per_epoch);
    bench_json_double(&j, "create_seconds", r->create_seconds);
    bench_json_u64(&j, "requests", st->requests);
    bench_json_u64(&j, "hits", st->hits);
    bench_json_u64(&j, "misses", st->misses);
    bench_json_u64(&j, "chunk_loads", st->chunk_loads);
    bench_json_u64(&j, "read_ops", st->read_ops);
    bench_json_u64(&j, "bytes_read", st->bytes_read);
    bench_json_u64(&j, "bytes_delivered", st->bytes_delivered);
    bench_json_u64(&j, "stored_bytes_delivered", st->stored_bytes_delivered);
    bench_json_u64(&j, "samples_filled", st->samples_filled);
    bench_json_u64(&j, "whole_refills", st->whole_refills);
    bench_json_u64(&j, "ranged_refills", st->ranged_refills);
    bench_json_u64(&j, "peak_memory_bytes", st->peak_memory_bytes);
    bench_json_u64(&j, "memory_budget", st->memory_budget);
    bench_json_u64(&j, "stall_ns", st->stall_ns);
    bench_json_u64_array(&j, "fill_hist", st->fill_hist, 11);
    bench_json_u64(&j, "abstract_chunks", st->abstract_chunks);
    bench_json_u64(&j, "chunk_groups", st->chunk_groups);
    bench_json_double(&j, "samples_per_s", d.samples_per_s);
    bench_json_double(&j, "mb_per_s", d.mb_per_s);
    bench_json_double(&j, "read_amplification", d.read_amplification);
    bench_json_double(&j, "loads_per_chunk", d.loads_per_chunk);
    bench_json_double(&j, "ops_per_sample", d.ops_per_sample);
    bench_json_double(&j, "stall_seconds", (double)st->stall_ns * 1e-9);
    bench_json_u64(&j, "peak_rss_bytes", r->peak_rss_bytes);
    bench_json_u64(&j, "consumer_samples", r->samples);
    bench_json_u64(&j, "consumer_bytes", r->bytes);

    bench_json_object(&j, "dataset");
    bench_json_string(&j, "path", o->dataset);
    bench_json_u64(&j, "samples", hdmlp_dataset_sample_count(ds));
    bench_json_u64(&j, "chunk_size", hdmlp_dataset_chunk_size(ds));
    bench_json_u64(&j, "chunks", chunks);
    bench_json_u64(&j, "segments", hdmlp_dataset_segment_count(ds));
    bench_json_u64(&j, "raw_bytes", hdmlp_dataset_raw_bytes(ds));
    bench_json_u64(&j, "stored_bytes", hdmlp_dataset_stored_bytes(ds));
    bench_json_end(&j);

    bench_json_object(&j, "config");
    bench_json_string(&j, "memory", o->memory_arg);
    bench_json_u64(&j, "memory_bytes", o->memory);
    bench_json_u64(&j, "batch", o->batch);
    bench_json_u64(&j, "epochs", o->epochs);
    bench_json_u64(&j, "seed", o->seed);
    bench_json_u64(&j, "threads", o->threads);
    bench_json_string(&j, "engine", engine_names[o->engine]);
    bench_json_string(&j, "policy", policy_names[o->policy]);
    bench_json_string(&j, "refill", refill_names[o->refill]);
    bench_json_bool(&j, "direct", o->direct);
    bench_json_u64(&j, "lookahead", o->lookahead);
    bench_json_double(&j, "op_us", o->op_us >= 0 ? o->op_us : 100.0);
    bench_json_double(&j, "bandwidth", o->bandwidth > 0 ? o->bandwidth : 1e9);
    bench_json_double(&j, "compute_ms", o->compute_ms);
    bench_json_bool(&j, "drop_last", o->drop_last);
    bench_json_end(&j);
    bench_json_end(&j);
}

/* Human-readable byte count, 1024-based. */
static const char *human(double bytes, char *buf, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;

    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, cap, u == 0 ? "%.0f %s" : "%.2f %s", bytes, unit[u]);
    return buf;
}

static void print_text(const bench_opts *o, hdmlp_dataset *ds, const hdmlp_stats *st,
                       const bench_result *r)
{
    const uint64_t chunks = hdmlp_dataset_chunk_count(ds);
    const derived d = derive(st, r, chunks);
    char b1[32];
    char b2[32];
    char b3[32];

    printf("dataset    %s: %" PRIu64 " samples, %" PRIu32 " per chunk, %" PRIu64
           " chunks, %s raw\n",
           o->dataset, hdmlp_dataset_sample_count(ds), hdmlp_dataset_chunk_size(ds), chunks,
           human((double)hdmlp_dataset_raw_bytes(ds), b1, sizeof(b1)));
    printf("config     memory %s (%s), batch %" PRIu64 ", epochs %" PRIu64 ", seed %" PRIu64
           ", threads %" PRIu64 ", engine %s, policy %s, refill %s%s\n",
           human((double)o->memory, b1, sizeof(b1)), o->memory_arg, o->batch, o->epochs,
           o->seed, o->threads, engine_names[o->engine], policy_names[o->policy],
           refill_names[o->refill], o->direct ? ", O_DIRECT" : "");
    printf("throughput %" PRIu64 " samples in %.3f s: %.1f samples/s, %.1f MB/s delivered\n",
           st->samples, r->seconds, d.samples_per_s, d.mb_per_s);
    printf("epochs     %" PRIu64 ", %.3f s per epoch\n", st->epochs, d.seconds_per_epoch);
    printf("requests   %" PRIu64 ": %" PRIu64 " hits, %" PRIu64 " misses\n", st->requests,
           st->hits, st->misses);
    printf("loads      %" PRIu64 " chunk loads (%.2f per chunk per epoch; %" PRIu64
           " whole, %" PRIu64 " ranged), %" PRIu64 " read ops (%.3f per sample)\n",
           st->chunk_loads, d.loads_per_chunk, st->whole_refills, st->ranged_refills,
           st->read_ops, d.ops_per_sample);
    printf("bytes      %s read, %s delivered: read amplification %.2f\n",
           human((double)st->bytes_read, b1, sizeof(b1)),
           human((double)st->bytes_delivered, b2, sizeof(b2)), d.read_amplification);
    printf("fill rate ");
    for (int i = 0; i < 11; i++) {
        printf(" %" PRIu64, st->fill_hist[i]);
    }
    printf("  (refills per tenth, 0-10%% .. 100%%)\n");
    printf("stall      %.3f s waiting for data (%.0f%% of the run)\n",
           (double)st->stall_ns * 1e-9, 100.0 * ratio((double)st->stall_ns * 1e-9, r->seconds));
    printf("memory     peak %s accounted of %s budget, %" PRIu64
           " abstract chunks; peak RSS %s\n",
           human((double)st->peak_memory_bytes, b1, sizeof(b1)),
           human((double)st->memory_budget, b2, sizeof(b2)), st->abstract_chunks,
           human((double)r->peak_rss_bytes, b3, sizeof(b3)));
}

int main(int argc, char **argv)
{
    bench_opts o = {
        .batch = 32,
        .epochs = 1,
        .threads = 2,
        .engine = HDMLP_ENGINE_AUTO,
        .policy = HDMLP_POLICY_FILL_RATE,
        .refill = HDMLP_REFILL_AUTO,
        .op_us = -1,
        .bandwidth = -1,
    };
    bench_result r = {0};
    hdmlp_stats st;
    hdmlp_dataset *ds = NULL;
    int status = parse_args(argc, argv, &o);

    memset(&st, 0, sizeof(st));
    if (status >= 0) {
        return status;
    }
    int rc = hdmlp_dataset_open(o.dataset, &ds);
    if (rc != HDMLP_OK) {
        fprintf(stderr, "hdmlp-bench: cannot open dataset '%s': %s%s%s\n", o.dataset,
                hdmlp_strerror(rc), hdmlp_last_error()[0] != '\0' ? ": " : "",
                hdmlp_last_error());
        return EXIT_RUNTIME;
    }
    if (o.memory_pct > 0) {
        o.memory = (uint64_t)((double)hdmlp_dataset_raw_bytes(ds) * o.memory_pct / 100.0);
    }
    if (o.epochs <= SIZE_MAX / sizeof(double)) {
        r.epoch_seconds = calloc((size_t)o.epochs, sizeof(double));
    }
    if (r.epoch_seconds == NULL) {
        fprintf(stderr, "hdmlp-bench: out of memory\n");
        hdmlp_dataset_close(ds);
        return EXIT_RUNTIME;
    }

    status = run(&o, ds, &r, &st);
    if (status == 0 && o.json) {
        print_json(&o, ds, &st, &r);
    } else if (status == 0 && !o.quiet) {
        print_text(&o, ds, &st, &r);
    }
    if (status == 0 && (st.samples != r.samples || st.bytes_delivered != r.bytes)) {
        fprintf(stderr,
                "hdmlp-bench: warning: stats say %" PRIu64 " samples / %" PRIu64
                " bytes delivered, the loop received %" PRIu64 " / %" PRIu64 "\n",
                st.samples, st.bytes_delivered, r.samples, r.bytes);
    }
    hdmlp_dataset_close(ds);
    free(r.epoch_seconds);
    return status;
}
