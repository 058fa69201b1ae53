/* hdmlp-bench output (see bench_report.h): the option names, a job's total and the derived
 * figures (bench_figures.h); the JSON object is written by bench_report_json.c, the
 * human-readable summary by bench_report_text.c. */
#include "bench_report.h"

#include "bench_figures.h"

#include <stdlib.h>
#include <string.h>

const char *const bench_engine_names[3] = {"auto", "pread", "io_uring"};
const char *const bench_policy_names[4] = {"fill-rate", "random", "clairvoyant", "auto"};
const char *const bench_order_names[2] = {"strict", "pool"};
const char *const bench_refill_names[3] = {"auto", "whole", "ranges"};

double bench_ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

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
        t->net_bytes_lent += s->net_bytes_lent;
        t->peers_same_host += s->peers_same_host;
        t->source_bytes += s->source_bytes;
        t->ram_cache_bytes += s->ram_cache_bytes;
        t->ssd_cache_bytes += s->ssd_cache_bytes;
        t->ram_cached_chunks += s->ram_cached_chunks;
        t->ssd_staged_chunks += s->ssd_staged_chunks;
        t->tier_fallbacks += s->tier_fallbacks;
        t->cost_replans += s->cost_replans;
        t->remote_peak = s->remote_peak > t->remote_peak ? s->remote_peak : t->remote_peak;
        t->refills_in_flight_peak = s->refills_in_flight_peak > t->refills_in_flight_peak
                                        ? s->refills_in_flight_peak
                                        : t->refills_in_flight_peak;
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
        t->order = ranks[0].st.order;
        t->pool_unit = ranks[0].st.pool_unit;
        t->policy = ranks[0].st.policy;
        t->source_op_ns = ranks[0].st.source_op_ns;
        t->source_bytes_per_s = ranks[0].st.source_bytes_per_s;
        t->ssd_op_ns = ranks[0].st.ssd_op_ns;
        t->ssd_bytes_per_s = ranks[0].st.ssd_bytes_per_s;
    }
}

void bench_total_of(const bench_opts *o, const bench_rank *ranks, uint32_t n, bench_rank *t)
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

void bench_total_free(bench_rank *t)
{
    free(t->epoch_seconds);
    free(t->epoch_source_bytes);
}

bench_derived bench_derive(const bench_rank *r, double share)
{
    const hdmlp_stats *st = &r->st;
    const double epochs = st->epochs > 0 ? (double)st->epochs : 1.0;
    bench_derived d;

    d.samples_per_s = bench_ratio((double)st->samples, r->seconds);
    d.mb_per_s = bench_ratio((double)st->bytes_delivered, r->seconds) / 1e6;
    d.read_amplification = bench_ratio((double)st->bytes_read, (double)st->bytes_delivered);
    d.loads_per_chunk = bench_ratio((double)st->chunk_loads, share * epochs);
    d.ops_per_sample = bench_ratio((double)st->read_ops, (double)st->samples);
    d.seconds_per_epoch = r->seconds / epochs;
    return d;
}
