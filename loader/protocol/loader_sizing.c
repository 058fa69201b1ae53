/*
 * Memory sizing: how a budget becomes abstract memory (the loader and the forecast use it).
 *
 * Budget split (all of it accounted): two whole-chunk read buffers (one more for the SSD
 * stager), the RAM chunk cache and, with peers (world > 1), the remote-memory cap for samples
 * they push ahead of need are fixed. Of the rest, a shared part holds whatever is out of the
 * slots: the two batches' worth of the largest samples (so the consumer can always progress
 * while it holds one batch), with peers one more batch for answers to them, and lookahead
 * (samples planned ahead, refills in flight, read buffers of I/O threads beyond two) in
 * whatever the batches leave; it is that worst case, or 1/8 of the rest when that is more.
 * What remains caps the bytes held in valid slots. Each rank gets A_r = that cap / (K × mean
 * raw sample size) abstract chunks;
 * there are A = min(C, world × A_r) in all, and rank r owns the groups g with g % world
 * == r.
 */
#include "loader_sizing.h"

#include "loader_image.h"
#include "loader_refill.h"
#include "loader_sched.h"

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

/* The largest request the dataset's device takes, or LOADER_POOL_REQUEST_DEFAULT. */
static uint64_t device_request(const struct hdmlp_config *cfg)
{
    return cfg->max_request ? cfg->max_request : LOADER_POOL_REQUEST_DEFAULT;
}

uint32_t loader_pool_unit(const fmt_index *ix, const struct hdmlp_config *cfg)
{
    const uint32_t k = ix->h.chunk_size;
    uint64_t r = cfg->pool_reads;
    if (r == 0) {
        const uint64_t c = ix->h.n_chunks ? ix->h.n_chunks : 1;
        const uint64_t mean = loader_aligned_chunk_bytes(ix) / c;
        const uint64_t request = device_request(cfg);
        r = (mean + mean / 8 + request - 1) / request;
        r = r ? r : 1;
    }
    return r >= k ? 1u : (uint32_t)((k + r - 1) / r);
}

/* The largest read of `request` bytes' worth that stays one request once aligned for direct
 * I/O: two alignment blocks less. */
static uint64_t window_of(uint64_t request)
{
    return request > 4 * FMT_ALIGN ? request - 2 * FMT_ALIGN : request;
}

uint64_t loader_table_entry(const fmt_index *ix, int held)
{
    const uint64_t table = (uint64_t)ix->h.chunk_size * ix->h.n_fields * FMT_VALUE_REC_LEN;
    const uint64_t read =
        held
            ? 0
            : table + (table >= FMT_TABLE_MAP_MIN ? LOADER_TABLE_HEAD + LOADER_TABLE_PAGES : 0);
    return read + (uint64_t)ix->h.chunk_size * sizeof(uint64_t);
}

uint64_t loader_table_cache(const fmt_index *ix, int held, uint64_t memory)
{
    const uint64_t entry = loader_table_entry(ix, held);
    const uint64_t share = memory / LOADER_TABLES_SHARE;
    const uint64_t cap =
        LOADER_TABLE_ENTRIES * entry < share ? LOADER_TABLE_ENTRIES * entry : share;
    return cap > entry ? cap : entry;
}

uint64_t loader_table_blocks(const fmt_index *ix, uint64_t memory)
{
    if (ix->h.major != 2) {
        return 0;
    }
    const uint64_t bpc = (ix->h.chunk_size + FMT_TABLE_BLOCK - 1) / FMT_TABLE_BLOCK;
    const uint64_t bytes = ix->h.n_chunks * (bpc * sizeof(uint32_t) + 1);
    return bytes <= memory / LOADER_TABLES_SHARE ? bytes : 0;
}

uint64_t loader_read_buffer(const fmt_index *ix)
{
    const uint64_t chunk = refill_max_buffer(ix);
    const uint64_t table = ix->h.major == 2 ? fmt_table2_scratch(ix) : 0;
    return chunk > table ? chunk : fmt_align_up(table);
}

hdmlp_policy loader_policy(const fmt_index *ix, const struct hdmlp_config *cfg)
{
    if (cfg->policy != HDMLP_POLICY_AUTO) {
        return cfg->policy;
    }
    if (cfg->order != HDMLP_ORDER_STRICT) {
        return HDMLP_POLICY_FILL_RATE; /* not used */
    }
    /* The default request, not the device's: the policy shapes the order, which must not
     * depend on the storage (hdmlp.h). */
    const uint64_t c = ix->h.n_chunks ? ix->h.n_chunks : 1;
    return loader_aligned_chunk_bytes(ix) / c > window_of(LOADER_POOL_REQUEST_DEFAULT)
               ? HDMLP_POLICY_CLAIRVOYANT
               : HDMLP_POLICY_FILL_RATE;
}

