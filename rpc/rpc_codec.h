/*
 * rpc codec: peer_msg <-> protobuf-c bytes (rpc/hdmlp.proto). No gRPC, no threads.
 *
 * One gRPC call carries one Envelope: the sender's token and ranks (the "header") and one
 * or more messages. On the wire an Envelope is the concatenation of its header fragment
 * and one fragment per message, so a sender packs each message once, when it is queued,
 * and sends header + fragments as the slices of one byte buffer without copying them
 * again. An Envelope without messages is a liveness probe.
 *
 * The decoder never trusts its input: every length, field and count is checked before use,
 * and any byte string gives either HDMLP_OK or an error with detail, never a crash.
 */
#ifndef HDMLP_RPC_CODEC_H
#define HDMLP_RPC_CODEC_H

#include "loader_peer.h"

#include <stddef.h>
#include <stdint.h>

/* Default largest SAMPLE payload (peer_msg.size) a transport sends or accepts. */
#define RPC_DEFAULT_MAX_DATA ((uint64_t)64 << 20)
/* Most messages in one Envelope (bounds the decoder's allocations). */
#define RPC_MAX_MSGS 4096u
/* Bytes a message fragment or an Envelope header may add to the payload. */
#define RPC_FRAGMENT_OVERHEAD 128u
#define RPC_HEADER_MAX 32u
/* Largest Envelope a receiver accepts for a given max_data. */
#define RPC_ENVELOPE_MAX(max_data) ((max_data) + 4096u)

/* What a receiver checks every Envelope against. */
typedef struct rpc_check {
    uint64_t token;    /* the job token */
    uint32_t world;    /* ranks are 0..world-1 */
    uint32_t self;     /* the receiver's rank: `to` must equal it, `from` must not */
    uint64_t max_data; /* largest SAMPLE payload */
} rpc_check;

/* Checks a message the local rank wants to send (kind, destination, size, data pointer)
 * against world, self and max_data. HDMLP_E_INVAL or HDMLP_E_RANGE with detail. */
int rpc_msg_check_send(const peer_msg *m, uint32_t world, uint32_t self, uint64_t max_data);

/* Packs the fragment of message m (only the fields of its kind; from, to and token belong
 * to the header) into a new buffer *out of *len bytes (free with hd_free). Does not check
 * m: call rpc_msg_check_send first. HDMLP_E_NOMEM. */
int rpc_encode_msg(const peer_msg *m, uint8_t **out, size_t *len);

/* Packs an Envelope header into buf (RPC_HEADER_MAX bytes) and returns its length. */
size_t rpc_encode_header(uint64_t token, uint32_t from, uint32_t to, uint8_t *buf);

/* A decoded Envelope: msgs[0..n) with token, from and to filled in; data pointers point
 * into memory owned by the envelope. Free with rpc_envelope_free. */
typedef struct rpc_envelope {
    uint64_t token;
    uint32_t from, to;
    size_t n;
    peer_msg *msgs;
    void *pb; /* the unpacked protobuf-c message */
} rpc_envelope;

/* Decodes and validates an Envelope. On success *out holds the messages (n may be 0: a
 * probe). Errors, with detail in hdmlp_last_error() and *out zeroed:
 *   HDMLP_E_CORRUPT  not a valid Envelope: bad wire format, missing or foreign fields,
 *                    unknown kind, rank out of range, to != self, size != data length,
 *                    more than RPC_MAX_MSGS messages;
 *   HDMLP_E_RANGE    a payload above chk->max_data or an Envelope above RPC_ENVELOPE_MAX;
 *   HDMLP_E_PEER     a well-formed Envelope with another job's token;
 *   HDMLP_E_NOMEM. */
int rpc_decode(const rpc_check *chk, const uint8_t *buf, size_t len, rpc_envelope *out);
void rpc_envelope_free(rpc_envelope *e);

/* "REQUEST", "SAMPLE", "DONE" or "?" */
const char *rpc_kind_name(uint32_t kind);

#endif
