/* Chunk tiers: RAM cache, SSD cache (staging, reuse, verification), placement policy. */
#include "format.h"
#include "hdmlp.h"
#include "loader.h"
#include "loader_dataset.h"
#include "loader_testing.h"
#include "loader_tier.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const testds_spec spec = {2000, 16, 2, 31, 300, 2500, 0, 0, 5, 0};

typedef struct run_result {
    hdmlp_stats st;
    uint64_t epoch_source[8];
    size_t epochs_known;
    int rc;
} run_result;

/* The order of the runs below (the pool order reads each chunk in 4 parts). */
static hdmlp_order run_order = HDMLP_ORDER_STRICT;
/* Whether the runs below start without the SSD stager (loader_testing_stager_off). */
static int stager_off;

/* Runs `epochs` epochs, checking exactly-once and every sample's bytes. */
static run_result run(hdmlp_dataset *ds, double memory_frac, uint64_t ram, const char *ssd,
                      uint64_t ssd_cap, uint64_t epochs)
{
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, (uint64_t)(hdmlp_dataset_raw_bytes(ds) * memory_frac));
    hdmlp_config_set_epochs(cfg, epochs);
    hdmlp_config_set_batch_size(cfg, 16);
    hdmlp_config_set_seed(cfg, 3);
    hdmlp_config_set_ram_cache(cfg, ram);
    hdmlp_config_set_ssd_cache(cfg, ssd, ssd_cap);
    hdmlp_config_set_order(cfg, run_order);
    hdmlp_config_set_pool_reads(cfg, 4);
    loader_testing_stager_off(cfg, stager_off);
    hdmlp_loader *ld = NULL;
    run_result r;
    memset(&r, 0, sizeof(r));
    r.rc = hdmlp_loader_create(ds, cfg, &ld);
    cr_assert_eq(r.rc, HDMLP_OK, "%s", hdmlp_last_error());
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    uint8_t *seen = calloc(n * epochs, 1);
    uint8_t *buf = malloc(spec.max_size + 1);
    hdmlp_batch *b;
    while ((r.rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            cr_assert_eq(seen[hdmlp_batch_epoch(b) * n + v[i].index]++, 0);
            testds_fill(v[i].index, spec.seed, buf, v[i].size);
            cr_assert_eq(memcmp(buf, v[i].data, v[i].size), 0, "sample %llu bytes differ",
                         (unsigned long long)v[i].index);
        }
        hdmlp_batch_release(b);
    }
    cr_assert_eq(r.rc, HDMLP_END, "%s: %s", hdmlp_err_name(r.rc), hdmlp_last_error());
    for (uint64_t i = 0; i < n * epochs; i++) {
        cr_assert_eq(seen[i], 1, "sample %llu of epoch %llu not delivered",
                     (unsigned long long)(i % n), (unsigned long long)(i / n));
    }
    if (ssd != NULL && !stager_off) {
        loader_wait_staged(ld); /* deterministic staging for the checks below */
    }
    hdmlp_loader_stats(ld, &r.st, sizeof r.st);
    hdmlp_loader_epoch_source_bytes(ld, r.epoch_source, 8, &r.epochs_known);
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    free(seen);
    free(buf);
    return r;
}

/* Bytes of every chunk read whole once (without O_DIRECT reads are not padded). */
static uint64_t chunk_bytes(hdmlp_dataset *ds)
{
    uint64_t total = 0;
    for (uint64_t c = 0; c < hdmlp_dataset_chunk_count(ds); c++) {
        fmt_chunk ch;
        fmt_index_chunk(&ds->ix, c, &ch);
        total += ch.length;
    }
    return total;
}

static hdmlp_dataset *make(char *dir, size_t cap)
{
    cr_assert_eq(testds_mkdtemp("tiers", dir, cap), 0);
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    return ds;
}

