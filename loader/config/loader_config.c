/* Loader configuration: typed, range-checked setters. */
#include "loader.h"
#include "loader_image.h"

#include <math.h>
#include <string.h>

void config_defaults(struct hdmlp_config *cfg)
{
    cfg->memory = 256ull << 20;
    cfg->batch = 32;
    cfg->seed = 0;
    cfg->epochs = 1;
    cfg->start_epoch = 0;
    cfg->drop_last = 0;
    cfg->rank = 0;
    cfg->world = 1;
    cfg->threads = 2;
    cfg->engine = HDMLP_ENGINE_AUTO;
    cfg->direct = HDMLP_DIRECT_IO_AUTO;
    cfg->learn = 1;
    cfg->lookahead = 0;
    cfg->policy = HDMLP_POLICY_AUTO;
    cfg->refill = HDMLP_REFILL_AUTO;
    cfg->op_us = 100.0;
    cfg->bytes_per_s = 1e9;
    cfg->ram_cache = HDMLP_RAM_CACHE_AUTO;
    cfg->ssd_dir = NULL;
    cfg->ssd_capacity = 0;
    cfg->peers = NULL;
    cfg->n_peers = 0;
    cfg->listen = NULL;
    cfg->token = 0;
    cfg->tls_ca = NULL;
    cfg->tls_cert = NULL;
    cfg->tls_key = NULL;
    cfg->remote_memory = 0;
    cfg->prefetch = 256;
    cfg->peer_timeout_ms = 5000;
    cfg->peer_arena = 0;
    cfg->same_host = 1;
    cfg->node_board = HDMLP_NODE_BOARD_AUTO;
    cfg->image = NULL;
}

static char *dup_str(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *d = hd_malloc(n);
    if (d != NULL) {
        memcpy(d, s, n);
    }
    return d;
}

static void free_peers(char **peers, uint32_t n)
{
    if (peers != NULL) {
        for (uint32_t i = 0; i < n; i++) {
            hd_free(peers[i]);
        }
        hd_free(peers);
    }
}

static char **dup_peers(const char *const *src, uint32_t n)
{
    char **p = hd_calloc(n, sizeof(char *));
    for (uint32_t i = 0; p != NULL && i < n; i++) {
        p[i] = dup_str(src[i]);
        if (p[i] == NULL) {
            free_peers(p, n);
            p = NULL;
        }
    }
    return p;
}

void config_clear(struct hdmlp_config *cfg)
{
    free_peers(cfg->peers, cfg->n_peers);
    hd_free(cfg->listen);
    hd_free(cfg->ssd_dir);
    hd_free(cfg->tls_ca);
    hd_free(cfg->tls_cert);
    hd_free(cfg->tls_key);
    hd_free(cfg->image);
    cfg->image = NULL;
    cfg->peers = NULL;
    cfg->n_peers = 0;
    cfg->listen = NULL;
    cfg->ssd_dir = NULL;
    cfg->tls_ca = cfg->tls_cert = cfg->tls_key = NULL;
}

/* *dst = a copy of src (NULL stays NULL); 0, or -1 when out of memory. */
static int dup_opt(char **dst, const char *src)
{
    *dst = src != NULL ? dup_str(src) : NULL;
    return src != NULL && *dst == NULL ? -1 : 0;
}

