/*
 * hdmlp-bench: iterate over a packed dataset like a training loop and report the loader's
 * throughput and I/O statistics, on one rank or on several (under mpirun with --mpi, or
 * with a peer list); or print the forecast of a configuration (--plan). Uses only the
 * public API (include/hdmlp.h).
 *
 * Exit status: 0 success, 1 runtime failure, 2 usage error.
 */
#include "bench_args.h"
#include "bench_dist.h"
#include "bench_random.h"
#include "bench_report.h"
#include "loader_units.h"

#include <hdmlp.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* "rank R: " in every message once the world has more than one rank. */
static char rank_prefix[32];

static int runtime_error(const char *what, int rc)
{
    const char *detail = hdmlp_last_error();
    fprintf(stderr, "hdmlp-bench: %s%s: %s (%s)%s%s\n", rank_prefix, what, hdmlp_err_name(rc),
            hdmlp_strerror(rc), detail[0] != '\0' ? ": " : "", detail);
    return BENCH_EXIT_RUNTIME;
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

/* The --ids file of one rank: one line per delivered epoch (start_epoch first). */
typedef struct ids_file {
    FILE *f;
    char *path;
    uint64_t lines; /* lines started */
    int line_empty;
} ids_file;

static int ids_open(const bench_opts *o, uint32_t rank, uint32_t world, ids_file *ids)
{
    memset(ids, 0, sizeof(*ids));
    if (o->ids_path == NULL) {
        return 0;
    }
    const size_t cap = strlen(o->ids_path) + 16;
    ids->path = malloc(cap);
    if (ids->path == NULL) {
        fprintf(stderr, "hdmlp-bench: out of memory\n");
        return BENCH_EXIT_RUNTIME;
    }
    if (world > 1) {
        snprintf(ids->path, cap, "%s.%" PRIu32, o->ids_path, rank);
    } else {
        snprintf(ids->path, cap, "%s", o->ids_path);
    }
    ids->f = fopen(ids->path, "w");
    if (ids->f == NULL) {
        fprintf(stderr, "hdmlp-bench: %s--ids: cannot create '%s': %s\n", rank_prefix,
                ids->path, strerror(errno));
        free(ids->path);
        ids->path = NULL;
        return BENCH_EXIT_RUNTIME;
    }
    setvbuf(ids->f, NULL, _IOFBF, 1 << 20);
    return 0;
}

/* Starts lines up to the one of relative epoch `line`. */
static void ids_line(ids_file *ids, uint64_t line)
{
    while (ids->lines < line + 1) {
        if (ids->lines > 0) {
            fputc('\n', ids->f);
        }
        ids->lines++;
        ids->line_empty = 1;
    }
}

static int ids_close(ids_file *ids, uint64_t span, int ok)
{
    int status = 0;
    if (ids->f == NULL) {
        return 0;
    }
    if (ok && span > 0) {
        ids_line(ids, span - 1);
    }
    if (ids->lines > 0) {
        fputc('\n', ids->f);
    }
    if (fclose(ids->f) != 0 && ok) {
        fprintf(stderr, "hdmlp-bench: %s--ids: cannot write '%s': %s\n", rank_prefix, ids->path,
                strerror(errno));
        status = BENCH_EXIT_RUNTIME;
    }
    free(ids->path);
    memset(ids, 0, sizeof(*ids));
    return status;
}

/* --state FILE of this rank: FILE, or FILE.<rank> when world > 1. */
static void state_path(const bench_opts *o, uint32_t rank, uint32_t world, char *buf,
                       size_t cap)
{
    if (world > 1) {
        snprintf(buf, cap, "%s.%" PRIu32, o->state_file, rank);
    } else {
        snprintf(buf, cap, "%s", o->state_file);
    }
}

/* Resumes from the --state file when it exists. Returns 0 or an exit status. */
static int load_state(const bench_opts *o, hdmlp_config *cfg, uint32_t world, bench_rank *r)
{
    char path[4096];
    state_path(o, r->rank, world, path, sizeof(path));
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        if (errno == ENOENT) {
            return 0; /* nothing saved yet: start from the beginning */
        }
        fprintf(stderr, "hdmlp-bench: %s--state: cannot read '%s': %s\n", rank_prefix, path,
                strerror(errno));
        return BENCH_EXIT_RUNTIME;
    }
    uint8_t buf[HDMLP_STATE_MAX];
    const size_t len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    int rc = hdmlp_config_set_resume(cfg, buf, len);
    if (rc == HDMLP_OK) {
        rc = hdmlp_state_position(buf, len, &r->resume_epoch, NULL);
    }
    if (rc != HDMLP_OK) {
        fprintf(stderr, "hdmlp-bench: %s--state '%s': %s\n", rank_prefix, path,
                hdmlp_last_error());
        return BENCH_EXIT_RUNTIME;
    }
    r->resumed = 1;
    return 0;
}