Test(tiers, dataset_that_fits_is_read_from_the_source_once_per_run, .timeout = 120)
{
    char dir[512];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    const uint64_t all = chunk_bytes(ds);
    /* AUTO: the budget holds the dataset with an eighth to spare (here from about 1.3x the
     * raw bytes, the chunks' alignment included), so every chunk is cached in RAM. */
    const double fracs[] = {1.4, 2.0, 4.0};
    for (size_t i = 0; i < sizeof(fracs) / sizeof(fracs[0]); i++) {
        const run_result r = run(ds, fracs[i], HDMLP_RAM_CACHE_AUTO, NULL, 0, 4);
        printf("fits at %.1fx: source %llu bytes over 4 epochs (dataset %llu), RAM %llu, per "
               "epoch %llu %llu %llu %llu\n",
               fracs[i], (unsigned long long)r.st.source_bytes, (unsigned long long)all,
               (unsigned long long)r.st.ram_cache_bytes, (unsigned long long)r.epoch_source[0],
               (unsigned long long)r.epoch_source[1], (unsigned long long)r.epoch_source[2],
               (unsigned long long)r.epoch_source[3]);
        cr_expect_eq(r.st.source_bytes, all, "%.1fx: each chunk read from the dataset once",
                     fracs[i]);
        cr_expect_eq(r.st.ram_cached_chunks, hdmlp_dataset_chunk_count(ds));
        cr_expect_eq(r.epoch_source[3], 0);
        cr_expect_gt(r.st.ram_cache_bytes, 0);
    }
    /* Without the cache every epoch reads the dataset again. */
    const run_result off = run(ds, 4.0, 0, NULL, 0, 4);
    cr_expect_geq(off.st.source_bytes, 4 * all * 9 / 10);
    /* Below "fits", AUTO caches nothing (the order is that of an explicit 0). */
    const run_result tight = run(ds, 1.0, HDMLP_RAM_CACHE_AUTO, NULL, 0, 2);
    cr_expect_eq(tight.st.ram_cached_chunks, 0);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

static void ssd_staged_then_reused(void)
{
    char dir[512], ssd[600];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    snprintf(ssd, sizeof(ssd), "%s/../%s-ssd", dir, strrchr(dir, '/') + 1);
    /* Staging uses idle I/O capacity only; once the run's consumer is done it finishes. */
    const uint64_t chunks = hdmlp_dataset_chunk_count(ds);
    const run_result first = run(ds, 0.3, 0, ssd, 1ull << 30, 3);
    cr_assert_eq(first.st.ssd_staged_chunks, chunks, "%llu of %llu chunks staged",
                 (unsigned long long)first.st.ssd_staged_chunks, (unsigned long long)chunks);
    const run_result second = run(ds, 0.3, 0, ssd, 1ull << 30, 3);
    printf("ssd: every chunk staged in the first run; then source %llu bytes, ssd %llu bytes\n",
           (unsigned long long)second.st.source_bytes,
           (unsigned long long)second.st.ssd_cache_bytes);
    cr_expect_eq(second.st.source_bytes, 0, "every chunk comes from the SSD cache");
    cr_expect_gt(second.st.ssd_cache_bytes, 0);
    cr_expect_eq(second.st.tier_fallbacks, 0);
    testds_rm_rf(ssd);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(tiers, ssd_cache_is_staged_then_reused_by_the_next_run, .timeout = 120)
{
    ssd_staged_then_reused();
}

Test(tiers, pool_order_stages_and_reuses_the_ssd_cache, .timeout = 120)
{
    run_order = HDMLP_ORDER_POOL;
    ssd_staged_then_reused();
}

static uint64_t cache_files(const char *ssd, uint64_t *tmp_files)
{
    uint64_t n = 0;
    *tmp_files = 0;
    DIR *d = opendir(ssd);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        n += strstr(e->d_name, "-chunk-") != NULL && strstr(e->d_name, "tmp") == NULL;
        *tmp_files += strstr(e->d_name, "tmp") != NULL;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* A loader bound by its source has no idle I/O for the stager's own reads: the first loads
 * of SSD chunks (read whole) stage them instead, every one of them. Files staged that way
 * (padded to the chunk's alignment) must be adopted and verified by the next run. */
Test(tiers, first_loads_stage_chunks_without_idle_io, .timeout = 120)
{
    char dir[512], ssd[600];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    snprintf(ssd, sizeof(ssd), "%s/../%s-ssd", dir, strrchr(dir, '/') + 1);
    const uint64_t chunks = hdmlp_dataset_chunk_count(ds);
    stager_off = 1;
    const run_result first = run(ds, 0.3, 0, ssd, 1ull << 30, 2);
    stager_off = 0;
    uint64_t tmp = 0;
    const uint64_t files = cache_files(ssd, &tmp);
    printf("stager off: %llu of %llu chunks staged by their first loads; source %llu %llu\n",
           (unsigned long long)files, (unsigned long long)chunks,
           (unsigned long long)first.epoch_source[0],
           (unsigned long long)first.epoch_source[1]);
    cr_expect_eq(files, chunks, "every chunk's first load stages it");
    cr_expect_eq(first.st.ssd_staged_chunks, chunks);
    cr_expect_eq(tmp, 0, "temporary cache files left behind");
    cr_expect_eq(first.epoch_source[1], 0, "epoch 1 still read the source");
    /* The next run adopts them (verified) and reads nothing from the source. */
    const run_result second = run(ds, 0.3, 0, ssd, 1ull << 30, 2);
    cr_expect_eq(second.st.tier_fallbacks, 0, "a staged cache file failed verification");
    cr_expect_eq(second.st.ssd_staged_chunks, 0);
    cr_expect_eq(second.st.source_bytes, 0);
    testds_rm_rf(ssd);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(tiers, bad_or_missing_cache_files_fall_back_to_the_source, .timeout = 120)
{
    char dir[512], ssd[600];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    snprintf(ssd, sizeof(ssd), "%s/../%s-ssd", dir, strrchr(dir, '/') + 1);
    const run_result first = run(ds, 0.3, 0, ssd, 1ull << 30, 2);
    cr_assert_gt(first.st.ssd_staged_chunks, 1);
    /* Flip a payload byte in one cache file and delete another. */
    DIR *d = opendir(ssd);
    struct dirent *e;
    int flipped = 0, deleted = 0;
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, "-chunk-") == NULL) {
            continue;
        }
        char p[1200];
        snprintf(p, sizeof(p), "%s/%s", ssd, e->d_name);
        if (!flipped) {
            FILE *f = fopen(p, "r+b");
            fseek(f, 200, SEEK_SET);
            const int c = fgetc(f);
            fseek(f, 200, SEEK_SET);
            fputc(c ^ 0x40, f);
            fclose(f);
            flipped = 1;
        } else if (!deleted) {
            unlink(p);
            deleted = 1;
        }
    }
    closedir(d);
    /* The second run verifies every sample's bytes (run() compares them). */
    const run_result second = run(ds, 0.3, 0, ssd, 1ull << 30, 2);
    printf("fallbacks after corrupting one cache file: %llu\n",
           (unsigned long long)second.st.tier_fallbacks);
    cr_expect_geq(second.st.tier_fallbacks, 1, "the corrupt file is detected and reported");
    testds_rm_rf(ssd);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(tiers, placement_follows_load_order_and_capacities, .timeout = 30)
{
    char dir[512];
    hdmlp_dataset *ds = make(dir, sizeof(dir));
    const fmt_index *ix = &ds->ix;
    const uint64_t c = hdmlp_dataset_chunk_count(ds);
    uint64_t *loads = calloc(c, sizeof(uint64_t));
    uint64_t *first = calloc(c, sizeof(uint64_t));
    for (uint64_t i = 0; i < c; i++) {
        loads[i] = (i * 7919) % 13 + 1; /* distinct-ish counts */
        first[i] = c - i;               /* later chunks are used first */
    }
    fmt_chunk ch;
    fmt_index_chunk(ix, 0, &ch);
    const uint64_t one = fmt_align_up(ch.length);
    const tier_params tp = {5 * one, NULL, 0, 1, 0};
    tier *t = NULL;
    cr_assert_eq(tier_create(ix, &tp, loads, first, &t), HDMLP_OK, "%s", hdmlp_last_error());
    uint64_t min_ram = UINT64_MAX, max_rest = 0, ram_bytes = 0;
    for (uint64_t i = 0; i < c; i++) {
        fmt_index_chunk(ix, i, &ch);
        if (tier_placement(t, i) == TIER_RAM) {
            min_ram = loads[i] < min_ram ? loads[i] : min_ram;
            ram_bytes += fmt_align_up(ch.length);
        } else {
            max_rest = loads[i] > max_rest ? loads[i] : max_rest;
        }
    }
    cr_expect_leq(ram_bytes, tp.ram_bytes, "RAM placement within its capacity");
    cr_expect_geq(min_ram, max_rest, "RAM holds the most-loaded chunks");
    tier_free(t);
    free(loads);
    free(first);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}
