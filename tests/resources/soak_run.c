/*
 * rel_soak's datasets and runs: test datasets under the run's scratch directory, configs,
 * and whole loader runs checked exactly once per epoch (see soak.c).
 */
#include "resources/soak.h"

#include <string.h>

int failures;

/* ---- datasets and runs ------------------------------------------------------------------ */

char base_dir[4096];

void make_dataset(const char *name, const testds_spec *spec, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/%s", base_dir, name);
    REQUIRE(testds_write(dir, spec) == HDMLP_OK, "writing %s: %s", dir, hdmlp_last_error());
}

hdmlp_config *config(uint64_t memory, uint32_t threads, uint64_t epochs)
{
    hdmlp_config *cfg = NULL;
    REQUIRE(hdmlp_config_create(&cfg) == HDMLP_OK, "config");
    REQUIRE(hdmlp_config_set_memory(cfg, memory) == HDMLP_OK, "memory: %s", hdmlp_last_error());
    REQUIRE(hdmlp_config_set_batch_size(cfg, 16) == HDMLP_OK, "batch");
    REQUIRE(hdmlp_config_set_threads(cfg, threads) == HDMLP_OK, "threads");
    REQUIRE(hdmlp_config_set_epochs(cfg, epochs) == HDMLP_OK, "epochs");
    REQUIRE(hdmlp_config_set_seed(cfg, 12345) == HDMLP_OK, "seed");
    REQUIRE(hdmlp_config_set_lookahead(cfg, 0) == HDMLP_OK, "lookahead");
    REQUIRE(hdmlp_config_set_ram_cache(cfg, 0) == HDMLP_OK, "ram cache");
    return cfg;
}

/* Per-epoch delivery check: every sample exactly once. */
void ec_init(epoch_check *ec, uint64_t n)
{
    ec->n = n;
    ec->seen = calloc((size_t)n, 1);
    REQUIRE(ec->seen != NULL, "calloc");
    ec->epoch = 0;
    ec->count = 0;
}

/* Closes the current epoch: all n seen once. */
void ec_close(epoch_check *ec)
{
    CHECK(ec->count == ec->n, "epoch %llu delivered %llu of %llu samples",
          (unsigned long long)ec->epoch, (unsigned long long)ec->count,
          (unsigned long long)ec->n);
    memset(ec->seen, 0, (size_t)ec->n);
    ec->count = 0;
}

/* Returns 1 when this batch starts a new epoch (the previous one was closed). */
int ec_batch(epoch_check *ec, const hdmlp_batch *b)
{
    int new_epoch = 0;
    const uint64_t e = hdmlp_batch_epoch(b);
    if (e != ec->epoch) {
        CHECK(e == ec->epoch + 1, "epoch jumped from %llu to %llu",
              (unsigned long long)ec->epoch, (unsigned long long)e);
        ec_close(ec);
        ec->epoch = e;
        new_epoch = 1;
    }
    const hdmlp_sample_view *const v = hdmlp_batch_samples(b);
    for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
        CHECK(v[i].index < ec->n && !ec->seen[v[i].index], "sample %llu twice in epoch %llu",
              (unsigned long long)v[i].index, (unsigned long long)ec->epoch);
        if (v[i].index < ec->n) {
            ec->seen[v[i].index] = 1;
        }
        ec->count++;
    }
    return new_epoch;
}

/* Runs a whole loader; returns the final code (HDMLP_END on success). */
int run_all(hdmlp_dataset *ds, const hdmlp_config *cfg, hdmlp_stats *st)
{
    hdmlp_loader *ld = NULL;
    int rc = hdmlp_loader_create(ds, cfg, &ld);
    if (rc != HDMLP_OK) {
        return rc;
    }
    epoch_check ec;
    ec_init(&ec, hdmlp_dataset_sample_count(ds));
    hdmlp_batch *b;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        ec_batch(&ec, b);
        hdmlp_batch_release(b);
    }
    if (rc == HDMLP_END) {
        ec_close(&ec);
    }
    if (st) {
        hdmlp_loader_stats(ld, st, sizeof *st);
    }
    free(ec.seen);
    hdmlp_loader_free(ld);
    return rc;
}
