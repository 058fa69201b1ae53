/* hdmlp-bench output (see bench_report.h). */
#include "bench_report.h"

#include "bench_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_engine_names[3] = {"auto", "pread", "io_uring"};
const char *const bench_policy_names[2] = {"fill-rate", "random"};
const char *const bench_refill_names[3] = {"auto", "whole", "ranges"};

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

void bench_total(const bench_opts *o, const bench_rank *ranks, uint32_t n, bench_rank *out)
{
    const uint64_t span = bench_span(o);
    double *es = out->epoch_seconds;
    uint64_t *eb = out->epoch_source_bytes;
    hdmlp_stats *t = &out->st;

    memset(out, 0, sizeof(*out));
    out->epoch_seconds = es;
    out->epoch_source_bytes = eb;
    for (uint64_t e = 0; e < span; e++) {
        if (es != NULL) {
            es[e] = 0;
        }
        if (eb != NULL) {
            eb[e] = 0;
        }
    }
    out->have_random = 1;
    for (uint32_t i = 0; i < n; i++) {
        const bench_rank *r = &ranks[i];
        const hdmlp_stats *s = &r->st;
        if (r->status != 0 && out->status == 0) {
            out->status = r->status;
        }
        t->samples += s->samples;
        t->batches += s->batches;
        t->epochs = i == 0 || s->epochs < t->epochs ? s->epochs : t->epochs;
        t->requests += s->requests;
        t->hits += s->hits;
        t->misses += s->misses;
        t->chunk_loads += s->chunk_loads;
        t->read_ops += s->read_ops;
        t->bytes_read += s->bytes_read;
        t->bytes_delivered += s->bytes_delivered;
        t->stored_bytes_delivered += s->stored_bytes_delivered;
        t->samples_filled += s->samples_filled;
        t->whole_refills += s->whole_refills;
        t->ranged_refills += s->ranged_refills;
        t->peak_memory_bytes += s->peak_memory_bytes;
        t->memory_budget += s->memory_budget;
        t->stall_ns += s->stall_ns;
        for (int b = 0; b < 11; b++) {
            t->fill_hist[b] += s->fill_hist[b];
        }
        t->remote_requests += s->remote_requests;
        t->remote_hits += s->remote_hits;
        t->prefetch_sent += s->prefetch_sent;
        t->answers_sent += s->answers_sent;
        t->net_bytes_out += s->net_bytes_out;
        t->net_bytes_in += s->net_bytes_in;
        t->peers_same_host += s->peers_same_host;
        t->source_bytes += s->source_bytes;
        t->ram_cache_bytes += s->ram_cache_bytes;
        t->ssd_cache_bytes += s->ssd_cache_bytes;
        t->ram_cached_chunks += s->ram_cached_chunks;
        t->ssd_staged_chunks += s->ssd_staged_chunks;
        t->tier_fallbacks += s->tier_fallbacks;
        t->calibrated = i == 0 || s->calibrated < t->calibrated ? s->calibrated : t->calibrated;
        out->seconds = r->seconds > out->seconds ? r->seconds : out->seconds;
        out->create_seconds =
            r->create_seconds > out->create_seconds ? r->create_seconds : out->create_seconds;
        out->free_seconds =
            r->free_seconds > out->free_seconds ? r->free_seconds : out->free_seconds;
        out->peak_rss_bytes += r->peak_rss_bytes;
        out->consumer_samples += r->consumer_samples;
        out->consumer_bytes += r->consumer_bytes;
        out->have_random = out->have_random && r->have_random;
        bench_random_fig_add(&out->random, &r->random);
        for (uint64_t e = 0; e < span; e++) {
            if (es != NULL && r->epoch_seconds != NULL && r->epoch_seconds[e] > es[e]) {
                es[e] = r->epoch_seconds[e];
            }
            if (eb != NULL && r->epoch_source_bytes != NULL) {
                eb[e] += r->epoch_source_bytes[e];
            }
        }
    }
    if (n > 0) {
        t->abstract_chunks = ranks[0].st.abstract_chunks;
        t->chunk_groups = ranks[0].st.chunk_groups;
        t->source_op_ns = ranks[0].st.source_op_ns;
        t->source_bytes_per_s = ranks[0].st.source_bytes_per_s;
        t->ssd_op_ns = ranks[0].st.ssd_op_ns;
        t->ssd_bytes_per_s = ranks[0].st.ssd_bytes_per_s;
    }
}

