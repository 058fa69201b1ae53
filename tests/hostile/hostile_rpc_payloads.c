/*
 * hostile_rpc's payloads: Envelopes with another job's token, random bytes, hand-made
 * protobuf that lies, ranks out of range, and a token holder's absurd REQUESTs and
 * out-of-range SAMPLEs (see hostile_rpc.c).
 */
#include "hostile/hostile_rpc.h"

#include "format.h" /* hd_free, for rpc_encode_msg's buffers */
#include "rpc_codec.h"
#include "rpc_transport.h"

#include <string.h>

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- hostile payloads ------------------------------------------------------------------ */

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Envelope header (token, from, to) then the message fragments of msgs[0..n). */
static size_t envelope(uint8_t *out, size_t cap, uint64_t token, uint32_t from, uint32_t to,
                       const peer_msg *msgs, size_t n)
{
    size_t len = rpc_encode_header(token, from, to, out);
    for (size_t i = 0; i < n; i++) {
        uint8_t *f = NULL;
        size_t fl = 0;
        if (rpc_encode_msg(&msgs[i], &f, &fl) != HDMLP_OK) {
            break;
        }
        if (len + fl <= cap) {
            memcpy(out + len, f, fl);
            len += fl;
        }
        hd_free(f);
    }
    return len;
}

/* A protobuf Envelope with the right header and one raw Msg body. */
static size_t envelope_raw(uint8_t *out, uint64_t token, const uint8_t *msg, size_t mlen)
{
    size_t len = rpc_encode_header(token, 1, 0, out);
    out[len++] = 0x22; /* field 4, length-delimited */
    len += put_varint(out + len, mlen);
    memcpy(out + len, msg, mlen);
    return len + mlen;
}

/* Builds attack `kind` number `i` into buf (cap bytes); returns its length. */
size_t make_attack(int kind, uint64_t i, uint64_t *rng, uint8_t *buf, size_t cap,
                   uint64_t *expect_ok)
{
    static const uint8_t data[64] = {1, 2, 3};
    peer_msg m;
    memset(&m, 0, sizeof(m));
    *expect_ok = 0;
    switch (kind) {
    case A_TOKEN:
        m.kind = i % 2 ? PEER_SAMPLE : PEER_REQUEST;
        m.from = 1;
        m.to = 0;
        m.epoch = 0;
        m.position = 2 * (i % 1000);
        m.index = i % spec.n_samples;
        m.size = m.kind == PEER_SAMPLE ? sizeof(data) : 0;
        m.data = m.kind == PEER_SAMPLE ? data : NULL;
        return envelope(buf, cap, TOKEN ^ (1 + next_rand(rng) % 1000), 1, 0, &m, 1);
    case A_MALFORMED: {
        uint8_t msg[64];
        size_t ml = 0;
        switch (i % 5) {
        case 0: /* SAMPLE whose size says 1 TiB, with 10 bytes of data */
            msg[ml++] = 0x08, msg[ml++] = PEER_SAMPLE;
            msg[ml++] = 0x50, ml += put_varint(msg + ml, (uint64_t)1 << 40);
            msg[ml++] = 0x5A, msg[ml++] = 10;
            memset(msg + ml, 7, 10), ml += 10;
            return envelope_raw(buf, TOKEN, msg, ml);
        case 1: /* unknown kind */
            msg[ml++] = 0x08, msg[ml++] = 99;
            return envelope_raw(buf, TOKEN, msg, ml);
        case 2: /* REQUEST missing its fields */
            msg[ml++] = 0x08, msg[ml++] = PEER_REQUEST;
            return envelope_raw(buf, TOKEN, msg, ml);
        case 3: { /* more messages than RPC_MAX_MSGS (each an empty DONE) */
            size_t len = rpc_encode_header(TOKEN, 1, 0, buf);
            for (uint32_t k = 0; k <= RPC_MAX_MSGS && len + 4 <= cap; k++) {
                buf[len++] = 0x22, buf[len++] = 2, buf[len++] = 0x08, buf[len++] = PEER_DONE;
            }
            return len;
        }
        default: { /* random bytes */
            const size_t len = 1 + next_rand(rng) % 1024;
            for (size_t k = 0; k < len; k++) {
                buf[k] = (uint8_t)next_rand(rng);
            }
            return len;
        }
        }
    }
    case A_RANKS: {
        static const uint32_t froms[] = {2, 7, UINT32_MAX, 0, 1};
        static const uint32_t tos[] = {0, 0, 0, 0, 5};
        const size_t k = i % 5;
        m.kind = PEER_REQUEST;
        m.from = froms[k];
        m.to = tos[k];
        m.epoch = 0;
        m.position = 1;
        m.credit = 100;
        return envelope(buf, cap, TOKEN, froms[k], tos[k], &m, 1);
    }
    case A_LOC_REQUEST:
        /* well-formed, right token and ranks: absurd location and credit */
        m.kind = PEER_REQUEST;
        m.from = 1;
        m.to = 0;
        m.epoch = (uint64_t)1 << (20 + i % 40);
        m.position = next_rand(rng);
        m.group = next_rand(rng);
        m.slot = (uint32_t)next_rand(rng);
        m.credit = UINT64_MAX - i;
        *expect_ok = 1; /* the codec cannot know the dataset: accepted, then ignored */
        return envelope(buf, cap, TOKEN, 1, 0, &m, 1);
    case A_LOC_SAMPLE:
        m.kind = PEER_SAMPLE;
        m.from = 1;
        m.to = 0;
        m.epoch = 0;
        m.position = 0;
        m.index = spec.n_samples + i; /* out of range */
        m.size = sizeof(data);
        m.data = data;
        *expect_ok = 1;
        return envelope(buf, cap, TOKEN, 1, 0, &m, 1);
    default:
        return 0;
    }
}
