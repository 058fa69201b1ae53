/*
 * The gRPC peer transport, with the knobs rpc_transport_create() leaves at defaults.
 * Internal to rpc/ and its tests.
 *
 * Shape. Every rank runs one gRPC server (its own completion-queue thread) with a single
 * unary method, /hdmlp.Peer/Deliver, whose request is an Envelope holding one or more
 * messages (rpc_codec.h) and whose response is empty. Towards each peer there is one
 * channel and one "lane": two FIFO queues of packed messages, `urgent` (REQUEST, DONE and
 * SAMPLE answers, prefetch == 0) and `prefetch` (SAMPLE prefetch == 1), and at most one
 * call in flight. A call takes every urgent message first, then prefetches, up to
 * batch_bytes (at least one message). One client completion-queue thread per transport
 * chains the calls and sends liveness probes; send() starts a call itself when the lane
 * is idle, so it never waits for the network.
 *
 * Order. One call in flight per lane and one server thread make delivery FIFO per
 * (sender, receiver) pair within each class; an urgent message may overtake prefetches
 * queued before it, never the reverse within its class. A server answers a call (OK) once
 * it has validated the whole Envelope and before calling on_msg for its messages, in
 * order, on the server thread: on_msg is never called concurrently for one transport.
 *
 * Failure. Calls are wait-for-ready with a deadline of cfg->peer_timeout_ms, so a peer
 * that is not listening yet is waited for, up to the timeout. An idle lane sends an empty
 * Envelope (a probe) every timeout/4, so a dead or hung peer is noticed within about
 * 1.25 x timeout even when nothing is being sent to it. The first failed call (deadline,
 * connection lost, rejection by the peer) or an overflowing queue marks the peer failed:
 * its queued messages are dropped, send() to it returns HDMLP_E_PEER, and on_error is
 * called once for it, on the client thread (the ring thread for ring peers), with
 * "rank R (host:port): cause". Nothing is
 * ever retried (a retried call could deliver twice). on_error is not called once destroy()
 * has begun.
 *
 * Paths. Without TLS, every rank listens on three addresses: its TCP "host:port", a
 * Unix-domain socket in the abstract namespace (no file to leak or clean up) named by
 * rpc_same_host_address from the rank's entry in cfg->peers, where the gRPC server also
 * listens, and the ring socket beside it (rpc_shm_link.h), where a sending peer of this
 * host gets a shared-memory ring into this rank (rpc_shm_ring.h). The abstract namespace
 * belongs to the network namespace, like the loopback and interface addresses, so a peer
 * whose host is this machine's (rpc_endpoint_is_local) is reachable there exactly when it
 * is over TCP. cfg->same_host picks how such a peer is reached: HDMLP_SAME_HOST_SHM (the
 * default) through its ring (no gRPC: rpc_shm.h), HDMLP_SAME_HOST_SOCKET by a channel
 * dialling its gRPC socket, HDMLP_SAME_HOST_TCP by TCP; any other peer always by TCP.
 * There is no fallback between paths (nothing could arrive twice): a rank that cannot bind
 * either socket fails creation with HDMLP_E_IO naming it, so a live peer always listens on
 * all three, and ranks may differ in the setting. With TLS no socket is bound and every
 * channel dials TCP: mutual TLS authenticates each connection by the peer's host name,
 * which a Unix socket does not have. base.peers_same_host counts the peers reached through
 * a ring or the socket.
 *
 * Rings. The same contracts hold for peers reached through a ring, with the ring thread in
 * the role of both client and server threads. The receiver makes one sealed memfd per
 * sender, of shm_ring_bytes, and passes it with two eventfd doorbells over the ring socket
 * after checking the sender's user (SO_PEERCRED), job token and ranks. send() writes the
 * message straight into the ring when nothing is queued before it and it has room (one
 * copy of the payload), else queues a copy that the ring thread writes as room frees up
 * (answers before queued prefetches; a payload above a quarter of the ring in fragments);
 * queued bytes above queue_bytes fail the peer. Lending: the sender's hello carries its
 * sample arena (shm_arena_bytes; base.mem allocates from it), which the receiver maps; a
 * SAMPLE whose bytes are an arena block sent with m->lend travels as its offset alone,
 * on_msg gets the bytes in place in the mapping (m->lent), and the receiver's
 * give_back() returns the block in a RELEASE record on its own ring to the owner, which
 * frees it (a block not lent to that rank closes the ring: rejected). The receiver copies each
 * record's header out of the ring before validating it (lengths within what was written, token,
 * ranks, kind, sizes within max_data, fragments in order) and hands on_msg the payload in
 * place; a bad record or hello closes the ring on the sender, with the cause sent on the socket
 * (counted in rejected). An idle ring gets a probe record every timeout/4; a sender whose
 * ring holds bytes not consumed for the timeout reports the peer ("no answer"), a hung
 * up ring socket reports it at once (a dead process), and a peer not answering on its
 * socket within the timeout is reported too. A receiver whose sender hung up delivers
 * the complete messages left in the ring and drops a message cut short.
 *
 * Callbacks. on_msg runs on the server thread, or on the ring thread for peers reached
 * through rings, never on both at once (they take turns under a lock), and should return
 * quickly (well under the timeout): while it runs, no further call from any peer is taken,
 * and a peer whose call or ring waits longer than its timeout reports this rank failed.
 * Handlers may call send() (it never blocks on the network); they must not call destroy().
 * on_msg may run until destroy() returns; destroy() sends what is queued for up to drain_ms
 * first.
 */
