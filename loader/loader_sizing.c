/*
 * Memory sizing: how a budget becomes abstract memory (the loader and the forecast use it).
 *
 * Budget split (all of it accounted): one whole-chunk read buffer and two batches of the
 * largest sample are reserved so the consumer can always progress while it holds one
 * batch; the remote-memory cap (world > 1) is set aside for samples peers push ahead of
 * need; of the rest, 1/8 is lookahead room (samples planned ahead and refills in flight)
 * and 7/8 caps the bytes held in valid slots. Each rank gets A_r = that cap /
 * (K × mean raw sample size) abstract chunks; there are A = min(C, world × A_r) in all,
 * and rank r owns the groups g with g % world == r.
 */
#include "loader_sizing.h"

#include "loader_refill.h"

#include <stdio.h>

static void fmt_bytes(char *buf, size_t cap, uint64_t v)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024.0 && u < 4) {
        d /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", d, units[u]);
}

/* Sizes abstract memory; HDMLP_E_RANGE naming the minimum if the budget is too small. */
int loader_size(const fmt_index *ix, const struct hdmlp_config *cfg, loader_sizing *out)
{
    const uint64_t n = ix->h.n_samples;
    const uint32_t k = ix->h.chunk_size;
    uint64_t max_raw = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t raw = fmt_ld64(ix->samples + i * FMT_SAMPLE_REC_LEN + 16);
        max_raw = raw > max_raw ? raw : max_raw;
    }
    const uint64_t mean = ix->h.raw_bytes / n > 0 ? ix->h.raw_bytes / n : 1;
    const uint64_t batch = cfg->batch < n ? cfg->batch : n;
    uint64_t remote_cap = 0;
    if (cfg->world > 1) {
        remote_cap = cfg->remote_memory ? cfg->remote_memory : cfg->memory / 10;
    }
    const uint64_t reserve = refill_max_buffer(ix) + 2 * batch * max_raw + remote_cap;
    const uint64_t one_chunk = (uint64_t)k * mean;
    const uint64_t minimum = reserve + one_chunk + (one_chunk + 6) / 7;
    if (cfg->memory < minimum) {
        char have[32], need[32];
        fmt_bytes(have, sizeof(have), cfg->memory);
        fmt_bytes(need, sizeof(need), minimum);
        return hd_err(
            HDMLP_E_RANGE,
            "memory budget %s (%llu bytes) is too small for this dataset: at least %s "
            "(%llu bytes) is needed for one abstract chunk of %u samples, a chunk read "
            "buffer, two batches of the largest sample and the remote memory",
            have, (unsigned long long)cfg->memory, need, (unsigned long long)minimum, k);
    }
    const uint64_t avail = cfg->memory - reserve;
    const uint64_t slot_cap = avail - avail / 8;
    uint64_t a = slot_cap / one_chunk;
    a = a < 1 ? 1 : a;
    a = a > ix->h.n_chunks / cfg->world ? ix->h.n_chunks / cfg->world : a;
    a *= cfg->world;
    if (a < cfg->world) {
        return hd_err(
            HDMLP_E_RANGE,
            "loader: %llu chunks cannot be shared by %u ranks (each rank owns at least "
            "one chunk group); use fewer ranks or a smaller chunk size",
            (unsigned long long)ix->h.n_chunks, cfg->world);
    }
    out->abstract_chunks = a;
    out->slot_cap = slot_cap;
    out->remote_cap = remote_cap;
    return HDMLP_OK;
}