/* bench_total with its arrays on the heap (NULL when out of memory: then not printed). */
static void total_of(const bench_opts *o, const bench_rank *ranks, uint32_t n, bench_rank *t)
{
    const size_t span = (size_t)bench_span(o);
    double *es = calloc(span > 0 ? span : 1, sizeof(double));
    uint64_t *eb = calloc(span > 0 ? span : 1, sizeof(uint64_t));
    int all_es = 1;
    int all_eb = 1;

    for (uint32_t i = 0; i < n; i++) {
        all_es = all_es && ranks[i].epoch_seconds != NULL;
        all_eb = all_eb && ranks[i].epoch_source_bytes != NULL;
    }
    if (!all_es) {
        free(es);
        es = NULL;
    }
    if (!all_eb) {
        free(eb);
        eb = NULL;
    }
    t->epoch_seconds = es;
    t->epoch_source_bytes = eb;
    bench_total(o, ranks, n, t);
}

static void total_free(bench_rank *t)
{
    free(t->epoch_seconds);
    free(t->epoch_source_bytes);
}

typedef struct derived {
    double samples_per_s;
    double mb_per_s;
    double read_amplification;
    double loads_per_chunk;
    double ops_per_sample;
    double seconds_per_epoch;
} derived;

/* share: the chunks this figure is over (all of them, or a rank's 1/world of them). */
static derived derive(const bench_rank *r, double share)
{
    const hdmlp_stats *st = &r->st;
    const double epochs = st->epochs > 0 ? (double)st->epochs : 1.0;
    derived d;

    d.samples_per_s = ratio((double)st->samples, r->seconds);
    d.mb_per_s = ratio((double)st->bytes_delivered, r->seconds) / 1e6;
    d.read_amplification = ratio((double)st->bytes_read, (double)st->bytes_delivered);
    d.loads_per_chunk = ratio((double)st->chunk_loads, share * epochs);
    d.ops_per_sample = ratio((double)st->read_ops, (double)st->samples);
    d.seconds_per_epoch = r->seconds / epochs;
    return d;
}

/* A counter a forecast does not predict (timing, memory peaks, exchange, tier activity, the
 * cost model in use): null in a plan, so that plan and run still compare key by key. */
static void run_u64(bench_json *j, const char *key, uint64_t v, int plan)
{
    if (plan) {
        bench_json_double(j, key, NAN);
    } else {
        bench_json_u64(j, key, v);
    }
}