#ifndef HDMLP_RPC_TRANSPORT_H
#define HDMLP_RPC_TRANSPORT_H

#include "rpc.h"

#include <stddef.h>
#include <stdint.h>

#define RPC_SHM_RING_DEFAULT ((uint64_t)1 << 20)

typedef struct rpc_opts {
    uint64_t max_data;    /* largest SAMPLE payload sent or accepted (RPC_DEFAULT_MAX_DATA) */
    uint64_t queue_bytes; /* per-peer cap on queued, unsent bytes (64 MiB; a message always
                             fits an empty queue) */
    uint64_t batch_bytes; /* target payload of one call (1 MiB; at most max_data) */
    uint32_t drain_ms;    /* destroy() waits this long at most for queued messages to go
                             out (min(timeout, 2000)) */
    uint64_t shm_ring_bytes;  /* data bytes of each ring this rank receives on (1 MiB; a power
                                 of two in 64 KiB..1 GiB; 0 = the default) */
    uint64_t shm_arena_bytes; /* this rank's sample arena, lent to ring peers (the size the
                                 loader hands over in cfg->peer_arena, 1.5 × its memory
                                 budget, at most 64 GiB, virtual until used; 0 = none:
                                 SAMPLEs are copied into the rings) */
} rpc_opts;

/* Fills *o with the defaults for cfg. */
void rpc_opts_default(const struct hdmlp_config *cfg, rpc_opts *o);

/* rpc_transport_create with explicit options (NULL = defaults). Errors: HDMLP_E_INVAL
 * (world, rank or peers inconsistent), HDMLP_E_IO (cannot listen: names the address),
 * HDMLP_E_NOMEM. */
int rpc_transport_create_opts(const struct hdmlp_config *cfg, const peer_handler *h,
                              const rpc_opts *opts, peer_transport **out);

/* The port the transport's server is bound to (useful with listen "host:0"). */
int rpc_transport_port(const peer_transport *t);

typedef struct rpc_stats {
    uint64_t calls_sent;    /* Deliver calls that completed OK (probes included) */
    uint64_t probes_sent;   /* of which empty probes */
    uint64_t msgs_sent;     /* messages in calls that completed OK */
    uint64_t bytes_sent;    /* Envelope bytes of those calls, and bytes of records written into
                               rings (probes of either path not counted there) */
    uint64_t msgs_recv;     /* messages handed to on_msg */
    uint64_t bytes_recv;    /* Envelope bytes of accepted calls */
    uint64_t rejected;      /* incoming calls rejected (malformed, token, size, method), and
                               rings closed on a sender for a bad hello or record */
    uint64_t shm_msgs_sent; /* of msgs_sent, written into a peer's ring */
    uint64_t shm_msgs_recv; /* of msgs_recv, read from a ring */
    uint64_t shm_lent;      /* SAMPLEs lent to ring peers (sent as an offset, not copied) */
    uint64_t shm_released;  /* blocks ring peers gave back (freed in this rank's arena) */
    uint64_t arena_used;    /* bytes of this rank's arena in use or lent now (1 KiB units) */
} rpc_stats;

/* Counters since creation. Thread-safe. */
void rpc_transport_stats(peer_transport *t, rpc_stats *out);

/* Picks a free TCP port on `host` (an address of this machine, IPv4 or IPv6, or a name)
 * below the kernel's ephemeral range (so no outgoing connection of this host takes it before
 * the server binds it), else by binding port 0, and writes "host:port" into out (cap bytes;
 * "[v6]:port" for IPv6 literals). The port is released before returning, so another
 * process binding that very port may still take it first (the server's bind then fails with
 * HDMLP_E_IO naming the address). HDMLP_E_IO / HDMLP_E_INVAL / HDMLP_E_RANGE. */
int rpc_pick_endpoint(const char *host, char *out, size_t cap);

/* rpc_samehost.c. The same-host socket of the rank whose peers entry is endpoint:
 * "unix-abstract:hdmlp-<FNV-1a 64 of endpoint in hex>" into out (cap bytes, at least
 * RPC_SAME_HOST_ADDR_MAX); HDMLP_E_RANGE if it does not fit. */
#define RPC_SAME_HOST_ADDR_MAX 48
int rpc_same_host_address(const char *endpoint, char *out, size_t cap);
/* 1 if the host of endpoint ("host:port", "[v6]:port") is this machine's in this network
 * namespace: a loopback or unspecified address, an address of one of its interfaces
 * (getifaddrs), or a name whose first resolved address is one of those ("localhost", the
 * host name). 0 otherwise, and when the name does not resolve (TCP then reports it). May
 * block while a name is resolved. */
int rpc_endpoint_is_local(const char *endpoint);
/* Binds and releases the abstract socket of address (from rpc_same_host_address):
 * HDMLP_E_IO naming it and the cause if that fails. Run before gRPC's bind. */
int rpc_same_host_bind_check(const char *address);

#endif