uint64_t loader_read_window(const struct hdmlp_config *cfg)
{
    return window_of(device_request(cfg));
}

uint64_t loader_aligned_chunk_bytes(const fmt_index *ix)
{
    uint64_t total = 0;
    for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        total += fmt_align_up(ch.length);
    }
    return total;
}

/* The image pipeline's part (loader_image_pipe.c): output buffers for the batches decoded
 * ahead and the two the consumer may hold, and the raw batches queued for decoding (or held
 * with their images) beyond the two `batches` keeps room for. 0 without a pipeline; UINT64_MAX
 * on overflow. */
static uint64_t image_part(const fmt_index *ix, const struct hdmlp_config *cfg,
                           uint64_t one_batch)
{
    const struct hdmlp_image_config *ic = cfg->image;
    if (ic == NULL) {
        return 0;
    }
    const uint64_t img = image_out_bytes(ic);
    const uint64_t batches = (uint64_t)ic->prefetch + 2;
    /* Field records stay with their decoded batch (hdmlp_batch_fields) until it is
     * released: prefetch + 2 raw batches, not prefetch - 1. */
    const uint64_t raw = ix->fielded ? ic->prefetch : ic->prefetch > 1 ? ic->prefetch - 1u : 0u;
    if (one_batch == UINT64_MAX || img > UINT64_MAX / batches / cfg->batch ||
        (raw > 0 && one_batch > UINT64_MAX / 4 / raw)) {
        return UINT64_MAX;
    }
    return img * cfg->batch * batches + one_batch * raw;
}

/* The fixed parts of a budget of `memory` bytes and the least budget they leave working
 * (each depends on the budget only through the remote cap's default, 10 %, and the RAM
 * cache's AUTO rule). */
typedef struct size_parts {
    uint64_t remote_cap, io, extra_io, one_batch, batches, answers, images, ram;
    uint64_t one_chunk, slot_tables, sample_tables, fixed, hold;
    int held;        /* the sample tables are held */
    uint64_t blocks; /* of sample_tables: their block offsets (loader_table_blocks) */
    uint64_t cache;  /* of sample_tables: the scheduler's table cache (loader_table_cache) */
    uint64_t minimum;
    int overflow; /* a part does not fit 64 bits: no budget works */
} size_parts;

