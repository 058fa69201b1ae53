/* hdmlp-bench output, the human-readable summary (see bench_report.h). */
#include "bench_report.h"

#include "bench_figures.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
           o->order == HDMLP_ORDER_POOL ? ", pool order" : "");
}

/* The summary lines of one rank or of the total; share as in bench_derive(). */
static void cost_line(const hdmlp_stats *st, int plan)
{
    printf("cost model %.1f us per op, %.1f MB/s", (double)st->source_op_ns / 1e3,
           (double)st->source_bytes_per_s / 1e6);
    if (st->cost_learning && !plan) {
        printf(" (learnt from %" PRIu64 " reads, %" PRIu64 " changes, %" PRIu64
               " explorations, %" PRIu64 " replans; started at %.1f us, %.1f MB/s, %s)",
               st->cost_reads, st->cost_changes, st->cost_explorations, st->cost_replans,
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
    char b[7][32];
    printf("budget     slots %s, lookahead %s, batches %s, read buffers %s, RAM cache %s, "
           "remote %s, sample tables %s\n",
           human((double)st->budget_slots, b[0], sizeof(b[0])),
           human((double)st->budget_lookahead, b[1], sizeof(b[1])),
           human((double)st->budget_batches, b[2], sizeof(b[2])),
           human((double)st->budget_read_buffers, b[3], sizeof(b[3])),
           human((double)st->budget_ram_cache, b[4], sizeof(b[4])),
           human((double)st->budget_remote, b[5], sizeof(b[5])),
           human((double)st->budget_sample_tables, b[6], sizeof(b[6])));
}

/* nsum: how many ranks r sums (stall time is a sum, the seconds the slowest rank's). */
static void text_body(const bench_opts *o, const bench_rank *r, double share, int world,
                      uint32_t nsum)
{
    const hdmlp_stats *st = &r->st;
    const bench_derived d = bench_derive(r, share);
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
               " answers; network %s out, %s in (%s lent in shared memory); %" PRIu64
               " peer%s over the same-host path\n",
               st->remote_requests, st->remote_hits, st->prefetch_sent, st->answers_sent,
               human((double)st->net_bytes_out, b1, sizeof(b1)),
               human((double)st->net_bytes_in, b2, sizeof(b2)),
               human((double)st->net_bytes_lent, b3, sizeof(b3)), st->peers_same_host,
               st->peers_same_host == 1 ? "" : "s");
    }
    if (o->plan) {
        return;
    }
    printf("stall      %.3f s waiting for data (%.0f%% of the run%s)\n",
           (double)st->stall_ns * 1e-9,
           100.0 * bench_ratio((double)st->stall_ns * 1e-9, r->seconds * nsum),
           nsum > 1 ? "s, summed over ranks" : "");
    if (o->order == HDMLP_ORDER_STRICT && o->policy == HDMLP_POLICY_AUTO) {
        printf("policy     %s (auto)\n", bench_policy_names[st->policy < 4 ? st->policy : 3]);
    }
    printf("memory     peak %s accounted of %s budget, %" PRIu64
           " abstract chunks; peak RSS %s\n",
           human((double)st->peak_memory_bytes, b1, sizeof(b1)),
           human((double)st->memory_budget, b2, sizeof(b2)), st->abstract_chunks,
           human((double)r->peak_rss_bytes, b3, sizeof(b3)));
    budget_line(st);
    if (!o->plan) {
        printf("outside    %s of loader state, %s of index (not in the budget)\n",
               human((double)st->metadata_bytes, b1, sizeof(b1)),
               human((double)st->index_bytes, b2, sizeof(b2)));
    }
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
        const bench_derived d = bench_derive(r, i < n ? chunks / n : chunks);
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

/* Per-GPU balance: each rank's stall and lead, and the node's max/min stall ratio. */
static void balance_lines(const bench_opts *o, const bench_rank *ranks, uint32_t n)
{
    if (o->plan) {
        return;
    }
    uint64_t hi = ranks[0].st.stall_ns, lo = ranks[0].st.stall_ns;
    for (uint32_t i = 0; i < n; i++) {
        const hdmlp_stats *st = &ranks[i].st;
        hi = st->stall_ns > hi ? st->stall_ns : hi;
        lo = st->stall_ns < lo ? st->stall_ns : lo;
        if (!st->board_active) {
            continue;
        }
        printf("balance    rank %" PRIu32 ": stall %.3f s, lead %" PRIu64
               " samples; held back %" PRIu64 " of %" PRIu64
               " windows, most starved in %" PRIu64 ", idle beside a stall in %" PRIu64
               "; lent up to %.1f MiB, borrowed up to %.1f MiB\n",
               ranks[i].rank, (double)st->stall_ns * 1e-9, st->board_lead_samples,
               st->board_hold_windows, st->board_windows, st->board_starved_windows,
               st->board_idle_windows, (double)st->board_lent_peak / 1048576.0,
               (double)st->board_borrowed_peak / 1048576.0);
    }
    if (n == 1) {
        if (!ranks[0].st.board_active) {
            return;
        }
        hi = ranks[0].st.node_stall_max_ns;
        lo = ranks[0].st.node_stall_min_ns;
    }
    if (n > 1 || ranks[0].st.board_active) {
        printf("node stall max %.3f s / min %.3f s = %.2f (%s)\n", (double)hi * 1e-9,
               (double)lo * 1e-9, lo > 0 ? (double)hi / (double)lo : NAN,
               n > 1 ? "over the ranks" : "as this rank's board last saw them");
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
        balance_lines(o, ranks, 1);
        return;
    }
    bench_rank total;
    bench_total_of(o, ranks, n, &total);
    text_table(o, ranks, n, &total, chunks);
    balance_lines(o, ranks, n);
    printf("total      over %" PRIu32 " ranks (seconds: the slowest rank)\n", n);
    text_body(o, &total, chunks, (int)world, n);
    bench_total_free(&total);
}