/* Every hdmlp_stats field under its C name: the keys a plan and a run share. */
static void json_stats(bench_json *j, const hdmlp_stats *st, int plan)
{
    bench_json_u64(j, "samples", st->samples);
    bench_json_u64(j, "batches", st->batches);
    bench_json_u64(j, "epochs", st->epochs);
    bench_json_u64(j, "requests", st->requests);
    bench_json_u64(j, "hits", st->hits);
    bench_json_u64(j, "misses", st->misses);
    bench_json_u64(j, "chunk_loads", st->chunk_loads);
    bench_json_u64(j, "read_ops", st->read_ops);
    bench_json_u64(j, "bytes_read", st->bytes_read);
    bench_json_u64(j, "bytes_delivered", st->bytes_delivered);
    bench_json_u64(j, "stored_bytes_delivered", st->stored_bytes_delivered);
    bench_json_u64(j, "samples_filled", st->samples_filled);
    bench_json_u64(j, "whole_refills", st->whole_refills);
    bench_json_u64(j, "ranged_refills", st->ranged_refills);
    run_u64(j, "peak_memory_bytes", st->peak_memory_bytes, plan);
    bench_json_u64(j, "memory_budget", st->memory_budget);
    run_u64(j, "stall_ns", st->stall_ns, plan);
    bench_json_u64_array(j, "fill_hist", st->fill_hist, 11);
    bench_json_u64(j, "abstract_chunks", st->abstract_chunks);
    bench_json_u64(j, "chunk_groups", st->chunk_groups);
    run_u64(j, "remote_requests", st->remote_requests, plan);
    run_u64(j, "remote_hits", st->remote_hits, plan);
    run_u64(j, "prefetch_sent", st->prefetch_sent, plan);
    run_u64(j, "answers_sent", st->answers_sent, plan);
    run_u64(j, "net_bytes_out", st->net_bytes_out, plan);
    run_u64(j, "net_bytes_in", st->net_bytes_in, plan);
    bench_json_u64(j, "source_bytes", st->source_bytes);
    run_u64(j, "ram_cache_bytes", st->ram_cache_bytes, plan);
    run_u64(j, "ssd_cache_bytes", st->ssd_cache_bytes, plan);
    run_u64(j, "ram_cached_chunks", st->ram_cached_chunks, plan);
    run_u64(j, "ssd_staged_chunks", st->ssd_staged_chunks, plan);
    run_u64(j, "tier_fallbacks", st->tier_fallbacks, plan);
    run_u64(j, "source_op_ns", st->source_op_ns, plan);
    run_u64(j, "source_bytes_per_s", st->source_bytes_per_s, plan);
    run_u64(j, "ssd_op_ns", st->ssd_op_ns, plan);
    run_u64(j, "ssd_bytes_per_s", st->ssd_bytes_per_s, plan);
    run_u64(j, "calibrated", st->calibrated, plan);
    bench_json_u64(j, "cost_learning", st->cost_learning);
    run_u64(j, "cost_reads", st->cost_reads, plan);
    run_u64(j, "cost_changes", st->cost_changes, plan);
    run_u64(j, "cost_explorations", st->cost_explorations, plan);
    bench_json_u64(j, "source_op_ns_start", st->source_op_ns_start);
    bench_json_u64(j, "source_bytes_per_s_start", st->source_bytes_per_s_start);
    bench_json_u64(j, "direct_io", st->direct_io);
    bench_json_u64(j, "page_cache_room", st->page_cache_room);
    run_u64(j, "budget_read_buffers", st->budget_read_buffers, plan);
    run_u64(j, "budget_batches", st->budget_batches, plan);
    run_u64(j, "budget_remote", st->budget_remote, plan);
    run_u64(j, "budget_ram_cache", st->budget_ram_cache, plan);
    run_u64(j, "budget_lookahead", st->budget_lookahead, plan);
    run_u64(j, "budget_slots", st->budget_slots, plan);
    run_u64(j, "peers_same_host", st->peers_same_host, plan);
}

/* The cost model's estimate over the run: reads learnt from, us per op, bytes/s. */
static void json_cost_history(bench_json *j, const bench_rank *r)
{
    uint64_t reads[32];
    double op[32], bw[32];
    for (size_t i = 0; i < r->cost_points; i++) {
        reads[i] = r->cost_history[i].reads;
        op[i] = r->cost_history[i].op_us;
        bw[i] = r->cost_history[i].bytes_per_s;
    }
    bench_json_u64_array(j, "cost_history_reads", reads, r->cost_points);
    bench_json_double_array(j, "cost_history_op_us", op, r->cost_points);
    bench_json_double_array(j, "cost_history_bytes_per_s", bw, r->cost_points);
}

