/*
 * Online storage cost model (DESIGN.md §4, "The price of strictness"): the loader learns
 * what a read costs on its storage while it runs, so `auto` refill needs no hand-set figures.
 *
 * Model. A read of `ops` operations and `bytes` bytes costs service = op_us × ops +
 * bytes / bandwidth. Completed reads are summed over windows of the storage's busy time
 * (COST_BIN_US below); each window gives one observation (ops, bytes, service time). The
 * two parameters are fitted by recursive least squares with exponential forgetting
 * (factor COST_FORGET: recent reads dominate, so a change of the storage is followed within
 * a few dozen reads), on relative errors (each equation divided by the geometric mean of the
 * observed and the predicted time, so a 40 ms whole-chunk read and a 2 ms sample read weigh
 * alike), with residuals clipped at COST_CLIP times their running mean magnitude (a read
 * that stalled behind another process moves the estimate by a bounded step), unless
 * COST_CHANGE reads in a row miss on the same side: then the storage changed, and the model
 * goes back to its start's uncertainty and takes the next reads unclipped, to follow at once.
 * Estimates stay within [0, 10^7] us per operation and [1 B/s, 100 GB/s]. The start (configured
 * defaults or a probe) is the prior: it rules until reads say otherwise.
 *
 * Service time, not latency. With several I/O threads, reads overlap and each one's wall
 * time includes waiting behind the others. cost_clock attributes wall time to reads in
 * flight in equal shares (processor sharing): a read's service time is the integral of
 * 1 / (reads in flight) over its lifetime, so the shares of all reads add up to the time the
 * storage was busy, and the model prices what a refill costs the loader's throughput at its
 * own queue depth.
 *
 * Exploration (cost_explore): a loader that only ever reads whole chunks sees one shape of
 * read and cannot tell operation cost from bandwidth; the forgetting lets that uncertainty
 * grow, and when the predicted difference between the two plans is within two standard
 * errors of the model's uncertainty, the other plan is tried, paid from a budget of 2 % of
 * the predicted cost of the plans chosen so far (so exploration costs at most about 2 %), and
 * at most one refill in COST_EXPLORE_GAP.
 *
 * Not thread-safe: the loader guards a model with its lock; cost_clock has its own mutex.
 */
#ifndef HDMLP_LOADER_COSTMODEL_H
#define HDMLP_LOADER_COSTMODEL_H

#include "loader_refill.h"

#include <pthread.h>
#include <stdint.h>

#define COST_FORGET 0.95
#define COST_CLIP 3.0
#define COST_CHANGE 3

/* Reads summed, whatever their shape, until they hold COST_BIN_US of service time: one
 * observation (a window of the storage's busy time). Single reads are too noisy on storage
 * that serves in bursts: a throttled device or a network store lets a few reads through at
 * once, then none for a while (blk-throttle's slices are 100 ms; a cloud disk's token
 * bucket alike), so which read pays for a stall is chance, and with the loader's queue depth
 * a read's latency overlaps the others' transfer. Windows of a tenth of a second hold the
 * bursts and their stalls together, so their sums show what operations and bytes cost the
 * loader's throughput; the read shapes vary between windows (whole chunks, merged and single
 * ranges), which tells operation cost from bandwidth. Bins per plan kind, or smaller bins
 * to learn at once, let the start's burst (the first whole reads at 2 GB/s under a 400 MB/s
 * throttle) teach a bandwidth 2-4x too high and an operation cost that merged away 10-50 %
 * more bytes than needed; measured in tests/bench/README.md (issue 16). */
#define COST_BIN_US 100000.0
typedef struct cost_bin {
    double ops, bytes, us;
    uint32_t reads;
} cost_bin;

typedef struct cost_model {
    double theta[2]; /* us per operation, us per MB (10^6 bytes) */
    double p[2][2];  /* covariance of theta (relative-error units) */
    double p0[2];    /* the start's variances */
    double p0_trace; /* windup bound: trace(p) stays below 10 × the start's */
    double scale;    /* running mean |relative residual| (noise level) */
    uint64_t observations;
    uint64_t clipped; /* observations whose residual was clipped */
    uint64_t changes; /* changes of the storage detected (COST_CHANGE surprises in a row) */
    int surprises, surprise_sign;
    int follow;     /* reads left that are not clipped, after a change */
    cost_bin bin;   /* reads since the last observation */
    uint64_t reads; /* reads added (cost_model_add_read) */
} cost_model;

/* Starts from `start` (op_us >= 0, bytes_per_s > 0), uncertain by about a factor of ten. */
void cost_model_init(cost_model *m, const refill_cost *start);
/* Adds one completed read to the bin, and the bin to the fit when it is full. */
void cost_model_add_read(cost_model *m, double ops, double bytes, double service_us);
/* Adds one observation to the fit: `ops` operations (>= 1), `bytes`, `service_us` (> 0; an
 * observation with service_us <= 0 or ops < 1 is ignored). */
void cost_model_observe(cost_model *m, double ops, double bytes, double service_us);
/* The current estimate. */
void cost_model_get(const cost_model *m, refill_cost *out);
/* Predicted service time of a read shape, and the standard error of the difference
 * between two shapes' predictions (same units). */
double cost_model_predict(const cost_model *m, double ops, double bytes);
double cost_model_diff_stderr(const cost_model *m, double ops_a, double bytes_a, double ops_b,
                              double bytes_b);

/* Exploration policy state (see above). */
typedef struct cost_explorer {
    double budget_us; /* accumulated 2 % of chosen plans' predicted cost, less explorations */
    uint64_t explored;
    uint64_t since; /* refills since the last exploration (at most one in COST_EXPLORE_GAP) */
} cost_explorer;
#define COST_EXPLORE_GAP 16

/* Given the chosen plan (ops_c, bytes_c) and the other one (ops_o, bytes_o), returns 1 when
 * the other should be read instead, to learn (and charges its predicted extra cost). */
int cost_explore(cost_explorer *e, const cost_model *m, double ops_c, double bytes_c,
                 double ops_o, double bytes_o);

/* A shared clock attributing wall time to the reads in flight (processor sharing). */
typedef struct cost_clock {
    pthread_mutex_t lock;
    uint32_t inflight;
    uint64_t last_ns;
    double share_ns; /* integral of 1 / inflight over busy time */
} cost_clock;

void cost_clock_init(cost_clock *c);
void cost_clock_destroy(cost_clock *c);
/* Marks a read started; returns the token to pass to cost_clock_end. */
double cost_clock_start(cost_clock *c);
/* Marks it done; returns its service time in microseconds. */
double cost_clock_end(cost_clock *c, double token);

/* A bounded, log-spaced record of the estimate over a run: a point every `every`
 * observations; when full, every other point is dropped and `every` doubles. */
#define COST_HISTORY 32
typedef struct cost_point {
    uint64_t observations; /* fit updates (bins) */
    uint64_t reads;        /* reads added */
    double op_us;
    double bytes_per_s;
} cost_point;
typedef struct cost_history {
    cost_point p[COST_HISTORY];
    uint32_t n;
    uint64_t every;
} cost_history;

void cost_history_init(cost_history *h, const refill_cost *start);
/* Records m's estimate when its observation count is due. */
void cost_history_note(cost_history *h, const cost_model *m);

#endif
