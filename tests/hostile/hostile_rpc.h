/*
 * The hostile_rpc program's parts (see hostile_rpc.c): the legitimate 2-rank exchange
 * (hostile_rpc_exchange.c), the hostile payloads (hostile_rpc_payloads.c) and the
 * attacker process that floods rank 0 with them (hostile_rpc_attacker.c).
 */
#ifndef HDMLP_TEST_HOSTILE_RPC_H
#define HDMLP_TEST_HOSTILE_RPC_H

#include "hdmlp.h"
#include "support/testds.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define WORLD 2
#define TOKEN 0x5EC0DE5EC0DEull
#define BATCH 16
#define INFLIGHT 8     /* calls in flight per attack kind */
#define BIG_INFLIGHT 2 /* oversized calls in flight */
#define BIG_LEN ((64u << 20) + (64u << 10))
#define HOSTILE_RSS_LIMIT ((uint64_t)32 << 20)

enum { A_TOKEN, A_MALFORMED, A_BIG, A_RANKS, A_LOC_REQUEST, A_LOC_SAMPLE, A_N };
extern const char *const attack_names[A_N];

/* The dataset both ranks load. */
extern const testds_spec spec;

uint64_t now_ns(void);
/* This process's resident set (VmRSS), in bytes. */
uint64_t rss_bytes(void);

/* Broken promises so far (CHECK prints each and counts it); main exits 1 if any. */
extern int failures;
#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            printf("FAIL: " __VA_ARGS__);                                                      \
            printf("\n");                                                                      \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

typedef struct rank_run {
    hdmlp_loader *ld;
    uint64_t *ep, *idx;
    uint64_t n, cap, wrong;
    _Atomic uint64_t delivered; /* read by the main thread during the run */
    atomic_int done;
    int rc;
    char err[512];
} rank_run;

typedef struct exchange {
    char eps[WORLD][64];
    rank_run runs[WORLD];
    pthread_t th[WORLD];
    uint64_t epochs, t0;
} exchange;

/* Creates both ranks' loaders on fresh loopback ports. 0 or -1. */
int exchange_create(exchange *x, hdmlp_dataset *ds, uint64_t epochs, uint32_t timeout_ms);
/* Starts a consumer thread per rank. */
void exchange_start(exchange *x);
/* Joins both ranks; checks bytes and (when `complete`) exactly once per epoch. Returns
 * delivered samples per second. */
double exchange_finish(exchange *x, const char *what, int complete);

/* Builds attack `kind` number `i` into buf (cap bytes); returns its length. */
size_t make_attack(int kind, uint64_t i, uint64_t *rng, uint8_t *buf, size_t cap,
                   uint64_t *expect_ok);

typedef struct tally {
    uint64_t sent, ok, rejected, other; /* other: UNAVAILABLE (connection reset), ... */
    uint64_t by_status[17];
    char first_reject[160]; /* status details of the first rejection */
} tally;

typedef struct flood {
    int big_inflight;
    int cmd_fd, res_fd;
    pid_t pid;
    tally t[A_N];
    uint64_t t0;
    double secs;
} flood;

/* Forks the attacker process. Call before this process initialises gRPC. 0 or -1. */
int flood_init(flood *f);
/* Sends the attacker the target and the kinds to flood it with. */
void flood_start(flood *f, const char *target, const int *kinds, int n_kinds);
/* Stops the flood and reads the tallies. */
void flood_stop(flood *f);
/* Ends the attacker process and checks its exit status. */
void flood_exit(flood *f);
/* Prints the tallies of `kinds`; returns calls sent and rejected. */
void flood_report(const flood *f, const int *kinds, int n_kinds, uint64_t *sent,
                  uint64_t *rejected);

#endif
