/* rpc/: the only module that includes gRPC, protobuf-c or MPI headers. Internal header. */
#ifndef HDMLP_RPC_H
#define HDMLP_RPC_H

#include "loader.h"
#include "loader_peer.h"

/* The gRPC peer transport (a peer_transport_factory): binds cfg->listen (or
 * cfg->peers[cfg->rank]), connects lazily to every other peer, delivers peer_msgs with
 * answers (SAMPLE with prefetch == 0) ahead of prefetches queued for the same peer, checks
 * the job token and every field of incoming messages, and reports a peer that cannot be
 * reached within cfg->peer_timeout_ms through h->on_error (HDMLP_E_PEER naming it).
 * Peers on this host are reached through shared-memory rings (or, with cfg->same_host
 * HDMLP_SAME_HOST_SOCKET, gRPC over a Unix socket in the abstract namespace; with
 * HDMLP_SAME_HOST_TCP or TLS, TCP), others over TCP; no fallback between paths
 * (rpc_transport.h, "Paths"); (*out)->peers_same_host counts the former. */
int rpc_transport_create(const struct hdmlp_config *cfg, const peer_handler *h,
                         peer_transport **out);

#endif
