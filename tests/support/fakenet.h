/*
 * An in-process peer transport for tests: `world` loaders in one process exchange
 * messages through per-rank queues, each drained in order by its own dispatcher thread.
 * fakenet_factory is a peer_transport_factory bound to the hub made by fakenet_create
 * (one hub at a time per process).
 */
#ifndef HDMLP_FAKENET_H
#define HDMLP_FAKENET_H

#include "loader.h"
#include "loader_peer.h"

typedef struct fakenet fakenet;

int fakenet_create(uint32_t world, fakenet **out);
void fakenet_free(fakenet *hub);
int fakenet_factory(const struct hdmlp_config *cfg, const peer_handler *h,
                    peer_transport **out);
/* Makes rank `dead` silent: messages to it are dropped, and its peers' on_error fires
 * (HDMLP_E_PEER) for the next message they send to it. */
void fakenet_kill(fakenet *hub, uint32_t dead);
/* A slower network: each send takes send_us before the message is queued (so concurrent
 * senders of one rank race as over a real transport), and each message is delivered
 * latency_us after it was queued, in order. 0 and 0 (the default): immediate. */
void fakenet_set_delays(fakenet *hub, uint32_t send_us, uint32_t latency_us);
/* Messages delivered so far (all ranks). */
uint64_t fakenet_messages(const fakenet *hub);

#endif