/* Writes the loader's position to the --state file (atomically: temp + rename). */
static int save_state(const bench_opts *o, hdmlp_loader *ld, uint32_t world, uint32_t rank)
{
    char path[4096], tmp[4200];
    state_path(o, rank, world, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    uint8_t buf[HDMLP_STATE_MAX];
    size_t len = 0;
    int rc = hdmlp_loader_save_state(ld, buf, sizeof(buf), &len);
    if (rc != HDMLP_OK) {
        return runtime_error("cannot save the state", rc);
    }
    FILE *f = fopen(tmp, "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
        fprintf(stderr, "hdmlp-bench: %s--state: cannot write '%s': %s\n", rank_prefix, path,
                strerror(errno));
        return BENCH_EXIT_RUNTIME;
    }
    return 0;
}

/* The training loop over a loader made from cfg. Fills r; returns 0 or an exit status. */
static int run(const bench_opts *o, hdmlp_dataset *ds, const hdmlp_config *cfg, bench_rank *r)
{
    const uint64_t span = bench_span(o);
    const uint32_t world = hdmlp_config_world(cfg);
    hdmlp_loader *ld = NULL;
    hdmlp_batch *batch = NULL;
    bench_random *rnd = NULL;
    ids_file ids;
    uint64_t cur_epoch = r->resumed ? r->resume_epoch : o->start_epoch;
    uint64_t batches = 0;
    int status = ids_open(o, r->rank, world, &ids);

    if (status != 0) {
        return status;
    }
    if (!o->no_randomness) {
        rnd = bench_random_create(hdmlp_dataset_sample_count(ds), hdmlp_dataset_chunk_size(ds));
        if (rnd == NULL) {
            fprintf(stderr, "hdmlp-bench: %sno memory for the randomness figures: skipped\n",
                    rank_prefix);
        }
    }
    const double t0 = now_s();
    int rc = hdmlp_loader_create(ds, cfg, &ld);
    r->create_seconds = now_s() - t0;
    if (rc != HDMLP_OK) {
        bench_random_free(rnd);
        ids_close(&ids, span, 0);
        return runtime_error("cannot create loader", rc);
    }
    hdmlp_stats created;
    if (hdmlp_loader_stats(ld, &created, sizeof created) == HDMLP_OK &&
        created.memory_budget > created.memory_configured) {
        fprintf(stderr,
                "hdmlp-bench: %s--memory %s (%" PRIu64
                " bytes) is less than this dataset needs "
                "with this configuration: raised to %" PRIu64 " bytes, the least that works\n",
                rank_prefix, o->memory_arg, created.memory_configured, created.memory_budget);
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
                        "hdmlp-bench: %sloader bug: batch of epoch %" PRIu64
                        " after epoch %" PRIu64 " of %" PRIu64 "\n",
                        rank_prefix, e, cur_epoch, o->epochs);
                status = BENCH_EXIT_RUNTIME;
                hdmlp_batch_release(batch);
                break;
            }
            /* Epochs cur..e-1 ended with the previous batch. */
            r->epoch_seconds[cur_epoch - o->start_epoch] = t_last - t_epoch;
            t_epoch = t_last;
            cur_epoch = e;
        }
        for (size_t i = 0; i < n; i++) {
            r->consumer_bytes += v[i].size;
        }
        if (ids.f != NULL) {
            ids_line(&ids, e - o->start_epoch);
            for (size_t i = 0; i < n; i++) {
                put_index(ids.f, v[i].index, ids.line_empty);
                ids.line_empty = 0;
            }
        }
        for (size_t i = 0; rnd != NULL && i < n; i++) {
            bench_random_add(rnd, e, v[i].index);
        }
        r->consumer_samples += n;
        batches++;
        hdmlp_batch_release(batch);
        if (o->compute_ms > 0) {
            sleep_ms(o->compute_ms);
        }
        t_last = now_s();
        if (o->resume_after > 0 && batches == o->resume_after) {
            status = save_state(o, ld, world, r->rank);
            r->stopped = status == 0;
            rc = HDMLP_END; /* stop here, as if killed after saving */
            break;
        }
        if (!o->quiet && !o->json && isatty(STDERR_FILENO) && (batches & 255) == 0) {
            fprintf(stderr, "\r%sepoch %" PRIu64 ": %" PRIu64 " samples, %.1f s", rank_prefix,
                    e, r->consumer_samples, t_last - t0);
        }
    }
    const double t_end = now_s();
    r->seconds = t_end - t0;
    if (status == 0 && rc != HDMLP_END) {
        status = runtime_error("loading failed", rc);
    }
    if (status == 0) {
        r->epoch_seconds[cur_epoch - o->start_epoch] = t_end - t_epoch;
    }
    if (!o->quiet && !o->json && isatty(STDERR_FILENO) && batches >= 256) {
        fputc('\n', stderr);
    }
    const int ids_status = ids_close(&ids, span, status == 0);
    status = status != 0 ? status : ids_status;
    if (rnd != NULL) {
        r->random = bench_random_finish(rnd);
        r->have_random = status == 0;
        bench_random_free(rnd);
    }
    if (status == 0) {
        /* With peers: serve them until they are done, so the stats are final. */
        rc = hdmlp_loader_finish(ld);
        if (rc != HDMLP_OK) {
            status = runtime_error("finish", rc);
        }
    }
    if (status == 0) {
        rc = hdmlp_loader_stats(ld, &r->st, sizeof r->st);
        if (rc == HDMLP_OK) {
            rc = hdmlp_loader_cost_history(ld, r->cost_history, 32, &r->cost_points);
            r->cost_points = r->cost_points < 32 ? r->cost_points : 32;
        }
        if (rc != HDMLP_OK) {
            status = runtime_error("stats", rc);
        }
    }
    if (status == 0) {
        uint64_t *all = calloc((size_t)o->epochs, sizeof(uint64_t));
        size_t known = 0;
        rc = all == NULL ? HDMLP_E_NOMEM
                         : hdmlp_loader_epoch_source_bytes(ld, all, (size_t)o->epochs, &known);
        if (rc != HDMLP_OK) {
            status = runtime_error("epoch source bytes", rc);
        }
        for (uint64_t e = 0; status == 0 && e < span; e++) {
            r->epoch_source_bytes[e] = all[o->start_epoch + e];
        }
        free(all);
    }
    /* With peers this waits until every rank is done (it keeps serving them). */
    const double t_free = now_s();
    hdmlp_loader_free(ld);
    r->free_seconds = now_s() - t_free;

    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        r->peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024u;
    }
    if (status == 0 &&
        (r->st.samples != r->consumer_samples || r->st.bytes_delivered != r->consumer_bytes)) {
        fprintf(stderr,
                "hdmlp-bench: %swarning: stats say %" PRIu64 " samples / %" PRIu64
                " bytes delivered, the loop received %" PRIu64 " / %" PRIu64 "\n",
                rank_prefix, r->st.samples, r->st.bytes_delivered, r->consumer_samples,
                r->consumer_bytes);
    }
    return status;
}