static void size_parts_of(const fmt_index *ix, const struct hdmlp_config *cfg, uint64_t memory,
                          uint64_t one_batch, size_parts *p)
{
    const uint64_t n = ix->h.n_samples;
    const uint32_t k = ix->h.chunk_size;
    const uint64_t mean = ix->h.raw_bytes / n > 0 ? ix->h.raw_bytes / n : 1;
    p->remote_cap = 0;
    if (cfg->world > 1) {
        p->remote_cap = cfg->remote_memory ? cfg->remote_memory : memory / 10;
    }
    const uint64_t max_buf = loader_read_buffer(ix);
    /* Two read buffers and the stager's are reserved; buffers of further I/O threads are
     * charged while they run a job, so the thread count never changes A (nor the order). */
    p->io = max_buf * (LOADER_IO_RESERVED + (cfg->ssd_dir != NULL ? 1u : 0u));
    p->extra_io =
        max_buf * (cfg->threads > LOADER_IO_RESERVED ? cfg->threads - LOADER_IO_RESERVED : 0u);
    /* The batch the consumer holds and the one being assembled: possibly the same samples
     * in two epochs, so twice the largest batch. */
    p->one_batch = one_batch;
    p->batches = 2 * one_batch;
    /* An abstract chunk of each rank: K samples held (each charged with its record) and
     * the slot tables of all ranks' K slots (every rank's scheduler keeps A × K). */
    p->one_chunk = (uint64_t)k * loader_sample_charge(mean);
    p->slot_tables = (uint64_t)k * LOADER_SLOT_META * cfg->world;
    /* With peers, planning also leaves room for one batch of answers to them (the budget's
     * ANSWERS share); reserving it keeps a held batch plus the one being assembled
     * admissible. */
    p->answers = cfg->world > 1 ? one_batch : 0;
    /* The image pipeline's buffers come off the budget first: the rest is sized (and the
     * order chosen) as for a loader without the pipeline given that rest. */
    p->images = image_part(ix, cfg, p->one_batch);
    const uint64_t base = p->io + p->batches + p->remote_cap + p->answers + p->images;
    p->ram = cfg->ram_cache;
    if (p->ram == HDMLP_RAM_CACHE_AUTO) {
        /* Cache every chunk when the budget holds them all (aligned), the reserve above,
         * and abstract memory for an eighth of the dataset (at least two chunks): each chunk
         * is then read from the source once per run. */
        const uint64_t all = loader_aligned_chunk_bytes(ix);
        const uint64_t rest = all / 8 > 2 * p->one_chunk ? all / 8 : 2 * p->one_chunk;
        p->ram = memory >= base + all + rest ? all : 0;
    }
    /* Samples out of slots that must always fit (the batches, answers to peers) share one
     * part of the budget with the lookahead: at least an eighth of what the fixed parts
     * leave, and at least the worst case of what is held, so the consumer always
     * progresses, and lookahead uses what the batches do not. */
    /* A version-2 dataset's sample tables, when they fit a sixteenth of the budget, are held
     * (read whole and checked once) so that planning reads no file (the index itself is
     * O(chunks)); else planning holds at most loader_table_cache bytes of them at once.
     * Their block offsets are kept too where they fit (loader_table_blocks). Planning reads
     * only a miss's candidates' sizes, except the clairvoyant policy, which also reads
     * their offsets: with held tables its scheduler keeps each owned group's last view's
     * offsets (K of them), charged with the slot tables, an owned abstract chunk at a
     * time. */
    p->held = ix->h.major == 2 && ix->h.tables_bytes <= memory / LOADER_TABLES_SHARE;
    p->blocks = loader_table_blocks(ix, memory);
    const int offsets =
        cfg->order == HDMLP_ORDER_STRICT && loader_policy(ix, cfg) == HDMLP_POLICY_CLAIRVOYANT;
    p->cache =
        ix->h.major != 2 || (p->held && offsets) ? 0 : loader_table_cache(ix, p->held, memory);
    p->sample_tables = (p->held ? ix->h.tables_bytes : 0) + p->cache + p->blocks;
    p->slot_tables += p->held && offsets ? (uint64_t)k * sizeof(uint64_t) : 0;
    p->fixed = p->io + p->remote_cap + p->ram + p->images + p->sample_tables;
    p->hold = p->batches + p->answers;
    /* The shared part is max(hold, flex / 8); the thread count never changes it (nor A, nor
     * the order): read buffers of threads beyond two are charged per job, when there is
     * room (loader_worker.c). */
    const uint64_t min_a = p->hold + p->one_chunk;
    const uint64_t min_b = p->one_chunk + (p->one_chunk + 6) / 7;
    p->minimum = p->fixed + (min_a > min_b ? min_a : min_b) + p->slot_tables;
    p->overflow = one_batch > UINT64_MAX / 4 || p->images == UINT64_MAX || p->fixed < p->ram ||
                  p->fixed < p->images;
}

/* The least budget of at least `memory` bytes that covers its own minimum (the minimum grows
 * with the budget through the remote cap's 10 % and the RAM cache's AUTO rule); UINT64_MAX
 * when none does. */
static uint64_t raised_budget(const fmt_index *ix, const struct hdmlp_config *cfg,
                              uint64_t memory, uint64_t one_batch)
{
    /* The remote cap's 10 % shrinks the gap tenfold a step: 64 steps reach any fixed point. */
    for (int i = 0; i < 64; i++) {
        size_parts p;
        size_parts_of(ix, cfg, memory, one_batch, &p);
        if (p.overflow) {
            return UINT64_MAX;
        }
        if (memory >= p.minimum) {
            return memory;
        }
        memory = p.minimum;
    }
    return UINT64_MAX;
}

