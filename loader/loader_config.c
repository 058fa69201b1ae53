/* Loader configuration: typed, range-checked setters. */
#include "loader.h"

#include <math.h>

void config_defaults(struct hdmlp_config *cfg)
{
    cfg->memory = 256ull << 20;
    cfg->batch = 32;
    cfg->seed = 0;
    cfg->epochs = 1;
    cfg->drop_last = 0;
    cfg->rank = 0;
    cfg->world = 1;
    cfg->threads = 2;
    cfg->engine = HDMLP_ENGINE_AUTO;
    cfg->direct = 0;
    cfg->lookahead = 0;
    cfg->policy = HDMLP_POLICY_FILL_RATE;
    cfg->refill = HDMLP_REFILL_AUTO;
    cfg->op_us = 100.0;
    cfg->bytes_per_s = 1e9;
}

int hdmlp_config_create(hdmlp_config **out)
{
    *out = hd_calloc(1, sizeof(**out));
    if (*out == NULL) {
        return hd_err(HDMLP_E_NOMEM, "config: out of memory");
    }
    config_defaults(*out);
    return HDMLP_OK;
}

void hdmlp_config_free(hdmlp_config *cfg) { hd_free(cfg); }

#define CHECK_CFG(cfg)                                                                         \
    do {                                                                                       \
        if ((cfg) == NULL) {                                                                   \
            return hd_err(HDMLP_E_INVAL, "config is NULL");                                    \
        }                                                                                      \
    } while (0)

int hdmlp_config_set_memory(hdmlp_config *cfg, uint64_t bytes)
{
    CHECK_CFG(cfg);
    if (bytes < 4096) {
        return hd_err(HDMLP_E_INVAL, "memory: %llu bytes is below the minimum of 4096",
                      (unsigned long long)bytes);
    }
    cfg->memory = bytes;
    return HDMLP_OK;
}

int hdmlp_config_set_batch_size(hdmlp_config *cfg, uint32_t n)
{
    CHECK_CFG(cfg);
    if (n < 1 || n > (1u << 20)) {
        return hd_err(HDMLP_E_INVAL, "batch_size: %u is outside 1..1048576", n);
    }
    cfg->batch = n;
    return HDMLP_OK;
}

int hdmlp_config_set_seed(hdmlp_config *cfg, uint64_t seed)
{
    CHECK_CFG(cfg);
    cfg->seed = seed;
    return HDMLP_OK;
}

int hdmlp_config_set_epochs(hdmlp_config *cfg, uint64_t epochs)
{
    CHECK_CFG(cfg);
    cfg->epochs = epochs;
    return HDMLP_OK;
}

int hdmlp_config_set_drop_last(hdmlp_config *cfg, int drop_last)
{
    CHECK_CFG(cfg);
    if (drop_last != 0 && drop_last != 1) {
        return hd_err(HDMLP_E_INVAL, "drop_last: %d is not 0 or 1", drop_last);
    }
    cfg->drop_last = drop_last;
    return HDMLP_OK;
}

int hdmlp_config_set_rank(hdmlp_config *cfg, uint32_t rank, uint32_t world)
{
    CHECK_CFG(cfg);
    if (world < 1 || rank >= world) {
        return hd_err(HDMLP_E_INVAL, "rank: %u of world %u (need world >= 1, rank < world)",
                      rank, world);
    }
    cfg->rank = rank;
    cfg->world = world;
    return HDMLP_OK;
}

int hdmlp_config_set_threads(hdmlp_config *cfg, uint32_t n)
{
    CHECK_CFG(cfg);
    if (n < 1 || n > 64) {
        return hd_err(HDMLP_E_INVAL, "threads: %u is outside 1..64", n);
    }
    cfg->threads = n;
    return HDMLP_OK;
}

int hdmlp_config_set_engine(hdmlp_config *cfg, hdmlp_engine engine)
{
    CHECK_CFG(cfg);
    if (engine != HDMLP_ENGINE_AUTO && engine != HDMLP_ENGINE_PREAD &&
        engine != HDMLP_ENGINE_IO_URING) {
        return hd_err(HDMLP_E_INVAL, "engine: %d is not auto, pread or io_uring", (int)engine);
    }
    cfg->engine = engine;
    return HDMLP_OK;
}

int hdmlp_config_set_direct_io(hdmlp_config *cfg, int on)
{
    CHECK_CFG(cfg);
    if (on != 0 && on != 1) {
        return hd_err(HDMLP_E_INVAL, "direct_io: %d is not 0 or 1", on);
    }
    cfg->direct = on;
    return HDMLP_OK;
}

int hdmlp_config_set_lookahead(hdmlp_config *cfg, uint64_t requests)
{
    CHECK_CFG(cfg);
    cfg->lookahead = requests;
    return HDMLP_OK;
}

int hdmlp_config_set_policy(hdmlp_config *cfg, hdmlp_policy policy)
{
    CHECK_CFG(cfg);
    if (policy != HDMLP_POLICY_FILL_RATE && policy != HDMLP_POLICY_RANDOM) {
        return hd_err(HDMLP_E_INVAL, "policy: %d is not fill-rate or random", (int)policy);
    }
    cfg->policy = policy;
    return HDMLP_OK;
}

int hdmlp_config_set_refill(hdmlp_config *cfg, hdmlp_refill refill)
{
    CHECK_CFG(cfg);
    if (refill != HDMLP_REFILL_AUTO && refill != HDMLP_REFILL_WHOLE &&
        refill != HDMLP_REFILL_RANGES) {
        return hd_err(HDMLP_E_INVAL, "refill: %d is not auto, whole or ranges", (int)refill);
    }
    cfg->refill = refill;
    return HDMLP_OK;
}

int hdmlp_config_set_storage_cost(hdmlp_config *cfg, double op_us, double bytes_per_s)
{
    CHECK_CFG(cfg);
    if (!(op_us >= 0.0 && op_us <= 1e7) || isnan(op_us)) {
        return hd_err(HDMLP_E_INVAL, "storage_cost: op_us %g is outside 0..1e7", op_us);
    }
    if (!(bytes_per_s > 0.0) || isinf(bytes_per_s)) {
        return hd_err(HDMLP_E_INVAL, "storage_cost: bandwidth %g bytes/s must be > 0",
                      bytes_per_s);
    }
    cfg->op_us = op_us;
    cfg->bytes_per_s = bytes_per_s;
    return HDMLP_OK;
}
