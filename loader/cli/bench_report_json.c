/* hdmlp-bench output, the JSON object (see bench_report.h). */
#include "bench_report.h"

#include "bench_figures.h"
#include "bench_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    run_u64(j, "metadata_bytes", st->metadata_bytes, plan);
    run_u64(j, "index_bytes", st->index_bytes, plan);
    run_u64(j, "stall_ns", st->stall_ns, plan);
    bench_json_u64_array(j, "fill_hist", st->fill_hist, 11);
    bench_json_u64(j, "abstract_chunks", st->abstract_chunks);
    bench_json_u64(j, "chunk_groups", st->chunk_groups);
    bench_json_u64(j, "pool_unit", st->pool_unit);
    bench_json_string(j, "policy", bench_policy_names[st->policy < 4 ? st->policy : 3]);
    run_u64(j, "remote_requests", st->remote_requests, plan);
    run_u64(j, "remote_hits", st->remote_hits, plan);
    run_u64(j, "prefetch_sent", st->prefetch_sent, plan);
    run_u64(j, "answers_sent", st->answers_sent, plan);
    run_u64(j, "net_bytes_out", st->net_bytes_out, plan);
    run_u64(j, "net_bytes_in", st->net_bytes_in, plan);
    run_u64(j, "net_bytes_lent", st->net_bytes_lent, plan);
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
    run_u64(j, "remote_peak", st->remote_peak, plan);
    run_u64(j, "budget_ram_cache", st->budget_ram_cache, plan);
    run_u64(j, "budget_lookahead", st->budget_lookahead, plan);
    run_u64(j, "budget_slots", st->budget_slots, plan);
    run_u64(j, "budget_sample_tables", st->budget_sample_tables, plan);
    run_u64(j, "peers_same_host", st->peers_same_host, plan);
    run_u64(j, "board_active", st->board_active, plan);
    run_u64(j, "board_windows", st->board_windows, plan);
    run_u64(j, "board_hold_windows", st->board_hold_windows, plan);
    run_u64(j, "board_starved_windows", st->board_starved_windows, plan);
    run_u64(j, "board_idle_windows", st->board_idle_windows, plan);
    run_u64(j, "board_lead_samples", st->board_lead_samples, plan);
    run_u64(j, "board_lent_peak", st->board_lent_peak, plan);
    run_u64(j, "board_borrowed_peak", st->board_borrowed_peak, plan);
    run_u64(j, "node_stall_max_ns", st->node_stall_max_ns, plan);
    run_u64(j, "node_stall_min_ns", st->node_stall_min_ns, plan);
    run_u64(j, "refills_in_flight_peak", st->refills_in_flight_peak, plan);
    run_u64(j, "cost_replans", st->cost_replans, plan);
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
    const bench_derived d = bench_derive(r, share);
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
    bench_json_string(j, "order", bench_order_names[o->order]);
    bench_json_u64(j, "pool_reads", o->pool_reads);
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
    bench_json_string(j, "node_board", o->node_board != NULL ? o->node_board : "auto");
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
        bench_total_of(o, ranks, n, &total);
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
        bench_total_free(&total);
    }
    if (!o->plan && world > 1) {
        /* The node's slowest rank's stall over its least-stalled rank's: from every rank
         * when this process has them all, else from what this rank's board saw. */
        uint64_t hi = ranks[0].st.stall_ns, lo = ranks[0].st.stall_ns;
        for (uint32_t i = 1; i < n; i++) {
            hi = ranks[i].st.stall_ns > hi ? ranks[i].st.stall_ns : hi;
            lo = ranks[i].st.stall_ns < lo ? ranks[i].st.stall_ns : lo;
        }
        if (n == 1) {
            hi = ranks[0].st.node_stall_max_ns;
            lo = ranks[0].st.node_stall_min_ns;
        }
        bench_json_double(&j, "node_stall_max_seconds", (double)hi * 1e-9);
        bench_json_double(&j, "node_stall_min_seconds", (double)lo * 1e-9);
        bench_json_double(&j, "node_stall_ratio", lo > 0 ? (double)hi / (double)lo : NAN);
    }
    json_context(&j, o, ds);
    bench_json_end(&j);
}
