/*
 * Setting up a shared-memory ring between two ranks of this host (rpc_shm.c): the
 * receiver's seqpacket socket in the abstract namespace, the sender's hello, and the
 * receiver's answer carrying the ring's memfd and its two doorbell eventfds (SCM_RIGHTS).
 * The socket stays open for the ring's life: its hangup is how either side learns that
 * the other is gone, and a receiver that rejects a sender says why on it before closing.
 * Mechanism only; no threads.
 */
#ifndef HDMLP_RPC_SHM_LINK_H
#define HDMLP_RPC_SHM_LINK_H

#include <stddef.h>
#include <stdint.h>

#define RPC_SHM_HELLO_MAGIC 0x68646d6c7068656cull /* "hdmlphel" */
#define RPC_SHM_ADDR_MAX 64

/* Sender -> receiver, first and only message of the sender on the socket; with the
 * sender's sample arena (a sealed memfd of arena_bytes) as its one descriptor when
 * arena_bytes > 0. */
typedef struct rpc_shm_hello {
    uint64_t magic;
    uint64_t token;
    uint32_t from, to;
    uint64_t arena_bytes;
} rpc_shm_hello;

/* Receiver -> sender, with three descriptors: memfd, data doorbell, space doorbell. flags
 * RPC_SHM_LEND_OK: the receiver mapped the sender's arena, so samples may be lent. */
#define RPC_SHM_LEND_OK 1u
typedef struct rpc_shm_reply {
    uint64_t magic;
    uint64_t ring_bytes;
    uint64_t flags;
} rpc_shm_reply;

/* The ring socket of the rank whose peers entry is endpoint: "hdmlp-<hash>-ring" (the name
 * in the abstract namespace, printable). HDMLP_E_RANGE if it does not fit cap. */
int rpc_shm_address(const char *endpoint, char *out, size_t cap);
/* A non-blocking listening seqpacket socket on name. HDMLP_E_IO naming it and the cause. */
int rpc_shm_listen(const char *name, int *fd);
/* Accepts one connection (non-blocking) and checks that its process runs as our user:
 * 1 with *fd, 0 when none is pending, -1 for a refused or failed one (closed; detail in
 * hdmlp_last_error()). */
int rpc_shm_accept(int listen_fd, int *fd);
/* Connects to name (non-blocking socket): 1 with *fd connected, 0 when nobody listens
 * there yet (retry later), -1 on another error (detail in hdmlp_last_error()). */
int rpc_shm_dial(const char *name, int *fd);
/* Sends buf (one packet) with n_fds descriptors (0..3). HDMLP_OK or HDMLP_E_IO. */
int rpc_shm_send_packet(int fd, const void *buf, size_t len, const int *fds, int n_fds);
/* Receives one packet into buf (cap bytes) and up to 3 descriptors (unused ones -1; extra
 * ones closed). Returns its length, 0 at hangup, -1 when nothing is pending (EAGAIN),
 * -2 on error or a truncated packet (detail in hdmlp_last_error(); descriptors closed). */
long rpc_shm_recv_packet(int fd, void *buf, size_t cap, int fds[3]);

#endif