/* --plan: the forecast of cfg, with the epochs' source bytes. */
/* The planner's proposal: how to split the budget between abstract memory and the RAM
 * chunk cache to read the least from the source. Forecasts a few splits (to stderr). */
static void propose_split(const bench_opts *o, hdmlp_dataset *ds, hdmlp_config *cfg)
{
    static const unsigned percent[] = {0, 10, 20, 30, 40, 50, 60, 70};
    uint64_t best_bytes = UINT64_MAX;
    unsigned best = 0;
    fprintf(stderr, "budget split (forecast, %" PRIu64 " epochs):\n", o->epochs);
    for (size_t i = 0; i < sizeof(percent) / sizeof(percent[0]); i++) {
        hdmlp_stats st;
        hdmlp_config_set_ram_cache(cfg, o->memory / 100 * percent[i]);
        const int rc = hdmlp_loader_forecast(ds, cfg, &st, sizeof st, NULL, NULL, NULL);
        if (rc != HDMLP_OK) {
            fprintf(stderr, "  RAM cache %3u%%: not possible (%s)\n", percent[i],
                    hdmlp_last_error());
            continue;
        }
        fprintf(stderr,
                "  RAM cache %3u%% (%" PRIu64 " bytes): %" PRIu64 " abstract chunks, %" PRIu64
                " bytes from the source, %" PRIu64 " chunk loads\n",
                percent[i], o->memory / 100 * percent[i], st.abstract_chunks, st.source_bytes,
                st.chunk_loads);
        if (st.source_bytes < best_bytes) {
            best_bytes = st.source_bytes;
            best = percent[i];
        }
    }
    if (best_bytes != UINT64_MAX) {
        fprintf(stderr, "proposal: --ram-cache %" PRIu64 " (%u%% of the budget)\n",
                o->memory / 100 * best, best);
    }
    /* Back to what the command line asked for. */
    hdmlp_config_set_ram_cache(cfg, o->ram_cache_set ? o->ram_cache : HDMLP_RAM_CACHE_AUTO);
}

