/*
 * Peer transport: how a loader exchanges samples with the other ranks (DESIGN.md §5).
 *
 * The loader sees only this interface; rpc/ implements it over gRPC, tests implement it
 * in process. A transport delivers whole messages between ranks 0..world-1, in order per
 * (sender, receiver) pair. Incoming messages are handed to the handler on the transport's
 * own threads; the handler copies what it keeps before returning.
 *
 * Positions: epoch e of the shared seed orders all N samples (loader_sampler.h); global
 * position P of the epoch belongs to rank P % world, which sees it as its local position
 * P / world. A request names (epoch, P).
 */
#ifndef HDMLP_LOADER_PEER_H
#define HDMLP_LOADER_PEER_H

#include <stdint.h>

enum peer_kind {
    PEER_REQUEST = 1, /* requester → owner: "send me the sample for (epoch, position)" */
    PEER_SAMPLE = 2,  /* owner → requester: the answer, or a prefetch */
    PEER_DONE = 3     /* rank → all: finished delivering every epoch; serving continues */
};

typedef struct peer_msg {
    uint32_t kind;
    uint32_t from, to; /* ranks */
    uint64_t token;    /* job token; receivers reject other tokens */
    uint64_t epoch;    /* REQUEST, SAMPLE */
    uint64_t position; /* REQUEST, SAMPLE: global position in the epoch */
    uint64_t group;    /* REQUEST, SAMPLE: abstract chunk of the location */
    uint32_t slot;     /* REQUEST, SAMPLE: slot of the location */
    uint32_t prefetch; /* SAMPLE: 0 = answer to a request, 1 = opportunistic prefetch */
    /* REQUEST: prefetch bytes the requester allows from the owner, counted from the start
     * of the run: what it has consumed of the owner's prefetches plus its share of the
     * remote memory. The owner sends prefetches while the bytes it has sent stay within. */
    uint64_t credit;
    uint64_t index;      /* SAMPLE: sample index in packed order */
    uint32_t label;      /* SAMPLE */
    const uint8_t *data; /* SAMPLE: raw bytes, borrowed for the duration of the call */
    uint64_t size;
    /* SAMPLE sent: data is a block of the transport's peer_mem, handed over with the call
     * (the transport lends it to a same-host peer, or copies and frees it, whatever the
     * result). */
    uint32_t lend;
    /* SAMPLE received: non-NULL when data is a block rank `from` lent in shared memory; the
     * handler then keeps it (no copy) and gives it back with
     * lent->give_back(lent, data, size, from). */
    struct peer_mem *lent;
} peer_msg;

/* Sample memory a transport can lend to same-host peers without copying (rpc/: an arena in
 * shared memory that those peers map). Thread-safe. It outlives the transport until every
 * block is given back, so samples may outlive the transport. */
typedef struct peer_mem peer_mem;
#define PEER_MEM_OWN UINT32_MAX
struct peer_mem {
    /* A block of at least len bytes for a sample, or NULL (then the caller uses the heap). */
    void *(*alloc)(peer_mem *pm, uint64_t len);
    /* Gives a block back: this rank's own (lender PEER_MEM_OWN), or one rank `lender` lent
     * (the lender is told, and frees it). */
    void (*give_back)(peer_mem *pm, void *p, uint64_t len, uint32_t lender);
};

typedef struct peer_handler {
    void *ctx;
    /* A message for this rank (token already checked). Called on a transport thread. */
    void (*on_msg)(void *ctx, const peer_msg *m);
    /* A peer failed (connection lost, no answer within the timeout, rejected us): code is
     * an HDMLP_E_* code (HDMLP_E_PEER), detail names the rank and the cause. */
    void (*on_error)(void *ctx, uint32_t rank, int code, const char *detail);
} peer_handler;

typedef struct peer_transport peer_transport;
struct peer_transport {
    /* Queues m for m->to (copying m->data before returning). Never blocks on the network;
     * returns HDMLP_E_PEER if that peer has already failed. Thread-safe. */
    int (*send)(peer_transport *t, const peer_msg *m);
    /* Stops threads, closes connections, frees. */
    void (*destroy)(peer_transport *t);
    /* Peers reached over a same-host path rather than the network (set by the factory,
     * fixed afterwards; 0 for transports without one). */
    uint32_t peers_same_host;
    /* Sample memory same-host peers can be lent (NULL: none; set by the factory). */
    peer_mem *mem;
};

/* Creates the transport for a loader. Implemented by rpc/ (gRPC); NULL when this build
 * has none. cfg carries rank, world, peers, listen address, token and timeout, and the size
 * of the sample memory the transport may make (peer_arena, from the loader's budget). */
struct hdmlp_config;
typedef int (*peer_transport_factory)(const struct hdmlp_config *cfg, const peer_handler *h,
                                      peer_transport **out);

#endif
