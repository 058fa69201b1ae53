/* hdmlp-bench: the options and one rank's results, shared by its source files. */
#ifndef HDMLP_BENCH_TYPES_H
#define HDMLP_BENCH_TYPES_H

#include "bench_random.h"

#include <hdmlp.h>

#include <stdint.h>

typedef struct bench_opts {
    const char *dataset;
    const char *memory_arg; /* as given: bytes or a percentage of the raw bytes */
    uint64_t memory;        /* resolved budget in bytes */
    double memory_pct;      /* > 0 when given as a percentage */
    uint64_t batch;
    uint64_t epochs;
    uint64_t start_epoch;
    uint64_t seed;
    uint64_t threads;
    hdmlp_engine engine;
    hdmlp_policy policy;
    hdmlp_refill refill;
    int direct; /* 0, 1 or HDMLP_DIRECT_IO_AUTO */
    int no_cost_learning;
    uint64_t lookahead;
    double op_us;     /* < 0: library default */
    double bandwidth; /* < 0: library default */
    double compute_ms;
    int drop_last;
    hdmlp_order order;
    uint64_t pool_reads;    /* 0 = auto */
    int skip_corrupt;       /* --on-corrupt skip */
    const char *state_file; /* --state FILE (per rank: FILE.<rank> when world > 1) */
    uint64_t resume_after;  /* --resume-after N batches (0 = run to the end) */
    int calibrate;
    const char *ids_path;
    int json;
    int quiet;
    int plan;
    int no_randomness;
    /* tiers; *_set = given on the command line (else the library's default) */
    int ram_cache_set;
    uint64_t ram_cache; /* HDMLP_RAM_CACHE_AUTO for "auto" */
    const char *ssd_dir;
    uint64_t ssd_capacity; /* 0 = SSD tier off, as in the API */
    int ssd_capacity_set;
    /* distributed */
    int mpi;
    int standalone; /* --standalone: one independent rank even under a launcher */
    const char *bind_host;
    char *peers_buf;    /* --peers, split in place */
    const char **peers; /* n_peers endpoints into peers_buf */
    uint32_t n_peers;
    uint64_t rank;
    int rank_set;
    uint64_t world; /* --world (plans without peers); 0 = not given */
    uint64_t token;
    int token_set;
    uint64_t prefetch;
    int prefetch_set;
    uint64_t remote_memory;
    int remote_memory_set;
    uint64_t peer_timeout;
    int peer_timeout_set;
    const char *tls_ca, *tls_cert, *tls_key; /* --tls-*: all three or none */
    const char *same_host;  /* --same-host: shm, socket or tcp (NULL: the default, shm) */
    const char *node_board; /* --node-board: off, auto or on (NULL: the default, auto) */
} bench_opts;

/* One rank's results: the loader's counters and what the training loop saw. */
typedef struct bench_rank {
    uint32_t rank;
    int status;            /* this rank's exit status: 0 = it succeeded */
    int resumed;           /* started from --state */
    uint64_t resume_epoch; /* the epoch it resumed in */
    int stopped;           /* stopped by --resume-after (state saved) */
    hdmlp_stats st;
    double seconds;        /* loader creation to HDMLP_END (a plan: the forecast's time) */
    double create_seconds; /* hdmlp_loader_create alone */
    double free_seconds;   /* hdmlp_loader_free (world > 1: waiting for the peers) */
    uint64_t peak_rss_bytes;
    uint64_t consumer_samples;
    uint64_t consumer_bytes;
    int have_random; /* the randomness figures were computed */
    bench_random_fig random;
    double *epoch_seconds;             /* span entries: epochs start_epoch..epochs-1 */
    hdmlp_cost_point cost_history[32]; /* the cost model over the run */
    size_t cost_points;
    uint64_t *epoch_source_bytes; /* span entries, the same epochs */
} bench_rank;

/* Option value names, indexed by the enums (bench_report.c). */
extern const char *const bench_engine_names[3];
extern const char *const bench_policy_names[4];
extern const char *const bench_refill_names[3];
extern const char *const bench_order_names[2];

/* Epochs a run delivers: start_epoch..epochs-1. */
static inline uint64_t bench_span(const bench_opts *o) { return o->epochs - o->start_epoch; }

#endif
