/*
 * Fixtures shared by the rpc/ tests (test_rpc*.c, one Criterion binary): nodes recording
 * what a transport delivers, clusters of ranks on loopback, messages of each kind with
 * deterministic payloads, raw gRPC calls made without a transport, and hand-made
 * envelopes. Ports come from rpc_pick_endpoint("127.0.0.1").
 */
#ifndef HDMLP_TEST_RPC_FIXTURE_H
#define HDMLP_TEST_RPC_FIXTURE_H

#include "hdmlp.h"
#include "rpc_transport.h"

#include <grpc/status.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_RANKS 4
#define MAX_RECS 20000

uint64_t now_ms(void);
/* Deterministic payload byte i of sample `index`. */
uint8_t pattern(uint64_t index, uint64_t i);
/* n bytes of pattern(index, ·), malloc'd (freed by the caller). */
uint8_t *make_data(uint64_t index, size_t n);

typedef struct rec {
    peer_msg m; /* data pointer cleared; m.lent kept (the block itself is given back) */
    int data_ok;
} rec;

typedef struct err_rec {
    uint32_t rank;
    int code;
    char detail[256];
    uint64_t at_ms;
} err_rec;

typedef struct node {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rec *recs;
    size_t n_recs; /* messages received; the first MAX_RECS are kept in recs */
    err_rec errs[8];
    size_t n_errs;
    int check_data;
    /* optional: block on_msg until released */
    int block;
    peer_transport *t;
} node;

/* A node's peer_handler callbacks (ctx is the node). */
void on_msg(void *ctx, const peer_msg *m);
void on_error(void *ctx, uint32_t rank, int code, const char *detail);
void node_init(node *n);
/* Destroys the node's transport, if any, then the node. */
void node_fini(node *n);
/* Waits until n has at least `count` messages (1) or errors (0) within ms. */
int node_wait(node *n, size_t count, int errors, uint64_t ms);
size_t node_count(node *n, int errors);

typedef struct cluster {
    uint32_t world;
    char eps[MAX_RANKS][64];
    hdmlp_config *cfg[MAX_RANKS];
    node nodes[MAX_RANKS];
} cluster;

/* Configures `world` ranks on loopback (tokens[r], or 77 for all if tokens is NULL), whose
 * peers are reached through the path HDMLP_TEST_SAME_HOST names: "socket" (gRPC over the
 * Unix socket: the default here, these are the gRPC transport's tests) or "shm" (rings;
 * ctest runs the rpc_transport tests both ways). */
void cluster_config(cluster *c, uint32_t world, const uint64_t *tokens, uint32_t timeout);
void cluster_start_one(cluster *c, uint32_t r, const rpc_opts *o);
void cluster_start(cluster *c, uint32_t world, const uint64_t *tokens, uint32_t timeout,
                   const rpc_opts *o);
void cluster_stop(cluster *c);

peer_msg msg_request(uint32_t from, uint32_t to, uint64_t pos);
peer_msg msg_sample(uint32_t from, uint32_t to, uint64_t index, const uint8_t *data,
                    uint64_t size, uint32_t prefetch);
/* t->send, failing the test unless it returns HDMLP_OK. */
int send_ok(peer_transport *t, const peer_msg *m);

/* A synchronous call made with gRPC directly (not through a transport). */
grpc_status_code raw_call(const char *target, const char *method, const void *buf, size_t len,
                          int with_message, char *detail, size_t cap);
/* An Envelope: header + fragments of msgs (not checked: tests build bad ones on purpose). */
uint8_t *envelope(uint64_t token, uint32_t from, uint32_t to, const peer_msg *msgs, size_t n,
                  size_t *len);

#endif