int config_copy(struct hdmlp_config *dst, const struct hdmlp_config *src)
{
    *dst = *src;
    dst->peers = NULL;
    dst->listen = NULL;
    dst->ssd_dir = NULL;
    dst->tls_ca = dst->tls_cert = dst->tls_key = NULL;
    dst->image = NULL;
    if (src->peers != NULL) {
        dst->peers = dup_peers((const char *const *)src->peers, src->n_peers);
    }
    int fail = src->peers != NULL && dst->peers == NULL;
    fail |= dup_opt(&dst->listen, src->listen);
    fail |= dup_opt(&dst->ssd_dir, src->ssd_dir);
    fail |= dup_opt(&dst->tls_ca, src->tls_ca);
    fail |= dup_opt(&dst->tls_cert, src->tls_cert);
    fail |= dup_opt(&dst->tls_key, src->tls_key);
    dst->image = NULL;
    if (src->image != NULL) {
        dst->image = hd_malloc(sizeof(*dst->image));
        if (dst->image != NULL) {
            *dst->image = *src->image;
        }
        fail |= dst->image == NULL;
    }
    if (fail) {
        config_clear(dst);
        return hd_err(HDMLP_E_NOMEM, "config: out of memory");
    }
    return HDMLP_OK;
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

void hdmlp_config_free(hdmlp_config *cfg)
{
    if (cfg != NULL) {
        config_clear(cfg);
        hd_free(cfg);
    }
}

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

int hdmlp_config_set_memory_raise(hdmlp_config *cfg, int on)
{
    CHECK_CFG(cfg);
    cfg->memory_raise = on != 0;
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
    if (on != 0 && on != 1 && on != HDMLP_DIRECT_IO_AUTO) {
        return hd_err(HDMLP_E_INVAL, "direct_io: %d is not 0, 1 or HDMLP_DIRECT_IO_AUTO (%d)",
                      on, HDMLP_DIRECT_IO_AUTO);
    }
    cfg->direct = on;
    return HDMLP_OK;
}

int hdmlp_config_set_cost_learning(hdmlp_config *cfg, int on)
{
    CHECK_CFG(cfg);
    if (on != 0 && on != 1) {
        return hd_err(HDMLP_E_INVAL, "cost_learning: %d is not 0 or 1", on);
    }
    cfg->learn = on;
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
    if (policy != HDMLP_POLICY_FILL_RATE && policy != HDMLP_POLICY_RANDOM &&
        policy != HDMLP_POLICY_CLAIRVOYANT && policy != HDMLP_POLICY_AUTO) {
        return hd_err(HDMLP_E_INVAL, "policy: %d is not auto, fill-rate, random or clairvoyant",
                      (int)policy);
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
    cfg->cost_set = 1;
    return HDMLP_OK;
}

/* "host:port" with a non-empty host and a port 0..65535 ("[v6]:port" allowed). */
static int endpoint_ok(const char *e)
{
    const char *colon = e != NULL ? strrchr(e, ':') : NULL;
    if (colon == NULL || colon == e || colon[1] == '\0' || strlen(colon + 1) > 5) {
        return 0;
    }
    long port = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9') {
            return 0;
        }
        port = port * 10 + (*p - '0');
    }
    return port <= 65535;
}

int hdmlp_config_set_peers(hdmlp_config *cfg, const char *const *endpoints, uint32_t n)
{
    CHECK_CFG(cfg);
    if (endpoints == NULL || n < 1 || n > 65536) {
        return hd_err(HDMLP_E_INVAL, "peers: need 1..65536 endpoints, got %u", n);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!endpoint_ok(endpoints[i])) {
            return hd_err(HDMLP_E_INVAL, "peers: endpoint %u \"%s\" is not host:port", i,
                          endpoints[i] ? endpoints[i] : "(null)");
        }
    }
    char **p = dup_peers(endpoints, n);
    if (p == NULL) {
        return hd_err(HDMLP_E_NOMEM, "peers: out of memory");
    }
    free_peers(cfg->peers, cfg->n_peers);
    cfg->peers = p;
    cfg->n_peers = n;
    return HDMLP_OK;
}

int hdmlp_config_set_listen(hdmlp_config *cfg, const char *address)
{
    CHECK_CFG(cfg);
    if (!endpoint_ok(address)) {
        return hd_err(HDMLP_E_INVAL, "listen: \"%s\" is not host:port",
                      address ? address : "(null)");
    }
    char *d = dup_str(address);
    if (d == NULL) {
        return hd_err(HDMLP_E_NOMEM, "listen: out of memory");
    }
    hd_free(cfg->listen);
    cfg->listen = d;
    return HDMLP_OK;
}