/* One rank's (or the total's) members. */
static void json_rank(bench_json *j, const bench_opts *o, const bench_rank *r, double share)
{
    const derived d = derive(r, share);
    const uint64_t span = bench_span(o);

    json_stats(j, &r->st, o->plan);
    if (!o->plan) {
        json_cost_history(j, r);
    }
    if (r->epoch_source_bytes != NULL) {
        bench_json_u64_array(j, "epoch_source_bytes", r->epoch_source_bytes, (size_t)span);
    }
    bench_json_double(j, "read_amplification", d.read_amplification);
    bench_json_double(j, "loads_per_chunk", d.loads_per_chunk);
    bench_json_double(j, "ops_per_sample", d.ops_per_sample);
    if (o->plan) {
        bench_json_double(j, "plan_seconds", r->seconds);
        return;
    }
    bench_json_double(j, "seconds", r->seconds);
    if (r->epoch_seconds != NULL) {
        bench_json_double_array(j, "epoch_seconds", r->epoch_seconds, (size_t)span);
    }
    bench_json_double(j, "seconds_per_epoch", d.seconds_per_epoch);
    bench_json_double(j, "create_seconds", r->create_seconds);
    bench_json_double(j, "free_seconds", r->free_seconds);
    bench_json_double(j, "samples_per_s", d.samples_per_s);
    bench_json_double(j, "mb_per_s", d.mb_per_s);
    bench_json_double(j, "stall_seconds", (double)r->st.stall_ns * 1e-9);
    bench_json_u64(j, "peak_rss_bytes", r->peak_rss_bytes);
    bench_json_u64(j, "consumer_samples", r->consumer_samples);
    bench_json_u64(j, "consumer_bytes", r->consumer_bytes);
    /* NAN (null) when not computed or undefined */
    bench_json_double(j, "same_chunk_distance",
                      r->have_random ? bench_random_distance(&r->random) : NAN);
    bench_json_double(j, "epoch_position_correlation",
                      r->have_random ? bench_random_correlation(&r->random) : NAN);
}

static void json_context(bench_json *j, const bench_opts *o, hdmlp_dataset *ds)
{
    const char *ram = "default";
    char ram_buf[32];

    bench_json_object(j, "dataset");
    bench_json_string(j, "path", o->dataset);
    bench_json_u64(j, "samples", hdmlp_dataset_sample_count(ds));
    bench_json_u64(j, "chunk_size", hdmlp_dataset_chunk_size(ds));
    bench_json_u64(j, "chunks", hdmlp_dataset_chunk_count(ds));
    bench_json_u64(j, "segments", hdmlp_dataset_segment_count(ds));
    bench_json_u64(j, "raw_bytes", hdmlp_dataset_raw_bytes(ds));
    bench_json_u64(j, "stored_bytes", hdmlp_dataset_stored_bytes(ds));
    bench_json_end(j);

    bench_json_object(j, "config");
    bench_json_string(j, "memory", o->memory_arg);
    bench_json_u64(j, "memory_bytes", o->memory);
    bench_json_u64(j, "batch", o->batch);
    bench_json_u64(j, "epochs", o->epochs);
    bench_json_u64(j, "start_epoch", o->start_epoch);
    bench_json_u64(j, "seed", o->seed);
    bench_json_u64(j, "threads", o->threads);
    bench_json_string(j, "engine", bench_engine_names[o->engine]);
    bench_json_string(j, "policy", bench_policy_names[o->policy]);
    bench_json_string(j, "refill", bench_refill_names[o->refill]);
    bench_json_bool(j, "direct", o->direct);
    bench_json_u64(j, "lookahead", o->lookahead);
    bench_json_double(j, "op_us", o->op_us >= 0 ? o->op_us : 100.0);
    bench_json_double(j, "bandwidth", o->bandwidth > 0 ? o->bandwidth : 1e9);
    bench_json_double(j, "compute_ms", o->compute_ms);
    bench_json_bool(j, "drop_last", o->drop_last);
    bench_json_bool(j, "relaxed", o->relaxed);
    bench_json_bool(j, "calibrate", o->calibrate);
    if (o->ram_cache_set && o->ram_cache != HDMLP_RAM_CACHE_AUTO) {
        snprintf(ram_buf, sizeof(ram_buf), "%" PRIu64, o->ram_cache);
        ram = ram_buf;
    } else if (o->ram_cache_set) {
        ram = "auto";
    }
    bench_json_string(j, "ram_cache", ram);
    bench_json_string(j, "ssd_cache", o->ssd_dir);
    bench_json_u64(j, "ssd_capacity", o->ssd_dir != NULL ? o->ssd_capacity : 0);
    bench_json_string(j, "bootstrap", o->mpi ? "mpi" : o->n_peers > 0 ? "peers" : "none");
    if (o->prefetch_set) {
        bench_json_u64(j, "prefetch", o->prefetch);
    } else {
        bench_json_string(j, "prefetch", "default");
    }
    if (o->remote_memory_set) {
        bench_json_u64(j, "remote_memory", o->remote_memory);
    } else {
        bench_json_string(j, "remote_memory", "default");
    }
    if (o->peer_timeout_set) {
        bench_json_u64(j, "peer_timeout_ms", o->peer_timeout);
    } else {
        bench_json_string(j, "peer_timeout_ms", "default");
    }
    bench_json_bool(j, "tls", o->tls_ca != NULL);
    bench_json_string(j, "same_host", o->same_host != NULL ? o->same_host : "shm");
    bench_json_end(j);
}

