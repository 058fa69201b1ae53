/* Internal loader structures shared by loader_*.c and in-tree tests. */
#ifndef HDMLP_LOADER_H
#define HDMLP_LOADER_H

#include "format.h"

struct hdmlp_config {
    uint64_t memory;
    int memory_raise; /* raise a budget below the least that works to it */
    uint32_t batch;
    uint64_t seed;
    uint64_t epochs; /* 0 = unbounded */
    uint64_t start_epoch;
    int drop_last;
    uint32_t rank, world;
    uint32_t threads;
    hdmlp_engine engine;
    int direct;           /* 0, 1 or HDMLP_DIRECT_IO_AUTO */
    int learn;            /* cost learning */
    uint64_t max_request; /* the dataset device's largest request, resolved at create */
    uint64_t lookahead;   /* 0 = memory-bound only */
    hdmlp_policy policy;
    hdmlp_refill refill;
    double op_us;
    double bytes_per_s;
    int cost_set; /* set explicitly: calibration does not override it */
    hdmlp_order order;
    uint32_t pool_reads; /* pool: reads per chunk per epoch; 0 = one device request each */
    int skip_corrupt;
    uint8_t resume[256]; /* saved state to resume from (resume_len bytes) */
    uint32_t resume_len;
    int calibrate;
    /* tiers */
    uint64_t ram_cache; /* HDMLP_RAM_CACHE_AUTO, 0 or bytes */
    char *ssd_dir;
    uint64_t ssd_capacity;
    /* distributed */
    char **peers; /* world endpoints or NULL */
    uint32_t n_peers;
    char *listen;
    uint64_t token;
    /* mutual TLS: PEM file paths, all three or all NULL (off) */
    char *tls_ca, *tls_cert, *tls_key;
    uint64_t remote_memory; /* 0 = 10 % of memory */
    uint32_t prefetch;      /* window; 0 = off */
    uint32_t peer_timeout_ms;
    /* The transport's sample arena (bytes, lent to same-host peers): set on a loader's own
     * copy from its budget (loader_budget.h) before the transport is made; 0 elsewhere (the
     * default): none. */
    uint64_t peer_arena;
    int same_host;  /* HDMLP_SAME_HOST_*: how peers on this host are reached */
    int node_board; /* HDMLP_NODE_BOARD_*: balance across local ranks */
    struct hdmlp_image_config *image; /* the image pipeline's config (owned), or NULL */
    int stager_off;                   /* tests only (loader_testing.h): no SSD stager thread */
};

void config_defaults(struct hdmlp_config *cfg);
/* Deep copy (strings included) into *dst; HDMLP_E_NOMEM. config_clear frees the strings. */
int config_copy(struct hdmlp_config *dst, const struct hdmlp_config *src);
void config_clear(struct hdmlp_config *cfg);

#include "loader_peer.h"

/* Creates a loader whose peers are reached through `factory` (tests inject an in-process
 * transport; hdmlp_loader_create, loader_rpc_load.c, passes rpc/'s gRPC transport when
 * world > 1). A NULL factory allows world 1 only. */
int loader_create_with(hdmlp_dataset *ds, const hdmlp_config *cfg,
                       peer_transport_factory factory, hdmlp_loader **out);

/* Copies *full into the caller's hdmlp_stats of `size` bytes (the size it was compiled
 * with): the common prefix, then zeros up to size for fields this library lacks. Writes
 * exactly `size` bytes. */
void loader_stats_out(hdmlp_stats *out, size_t size, const hdmlp_stats *full);

/* Slots of abstract memory currently holding a valid sample (at the planning frontier). */
uint64_t loader_slots_occupied(const hdmlp_loader *ld);

#endif