int hdmlp_config_set_job_token(hdmlp_config *cfg, uint64_t token)
{
    CHECK_CFG(cfg);
    cfg->token = token;
    return HDMLP_OK;
}

int hdmlp_config_set_tls(hdmlp_config *cfg, const char *ca_file, const char *cert_file,
                         const char *key_file)
{
    CHECK_CFG(cfg);
    const char *const names[3] = {"ca_file", "cert_file", "key_file"};
    const char *const paths[3] = {ca_file, cert_file, key_file};
    const int given = (ca_file != NULL) + (cert_file != NULL) + (key_file != NULL);
    if (given != 0 && given != 3) {
        for (int i = 0; i < 3; i++) {
            if (paths[i] == NULL) {
                return hd_err(HDMLP_E_INVAL,
                              "tls: %s is NULL; give the CA, certificate and key files "
                              "together (or all NULL for no TLS)",
                              names[i]);
            }
        }
    }
    for (int i = 0; given == 3 && i < 3; i++) {
        if (paths[i][0] == '\0') {
            return hd_err(HDMLP_E_INVAL, "tls: %s is an empty path", names[i]);
        }
    }
    char *d[3] = {NULL, NULL, NULL};
    int fail = 0;
    for (int i = 0; i < 3; i++) {
        fail |= dup_opt(&d[i], paths[i]);
    }
    if (fail) {
        for (int i = 0; i < 3; i++) {
            hd_free(d[i]);
        }
        return hd_err(HDMLP_E_NOMEM, "tls: out of memory");
    }
    hd_free(cfg->tls_ca);
    hd_free(cfg->tls_cert);
    hd_free(cfg->tls_key);
    cfg->tls_ca = d[0];
    cfg->tls_cert = d[1];
    cfg->tls_key = d[2];
    return HDMLP_OK;
}

int hdmlp_config_set_remote_memory(hdmlp_config *cfg, uint64_t bytes)
{
    CHECK_CFG(cfg);
    cfg->remote_memory = bytes;
    return HDMLP_OK;
}

int hdmlp_config_set_prefetch(hdmlp_config *cfg, uint32_t window)
{
    CHECK_CFG(cfg);
    if (window > (1u << 20)) {
        return hd_err(HDMLP_E_INVAL, "prefetch: window %u is above 1048576", window);
    }
    cfg->prefetch = window;
    return HDMLP_OK;
}

int hdmlp_config_set_peer_timeout(hdmlp_config *cfg, uint32_t timeout_ms)
{
    CHECK_CFG(cfg);
    if (timeout_ms < 100 || timeout_ms > 3600000) {
        return hd_err(HDMLP_E_INVAL, "peer_timeout: %u ms is outside 100..3600000", timeout_ms);
    }
    cfg->peer_timeout_ms = timeout_ms;
    return HDMLP_OK;
}

int hdmlp_config_set_same_host(hdmlp_config *cfg, int mode)
{
    CHECK_CFG(cfg);
    if (mode != HDMLP_SAME_HOST_TCP && mode != HDMLP_SAME_HOST_SHM &&
        mode != HDMLP_SAME_HOST_SOCKET) {
        return hd_err(HDMLP_E_INVAL, "same_host: %d is not 0 (tcp), 1 (shm) or 2 (socket)",
                      mode);
    }
    cfg->same_host = mode;
    return HDMLP_OK;
}

int hdmlp_config_set_node_board(hdmlp_config *cfg, int mode)
{
    CHECK_CFG(cfg);
    if (mode != HDMLP_NODE_BOARD_OFF && mode != HDMLP_NODE_BOARD_AUTO &&
        mode != HDMLP_NODE_BOARD_ON) {
        return hd_err(HDMLP_E_INVAL, "node_board: %d is not 0 (off), 1 (auto) or 2 (on)", mode);
    }
    cfg->node_board = mode;
    return HDMLP_OK;
}

int hdmlp_config_set_ram_cache(hdmlp_config *cfg, uint64_t bytes)
{
    CHECK_CFG(cfg);
    cfg->ram_cache = bytes;
    return HDMLP_OK;
}