static int plan(const bench_opts *o, hdmlp_dataset *ds, const hdmlp_config *cfg, bench_rank *r)
{
    if (!o->quiet) {
        propose_split(o, ds, (hdmlp_config *)cfg); /* the bench owns cfg; restored after */
    }
    uint64_t *all = calloc((size_t)o->epochs, sizeof(uint64_t));
    if (all == NULL) {
        fprintf(stderr, "hdmlp-bench: out of memory\n");
        return BENCH_EXIT_RUNTIME;
    }
    const double t0 = now_s();
    const int rc = hdmlp_loader_forecast(ds, cfg, &r->st, sizeof r->st, NULL, NULL, all);
    r->seconds = now_s() - t0;
    for (uint64_t e = 0; rc == HDMLP_OK && e < bench_span(o); e++) {
        r->epoch_source_bytes[e] = all[o->start_epoch + e];
    }
    free(all);
    return rc == HDMLP_OK ? 0 : runtime_error("forecast failed", rc);
}

/* Prints ranks[0..n) as the options ask. */
static void report(const bench_opts *o, hdmlp_dataset *ds, const bench_rank *ranks, uint32_t n,
                   uint32_t world)
{
    if (o->json) {
        bench_report_json(o, ds, ranks, n, world);
    } else if (!o->quiet) {
        bench_report_text(o, ds, ranks, n, world);
    }
}

/* Under --mpi with world > 1: every rank's results to rank 0, which prints them. */
static int report_gathered(const bench_opts *o, hdmlp_dataset *ds, const bench_rank *mine,
                           uint32_t world)
{
    bench_rank *all = NULL;
    int status = mine->status;

    if (bench_dist_gather(o, mine, world, &all) != 0) {
        return BENCH_EXIT_RUNTIME;
    }
    if (all == NULL) {
        return status; /* not rank 0 */
    }
    for (uint32_t r = 0; r < world; r++) {
        if (all[r].status != 0) {
            fprintf(stderr, "hdmlp-bench: rank %" PRIu32 " failed (exit status %d)\n", r,
                    all[r].status);
            status = status != 0 ? status : BENCH_EXIT_RUNTIME;
        }
    }
    if (status == 0) {
        report(o, ds, all, world, world);
    }
    bench_dist_free(all, world);
    return status;
}

