/*
 * Shared state of the gRPC transport (rpc_transport.c, rpc_client.c, rpc_server.c).
 *
 * Layering of rpc/ (a file calls only those below it; .ci/check_layers.py fails on a call
 * circle, from the objects' symbols):
 *   rpc_loader.c (the module's entry for libhdmlp), rpc_bootstrap_mpi.c
 *   rpc_transport.c (create, send, destroy: picks gRPC or the rings per peer)
 *   rpc_client.c, rpc_server.c (gRPC); rpc_shm.c (the ring thread) → rpc_shm_send.c,
 *     rpc_shm_recv.c → rpc_shm_link.c, rpc_shm_ring.c, rpc_shm_loop.c
 *   rpc_codec.c (protobuf-c), rpc_tls.c, rpc_samehost.c, rpc_port.c, rpc_clock.c
 */
#ifndef HDMLP_RPC_INTERNAL_H
#define HDMLP_RPC_INTERNAL_H

#include "rpc_codec.h"
#include "rpc_transport.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <pthread.h>

#define RPC_METHOD "/hdmlp.Peer/Deliver"

/* One packed message fragment waiting in a lane. */
typedef struct rpc_item {
    struct rpc_item *next;
    uint8_t *buf; /* hd_malloc'd; ownership moves to a grpc slice when sent */
    size_t len;
} rpc_item;

typedef struct rpc_fifo {
    rpc_item *head, *tail;
} rpc_fifo;

struct rpc_lane;

/* One outgoing Deliver call (data or probe). */
typedef struct rpc_call {
    struct rpc_lane *lane;
    grpc_call *call;
    grpc_byte_buffer *req;
    grpc_byte_buffer *resp;
    grpc_metadata_array init_md, trailing_md;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string;
    size_t n_msgs;
    size_t bytes;
    int probe;
    uint64_t start_ns;
} rpc_call;

/* Everything about one peer, guarded by the transport lock (ch and method are fixed). */
typedef struct rpc_lane {
    uint32_t rank;
    const char *target; /* cfg.peers[rank] */
    int same_host;      /* the channel dials the peer's same-host socket, not target */
    int shm;            /* the peer is reached through a shared-memory ring (rpc_shm.c): no
                           channel, nothing of this lane is used but rank and target */
    grpc_channel *ch;
    void *method; /* registered-call handle */
    rpc_fifo urgent, prefetch;
    uint64_t queued;     /* packed bytes waiting in the two queues */
    rpc_call *call;      /* in flight, or NULL */
    uint64_t last_ok_ns; /* when the last call completed OK (0: never) */
    double bytes_per_s;  /* delivery rate of recent calls (moving average; 0: unknown) */
    int failed;
    int reported; /* on_error delivered (or suppressed by destroy) */
    char why[256];
} rpc_lane;

/* rpc_tls.c: the PEM text of cfg->tls_* (all NULL: plaintext). */
typedef struct rpc_tls {
    char *ca, *cert, *key;
} rpc_tls;

/* Reads the files of hdmlp_config_set_tls (nothing when TLS is off). HDMLP_E_IO for a
 * missing or unreadable file, HDMLP_E_INVAL for an empty or non-PEM one, naming it. */
int rpc_tls_load(const struct hdmlp_config *cfg, rpc_tls *out);
/* Wipes and frees the PEM text. */
void rpc_tls_free(rpc_tls *tls);
/* Credentials for the channels / the server: insecure when TLS is off, else mutual TLS
 * (the server requires and verifies a client certificate signed by the CA). After
 * grpc_init(); NULL when gRPC refuses them. The caller releases them. */
grpc_channel_credentials *rpc_tls_channel_creds(const rpc_tls *tls);
grpc_server_credentials *rpc_tls_server_creds(const rpc_tls *tls);

typedef struct rpc_tr {
    peer_transport base; /* first: peer_transport * <-> rpc_tr * */
    struct hdmlp_config cfg;
    rpc_tls tls;
    peer_handler h;
    rpc_opts o;
    rpc_check chk;
    uint32_t self, world;
    uint64_t probe_ns; /* idle time after which a lane sends a probe */

    pthread_mutex_t lock;
    pthread_cond_t cv;       /* broadcast when a call completes or a lane changes */
    pthread_mutex_t deliver; /* held around on_msg: the server and ring threads take turns */
    struct rpc_shm *shm;     /* the rings' side (NULL with TLS) */
    int closing;             /* destroy() began: send() refuses, no probes, no on_error */
    int stopping;            /* draining is over: no new calls */
    uint32_t in_flight;
    rpc_lane *lanes; /* world entries; lanes[self] unused */
    rpc_stats st;

    grpc_completion_queue *ccq;
    pthread_t cthread;
    int cthread_started;

    grpc_server *srv;
    grpc_completion_queue *scq;
    void *srv_method;
    pthread_t sthread;
    int sthread_started;
    int port;
    const char *listen;
    char same_host_listen[RPC_SAME_HOST_ADDR_MAX]; /* "" when not bound (TLS) */
    int srv_stopping;                              /* read by the server thread under lock */
    char shutdown_tag;
    /* Server-thread state (or rpc_server_stop's, when the thread never started). */
    uint32_t srv_outstanding;
    int srv_shutdown_seen;
    int srv_cq_shut;
} rpc_tr;

uint64_t rpc_now_ns(void);
gpr_timespec rpc_deadline_ms(uint64_t ms);

/* rpc_client.c */
int rpc_client_start(rpc_tr *t);
/* A call made by rpc_lane_take, with copies of what starting it needs: the starter does
 * not read the rpc_call itself outside the lock (its completion may already be freeing it
 * on the client thread; gRPC orders the two, but invisibly to TSan). */
typedef struct rpc_start {
    rpc_call *c; /* NULL: nothing to start */
    grpc_call *call;
    grpc_byte_buffer *req;
} rpc_start;

/* With t->lock held: moves queued messages (or, for a probe, none) of lane into a new call,
 * created but not started. .c is NULL on allocation failure (the lane is then failed). */
rpc_start rpc_lane_take(rpc_tr *t, rpc_lane *l, int probe);
/* Without the lock: starts a call made by rpc_lane_take (no-op if s.c is NULL). */
void rpc_call_start(rpc_tr *t, rpc_start s);
/* With t->lock held: marks the lane failed, drops its queue. */
void rpc_lane_fail(rpc_tr *t, rpc_lane *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void rpc_fifo_free(rpc_fifo *q);
/* Waits for in-flight calls to end, stops the client thread, destroys the channels. */
void rpc_client_stop(rpc_tr *t);

/* rpc_port.c: binds (SO_REUSEADDR) and releases address; HDMLP_E_IO naming it and the
 * cause if that fails. Run before gRPC's bind, whose failure gRPC logs to stderr. */
int rpc_bind_check(const char *address);

/* rpc_server.c */
int rpc_server_start(rpc_tr *t);
void rpc_server_stop(rpc_tr *t);

#endif
