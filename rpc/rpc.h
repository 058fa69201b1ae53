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

/* hdmlp_config_bootstrap_mpi and hdmlp_mpi_gather_stats (hdmlp.h), reached through the
 * rpc_module table (rpc_loader.c); arguments already checked (cfg and mine not NULL, size
 * in 1..INT_MAX). */
int rpc_bootstrap_mpi(struct hdmlp_config *cfg, const char *bind_host);
int rpc_gather_stats(const struct hdmlp_stats *mine, struct hdmlp_stats *all_on_rank0,
                     size_t size);

#endif