int main(int argc, char **argv)
{
    bench_opts o = {
        .batch = 32,
        .epochs = 1,
        .threads = 2,
        .engine = HDMLP_ENGINE_AUTO,
        .policy = HDMLP_POLICY_AUTO,
        .refill = HDMLP_REFILL_AUTO,
        .direct = HDMLP_DIRECT_IO_AUTO,
        .op_us = -1,
        .bandwidth = -1,
    };
    bench_rank me;
    hdmlp_dataset *ds = NULL;
    hdmlp_config *cfg = NULL;
    int status = bench_parse_args(argc, argv, &o);

    memset(&me, 0, sizeof(me));
    if (status >= 0) {
        bench_args_free(&o);
        return status;
    }
    /* The dataset opens before any MPI collective: a rank that fails here exits before
     * joining one, and mpirun ends the job. */
    int rc = hdmlp_dataset_open(o.dataset, &ds);
    if (rc != HDMLP_OK) {
        fprintf(stderr, "hdmlp-bench: cannot open dataset '%s': %s%s%s\n", o.dataset,
                hdmlp_strerror(rc), hdmlp_last_error()[0] != '\0' ? ": " : "",
                hdmlp_last_error());
        bench_args_free(&o);
        return BENCH_EXIT_RUNTIME;
    }
    char err[512];
    if (o.memory_pct > 0 && units_parse_size(o.memory_arg, hdmlp_dataset_raw_bytes(ds),
                                             &o.memory, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "hdmlp-bench: --memory: %s\n", err);
        bench_args_free(&o);
        return BENCH_EXIT_USAGE;
    }
    rc = hdmlp_config_create(&cfg);
    if (rc != HDMLP_OK) {
        status = runtime_error("config", rc);
    } else {
        status = bench_configure(&o, cfg);
    }
    if (status == 0 && o.mpi) {
        rc = hdmlp_config_bootstrap_mpi(cfg, o.bind_host != NULL ? o.bind_host : "127.0.0.1");
        status = rc == HDMLP_OK ? 0 : runtime_error("MPI bootstrap failed", rc);
    }
    const uint32_t world = status == 0 ? hdmlp_config_world(cfg) : 1;
    me.rank = status == 0 ? hdmlp_config_rank(cfg) : 0;
    if (world > 1) {
        snprintf(rank_prefix, sizeof(rank_prefix), "rank %" PRIu32 ": ", me.rank);
    }
    const size_t span = (size_t)bench_span(&o);
    if (status == 0) {
        me.epoch_seconds = calloc(span, sizeof(double));
        me.epoch_source_bytes = calloc(span, sizeof(uint64_t));
        if (me.epoch_seconds == NULL || me.epoch_source_bytes == NULL) {
            fprintf(stderr, "hdmlp-bench: out of memory\n");
            status = BENCH_EXIT_RUNTIME;
        }
    }
    const int bootstrapped = status == 0;
    if (status == 0 && o.state_file != NULL && !o.plan) {
        status = load_state(&o, cfg, world, &me);
    }
    if (status == 0) {
        status = o.plan ? plan(&o, ds, cfg, &me) : run(&o, ds, cfg, &me);
    }
    me.status = status;
    if (o.mpi && bootstrapped && world > 1) {
        /* Every rank that bootstrapped takes part, failed or not. */
        status = report_gathered(&o, ds, &me, world);
    } else if (status == 0) {
        report(&o, ds, &me, 1, world);
    }
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    free(me.epoch_seconds);
    free(me.epoch_source_bytes);
    bench_args_free(&o);
    return status;
}