void bench_report_json(const bench_opts *o, hdmlp_dataset *ds, const bench_rank *ranks,
                       uint32_t n, uint32_t world)
{
    const double chunks = (double)hdmlp_dataset_chunk_count(ds);
    bench_json j;

    bench_json_begin(&j, stdout);
    if (o->plan) {
        bench_json_bool(&j, "plan", 1);
    }
    bench_json_u64(&j, "world", world);
    if (n == 1) {
        if (world > 1) {
            bench_json_u64(&j, "rank", ranks[0].rank);
        }
        json_rank(&j, o, &ranks[0], world > 1 ? chunks / world : chunks);
    } else {
        bench_rank total;
        total_of(o, ranks, n, &total);
        json_rank(&j, o, &total, chunks);
        bench_json_u64(&j, "prefetch_unused",
                       total.st.prefetch_sent > total.st.remote_hits
                           ? total.st.prefetch_sent - total.st.remote_hits
                           : 0);
        bench_json_array(&j, "ranks");
        for (uint32_t i = 0; i < n; i++) {
            bench_json_element(&j);
            bench_json_u64(&j, "rank", ranks[i].rank);
            json_rank(&j, o, &ranks[i], chunks / world);
            bench_json_end(&j);
        }
        bench_json_array_end(&j);
        total_free(&total);
    }
    json_context(&j, o, ds);
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

static void text_header(const bench_opts *o, hdmlp_dataset *ds)
{
    char b1[32];

    printf("dataset    %s: %" PRIu64 " samples, %" PRIu32 " per chunk, %" PRIu64
           " chunks, %s raw\n",
           o->dataset, hdmlp_dataset_sample_count(ds), hdmlp_dataset_chunk_size(ds),
           hdmlp_dataset_chunk_count(ds),
           human((double)hdmlp_dataset_raw_bytes(ds), b1, sizeof(b1)));
    printf("config     memory %s (%s), batch %" PRIu64 ", epochs %" PRIu64,
           human((double)o->memory, b1, sizeof(b1)), o->memory_arg, o->batch, o->epochs);
    if (o->start_epoch > 0) {
        printf(" from %" PRIu64, o->start_epoch);
    }
    printf(", seed %" PRIu64 ", threads %" PRIu64 ", engine %s, policy %s, refill %s%s%s\n",
           o->seed, o->threads, bench_engine_names[o->engine], bench_policy_names[o->policy],
           bench_refill_names[o->refill],
           o->direct == HDMLP_DIRECT_IO_AUTO ? ", I/O auto"
           : o->direct                       ? ", O_DIRECT"
                                             : ", buffered",
           o->relaxed ? ", relaxed" : "");
}

/* The summary lines of one rank or of the total; share as in derive(). */
static void cost_line(const hdmlp_stats *st, int plan)
{
    printf("cost model %.1f us per op, %.1f MB/s", (double)st->source_op_ns / 1e3,
           (double)st->source_bytes_per_s / 1e6);
    if (st->cost_learning && !plan) {
        printf(" (learnt from %" PRIu64 " reads, %" PRIu64 " changes, %" PRIu64
               " explorations; started at %.1f us, %.1f MB/s, %s)",
               st->cost_reads, st->cost_changes, st->cost_explorations,
               (double)st->source_op_ns_start / 1e3, (double)st->source_bytes_per_s_start / 1e6,
               st->calibrated ? "measured" : "defaults");
    } else if (st->cost_learning) {
        printf(" (the start of the learnt model: bytes and read ops are estimates)");
    } else {
        printf(" (%s)", st->calibrated ? "measured" : "configured");
    }
    if (st->ssd_bytes_per_s > 0) {
        printf("; SSD cache %.1f us per op, %.1f MB/s", (double)st->ssd_op_ns / 1e3,
               (double)st->ssd_bytes_per_s / 1e6);
    }
    printf("\n");
}

/* Where the memory budget went. */
static void budget_line(const hdmlp_stats *st)
{
    char b[6][32];
    printf("budget     slots %s, lookahead %s, batches %s, read buffers %s, RAM cache %s, "
           "remote %s\n",
           human((double)st->budget_slots, b[0], sizeof(b[0])),
           human((double)st->budget_lookahead, b[1], sizeof(b[1])),
           human((double)st->budget_batches, b[2], sizeof(b[2])),
           human((double)st->budget_read_buffers, b[3], sizeof(b[3])),
           human((double)st->budget_ram_cache, b[4], sizeof(b[4])),
           human((double)st->budget_remote, b[5], sizeof(b[5])));
}

/* nsum: how many ranks r sums (stall time is a sum, the seconds the slowest rank's). */
static void text_body(const bench_opts *o, const bench_rank *r, double share, int world,
                      uint32_t nsum)
{
    const hdmlp_stats *st = &r->st;
    const derived d = derive(r, share);
    const uint64_t span = bench_span(o);
    char b1[32];
    char b2[32];
    char b3[32];

    if (o->plan) {
        printf("plan       forecast in %.3f s (metadata only, no sample data read)\n",
               r->seconds);
    } else {
        printf("throughput %" PRIu64
               " samples in %.3f s: %.1f samples/s, %.1f MB/s delivered\n",
               st->samples, r->seconds, d.samples_per_s, d.mb_per_s);
        printf("epochs     %" PRIu64 ", %.3f s per epoch\n", st->epochs, d.seconds_per_epoch);
    }
    printf("requests   %" PRIu64 ": %" PRIu64 " hits, %" PRIu64 " misses\n", st->requests,
           st->hits, st->misses);
    printf("loads      %" PRIu64 " chunk loads (%.2f per chunk per epoch; %" PRIu64
           " whole, %" PRIu64 " ranged), %" PRIu64 " read ops (%.3f per sample)\n",
           st->chunk_loads, d.loads_per_chunk, st->whole_refills, st->ranged_refills,
           st->read_ops, d.ops_per_sample);
    printf("bytes      %s read, %s delivered: read amplification %.2f\n",
           human((double)st->bytes_read, b1, sizeof(b1)),
           human((double)st->bytes_delivered, b2, sizeof(b2)), d.read_amplification);
    printf("source     %s from the dataset directory; per epoch:",
           human((double)st->source_bytes, b1, sizeof(b1)));
    for (uint64_t e = 0; r->epoch_source_bytes != NULL && e < span; e++) {
        printf(" %s", human((double)r->epoch_source_bytes[e], b1, sizeof(b1)));
    }
    printf("\n");
    if (st->ram_cached_chunks > 0 || st->ssd_staged_chunks > 0 || o->ssd_dir != NULL ||
        st->tier_fallbacks > 0) {
        printf("tiers      RAM cache %" PRIu64 " chunks, %s served; SSD %" PRIu64
               " chunks staged, %s read; %" PRIu64 " fallbacks to the source\n",
               st->ram_cached_chunks, human((double)st->ram_cache_bytes, b1, sizeof(b1)),
               st->ssd_staged_chunks, human((double)st->ssd_cache_bytes, b2, sizeof(b2)),
               st->tier_fallbacks);
    }
    if (o->plan && st->source_bytes_per_s == 0) {
        printf("cost model (not part of the forecast)\n");
    } else {
        cost_line(st, o->plan);
    }
    printf("fill rate ");
    for (int i = 0; i < 11; i++) {
        printf(" %" PRIu64, st->fill_hist[i]);
    }
    printf("  (refills per tenth, 0-10%% .. 100%%)\n");
    if (world > 1 && o->plan) {
        printf("exchange   (not part of the forecast)\n");
    } else if (world > 1) {
        printf("exchange   %" PRIu64 " remote requests, %" PRIu64
               " served by prefetch; sent %" PRIu64 " prefetches and %" PRIu64
               " answers; network %s out, %s in; %" PRIu64 " peer%s over the same-host "
               "socket\n",
               st->remote_requests, st->remote_hits, st->prefetch_sent, st->answers_sent,
               human((double)st->net_bytes_out, b1, sizeof(b1)),
               human((double)st->net_bytes_in, b2, sizeof(b2)), st->peers_same_host,
               st->peers_same_host == 1 ? "" : "s");
    }
    if (o->plan) {
        return;
    }
    printf("stall      %.3f s waiting for data (%.0f%% of the run%s)\n",
           (double)st->stall_ns * 1e-9,
           100.0 * ratio((double)st->stall_ns * 1e-9, r->seconds * nsum),
           nsum > 1 ? "s, summed over ranks" : "");
    printf("memory     peak %s accounted of %s budget, %" PRIu64
           " abstract chunks; peak RSS %s\n",
           human((double)st->peak_memory_bytes, b1, sizeof(b1)),
           human((double)st->memory_budget, b2, sizeof(b2)), st->abstract_chunks,
           human((double)r->peak_rss_bytes, b3, sizeof(b3)));
    budget_line(st);
    printf("reads      %s", st->direct_io ? "O_DIRECT" : "buffered");
    if (st->page_cache_room > 0) {
        printf(" (auto: page cache room %s)",
               human((double)st->page_cache_room, b1, sizeof(b1)));
    }
    printf("\n");
    if (r->have_random) {
        printf("randomness same-chunk distance %.3f (1.0 = as a permutation), epoch position "
               "correlation %.3f\n",
               bench_random_distance(&r->random), bench_random_correlation(&r->random));
    }
}

static void text_table(const bench_opts *o, const bench_rank *ranks, uint32_t n,
                       const bench_rank *total, double chunks)
{
    printf("%-6s %9s %8s %9s %8s %8s %9s %9s %9s %9s %10s %8s\n", "rank", "samples", "seconds",
           "hits", "misses", "loads/ch", "remote_rq", "pf_hits", "pf_sent", "answers",
           "net_MiB", "stall_s");
    for (uint32_t i = 0; i <= n; i++) {
        const bench_rank *r = i < n ? &ranks[i] : total;
        const derived d = derive(r, i < n ? chunks / n : chunks);
        char name[16];
        if (i < n) {
            snprintf(name, sizeof(name), "%" PRIu32, r->rank);
        } else {
            snprintf(name, sizeof(name), "total");
        }
        if (o->plan) {
            /* A forecast has no timing and no exchange figures. */
            printf("%-6s %9" PRIu64 " %8s %9" PRIu64 " %8" PRIu64
                   " %8.2f %9s %9s %9s %9s %10s %8s\n",
                   name, r->st.samples, "-", r->st.hits, r->st.misses, d.loads_per_chunk, "-",
                   "-", "-", "-", "-", "-");
            continue;
        }
        printf("%-6s %9" PRIu64 " %8.3f %9" PRIu64 " %8" PRIu64 " %8.2f %9" PRIu64 " %9" PRIu64
               " %9" PRIu64 " %9" PRIu64 " %10.2f %8.3f%s\n",
               name, r->st.samples, r->seconds, r->st.hits, r->st.misses, d.loads_per_chunk,
               r->st.remote_requests, r->st.remote_hits, r->st.prefetch_sent,
               r->st.answers_sent, (double)r->st.net_bytes_out / 1048576.0,
               (double)r->st.stall_ns * 1e-9, r->status != 0 ? "  FAILED" : "");
    }
}

void bench_report_text(const bench_opts *o, hdmlp_dataset *ds, const bench_rank *ranks,
                       uint32_t n, uint32_t world)
{
    const double chunks = (double)hdmlp_dataset_chunk_count(ds);

    text_header(o, ds);
    if (n == 1) {
        if (world > 1) {
            printf("rank       %" PRIu32 " of %" PRIu32 " (loads per chunk: of its 1/%" PRIu32
                   " share)\n",
                   ranks[0].rank, world, world);
        }
        text_body(o, &ranks[0], world > 1 ? chunks / world : chunks, (int)world, 1);
        return;
    }
    bench_rank total;
    total_of(o, ranks, n, &total);
    text_table(o, ranks, n, &total, chunks);
    printf("total      over %" PRIu32 " ranks (seconds: the slowest rank)\n", n);
    text_body(o, &total, chunks, (int)world, n);
    total_free(&total);
}