int hdmlp_config_set_ssd_cache(hdmlp_config *cfg, const char *dir, uint64_t capacity)
{
    CHECK_CFG(cfg);
    char *d = NULL;
    if (dir != NULL && capacity != 0) {
        if (dir[0] == '\0') {
            return hd_err(HDMLP_E_INVAL, "ssd_cache: empty directory name");
        }
        d = dup_str(dir);
        if (d == NULL) {
            return hd_err(HDMLP_E_NOMEM, "ssd_cache: out of memory");
        }
    }
    hd_free(cfg->ssd_dir);
    cfg->ssd_dir = d;
    cfg->ssd_capacity = d != NULL ? capacity : 0;
    return HDMLP_OK;
}

int hdmlp_config_set_start_epoch(hdmlp_config *cfg, uint64_t epoch)
{
    CHECK_CFG(cfg);
    cfg->start_epoch = epoch;
    return HDMLP_OK;
}

uint32_t hdmlp_config_rank(const hdmlp_config *cfg) { return cfg ? cfg->rank : 0; }

uint32_t hdmlp_config_world(const hdmlp_config *cfg) { return cfg ? cfg->world : 1; }

uint64_t hdmlp_config_seed(const hdmlp_config *cfg) { return cfg ? cfg->seed : 0; }

int hdmlp_config_set_order(hdmlp_config *cfg, hdmlp_order order)
{
    CHECK_CFG(cfg);
    if (order != HDMLP_ORDER_STRICT && order != HDMLP_ORDER_POOL) {
        return hd_err(HDMLP_E_INVAL, "order: %d is not strict or pool", (int)order);
    }
    cfg->order = order;
    return HDMLP_OK;
}

int hdmlp_config_set_pool_reads(hdmlp_config *cfg, uint32_t reads)
{
    CHECK_CFG(cfg);
    if (reads > HDMLP_POOL_READS_MAX) {
        return hd_err(HDMLP_E_INVAL, "pool_reads: %u is above %u (0 = auto)", reads,
                      HDMLP_POOL_READS_MAX);
    }
    cfg->pool_reads = reads;
    return HDMLP_OK;
}

int hdmlp_config_set_relaxed(hdmlp_config *cfg, int on)
{
    CHECK_CFG(cfg);
    if (on != 0 && on != 1) {
        return hd_err(HDMLP_E_INVAL, "relaxed: %d is not 0 or 1", on);
    }
    cfg->order = on ? HDMLP_ORDER_POOL : HDMLP_ORDER_STRICT;
    return HDMLP_OK;
}

int hdmlp_config_set_calibrate(hdmlp_config *cfg, int on)
{
    CHECK_CFG(cfg);
    if (on != 0 && on != 1) {
        return hd_err(HDMLP_E_INVAL, "calibrate: %d is not 0 or 1", on);
    }
    cfg->calibrate = on;
    return HDMLP_OK;
}

int hdmlp_config_set_on_corrupt(hdmlp_config *cfg, hdmlp_on_corrupt action)
{
    CHECK_CFG(cfg);
    if (action != HDMLP_CORRUPT_FAIL && action != HDMLP_CORRUPT_SKIP) {
        return hd_err(HDMLP_E_INVAL, "on_corrupt: %d is not fail or skip", (int)action);
    }
    cfg->skip_corrupt = action == HDMLP_CORRUPT_SKIP;
    return HDMLP_OK;
}

int hdmlp_config_set_image(hdmlp_config *cfg, const hdmlp_image_config *ic)
{
    CHECK_CFG(cfg);
    struct hdmlp_image_config *copy = NULL;
    if (ic != NULL) {
        copy = hd_malloc(sizeof(*copy));
        if (copy == NULL) {
            return hd_err(HDMLP_E_NOMEM, "config: out of memory for the image config");
        }
        *copy = *ic;
    }
    hd_free(cfg->image);
    cfg->image = copy;
    return HDMLP_OK;
}
