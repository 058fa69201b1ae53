/*
 * The shared-memory path of the transport (rpc_transport.h, "Paths"): one ring per ordered
 * pair of ranks on this host (rpc_shm_ring.h), set up over the receiver's ring socket
 * (rpc_shm_link.h), and one thread per transport that connects, delivers what arrives in
 * the rings to on_msg, moves queued messages into rings as they free up, sends probes and
 * watches the peers. Internal to rpc/.
 */
#ifndef HDMLP_RPC_SHM_H
#define HDMLP_RPC_SHM_H

#include "rpc_internal.h"

typedef struct rpc_shm rpc_shm;

/* Listens on this rank's ring socket and starts the thread, which dials the peers of the
 * lanes marked shm. HDMLP_E_IO naming the socket, HDMLP_E_NOMEM. */
int rpc_shm_start(rpc_tr *t, rpc_shm **out);
/* The sample memory ring peers are lent from (NULL: none). */
peer_mem *rpc_shm_mem(rpc_shm *s);
/* Bytes of that memory's arena in use or lent now (0 without one). */
uint64_t rpc_shm_arena_used(rpc_shm *s);
/* send() for a peer of a shm lane; m already checked (rpc_msg_check_send). */
int rpc_shm_send(rpc_shm *s, const peer_msg *m);
/* destroy() began: send() refuses from now on, on_error is no longer called. */
void rpc_shm_closing(rpc_shm *s);
/* Waits until every ring's messages have been consumed by their peers (or failed), or
 * until the monotonic time until_ns. */
void rpc_shm_drain(rpc_shm *s, uint64_t until_ns);
/* Stops the thread, unmaps the rings, closes the sockets, frees (NULL: no-op). */
void rpc_shm_stop(rpc_shm *s);

#endif