int loader_size(const fmt_index *ix, const fmt_tables *tables, const struct hdmlp_config *cfg,
                loader_sizing *out)
{
    const uint32_t k = ix->h.chunk_size;
    const uint64_t n = ix->h.n_samples;
    const uint64_t batch = cfg->batch < n ? cfg->batch : n;
    /* The batch of the largest samples: the one figure of sizing that depends on every
     * sample's record, asked of the table source (version 1 scans the index's records). */
    const uint64_t largest = tables->raw_top_sum(tables->ctx, batch);
    /* A batch's samples are charged with their records (loader_sample_charge). */
    const uint64_t one_batch =
        largest == UINT64_MAX ? UINT64_MAX : largest + batch * LOADER_SAMPLE_META;
    if (one_batch == UINT64_MAX) {
        return hd_err(HDMLP_E_NOMEM, "loader: out of memory sizing the budget");
    }
    uint64_t memory = cfg->memory;
    size_parts p;
    size_parts_of(ix, cfg, memory, one_batch, &p);
    if (!p.overflow && memory < p.minimum && cfg->memory_raise) {
        /* A budget given as a share of the dataset is raised to the least that works. */
        const uint64_t raised = raised_budget(ix, cfg, memory, one_batch);
        if (raised != UINT64_MAX) {
            memory = raised;
            size_parts_of(ix, cfg, memory, one_batch, &p);
        }
    }
    if (p.overflow || memory < p.minimum) {
        const uint64_t minimum =
            p.overflow ? UINT64_MAX : raised_budget(ix, cfg, memory, one_batch);
        char have[32], need[32];
        fmt_bytes(have, sizeof(have), cfg->memory);
        fmt_bytes(need, sizeof(need), minimum);
        /* What to ask for instead, also as a share of the data (budgets are often given so) */
        const uint64_t raw = ix->h.raw_bytes ? ix->h.raw_bytes : 1;
        const uint64_t pct = minimum / raw * 100 + ((minimum % raw) * 100 + raw - 1) / raw;
        return hd_err(
            HDMLP_E_RANGE,
            "memory budget %s (%llu bytes) is too small for this dataset: at least %s "
            "(%llu bytes) is needed for one abstract chunk of %u samples, two chunk read "
            "buffers, two batches of the largest samples, the remote memory, the RAM "
            "chunk cache (%llu bytes) and the image pipeline's buffers (%llu bytes); a budget "
            "of %llu bytes (%llu%% of the dataset's raw bytes) works, or a smaller batch size",
            have, (unsigned long long)cfg->memory, need, (unsigned long long)minimum, k,
            (unsigned long long)p.ram,
            (unsigned long long)(p.images == UINT64_MAX ? 0 : p.images),
            (unsigned long long)minimum, (unsigned long long)pct);
    }
    out->memory = memory;
    out->extra_io = p.extra_io;
    /* Planning may fill the budget except what is held outside the accounted bytes (the RAM
     * cache's chunks, the SSD stager's read buffer) and what peers' answers (one batch) and
     * prefetches (the remote cap) may bring in at any time: loader_budget.c's shares. */
    out->read_buffer = loader_read_buffer(ix);
    out->stager = cfg->ssd_dir != NULL ? out->read_buffer : 0;
    out->answers = p.answers;
    out->ram_cache = p.ram;
    const uint64_t flex = memory - p.fixed;
    const uint64_t shared = p.hold > flex / 8 ? p.hold : flex / 8;
    const uint64_t room = flex - shared;
    uint64_t a = room / (p.one_chunk + p.slot_tables);
    a = a < 1 ? 1 : a;
    a = a > ix->h.n_chunks / cfg->world ? ix->h.n_chunks / cfg->world : a;
    /* The slot tables are fixed once A is: what is left holds samples. */
    const uint64_t slot_tables = a * p.slot_tables;
    const uint64_t slot_cap = room - slot_tables;
    a *= cfg->world;
    if (a < cfg->world) {
        return hd_err(
            HDMLP_E_RANGE,
            "loader: %llu chunks cannot be shared by %u ranks (each rank owns at least "
            "one chunk group); use fewer ranks or a smaller chunk size",
            (unsigned long long)ix->h.n_chunks, cfg->world);
    }
    out->abstract_chunks = a;
    out->read_buffers = p.io;
    out->batches = p.batches + p.answers;
    out->lookahead = shared - p.batches - p.answers;
    out->slot_cap = slot_cap;
    out->slot_tables = slot_tables;
    out->sample_tables = p.sample_tables;
    out->tables_held = p.held;
    out->table_blocks = p.blocks;
    out->table_entries = 0;
    if (p.cache != 0) {
        const uint64_t e = p.cache / loader_table_entry(ix, p.held);
        out->table_entries = e < 1 ? 1 : e > UINT32_MAX ? UINT32_MAX : (uint32_t)e;
    }
    out->remote_cap = p.remote_cap;
    out->images = p.images;
    out->pool_unit = cfg->order == HDMLP_ORDER_POOL ? loader_pool_unit(ix, cfg) : 0;
    return HDMLP_OK;
}
