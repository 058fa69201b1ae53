/*
 * rpc/ tests, the codec: round trips of every message kind, send-side checks, and every
 * rejection (header, message and wire errors, size mismatches, too many fragments, random
 * bytes). Part of the test_rpc binary (fixtures: support/rpc_fixture.h).
 */
#include "hdmlp.h"
#include "rpc_codec.h"
#include "support/rpc_fixture.h"

#include <criterion/criterion.h>

#include "loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- codec ----------------------------------------------------------------------------- */

static const rpc_check chk3 = {
    .token = 0x1122334455667788ull, .world = 3, .self = 1, .max_data = 1 << 20};

static int decode_rc(const uint8_t *buf, size_t len)
{
    rpc_envelope e;
    const int rc = rpc_decode(&chk3, buf, len, &e);
    rpc_envelope_free(&e);
    return rc;
}

Test(rpc_codec, round_trip_every_kind)
{
    uint8_t *d = make_data(42, 1000);
    peer_msg in[4] = {msg_request(0, 1, 9), msg_sample(0, 1, 42, d, 1000, 0),
                      msg_sample(0, 1, 43, NULL, 0, 1), msg_request(0, 1, 0)};
    in[3].kind = PEER_DONE;
    in[3].epoch = in[3].position = in[3].group = in[3].slot = 0;
    in[3].credit = 0;
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(rpc_msg_check_send(&in[i], 3, 0, 1 << 20), HDMLP_OK, "%s",
                     hdmlp_last_error());
    }
    size_t len;
    uint8_t *buf = envelope(chk3.token, 0, 1, in, 4, &len);
    rpc_envelope e;
    cr_assert_eq(rpc_decode(&chk3, buf, len, &e), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(e.n, 4);
    cr_assert_eq(e.from, 0);
    cr_assert_eq(e.to, 1);
    for (size_t i = 0; i < 4; i++) {
        const peer_msg *a = &in[i], *b = &e.msgs[i];
        cr_assert_eq(b->kind, a->kind);
        cr_assert_eq(b->from, 0);
        cr_assert_eq(b->to, 1);
        cr_assert_eq(b->token, chk3.token);
        cr_assert_eq(b->epoch, a->epoch);
        cr_assert_eq(b->position, a->position);
        cr_assert_eq(b->group, a->group);
        cr_assert_eq(b->slot, a->slot);
        cr_assert_eq(b->prefetch, a->prefetch);
        cr_assert_eq(b->credit, a->credit);
        cr_assert_eq(b->index, a->index);
        cr_assert_eq(b->label, a->label);
        cr_assert_eq(b->size, a->size);
        if (a->size > 0) {
            cr_assert_eq(memcmp(b->data, a->data, a->size), 0);
        }
    }
    rpc_envelope_free(&e);
    /* A probe: header only. */
    uint8_t hdr[RPC_HEADER_MAX];
    const size_t hl = rpc_encode_header(chk3.token, 2, 1, hdr);
    cr_assert_eq(rpc_decode(&chk3, hdr, hl, &e), HDMLP_OK);
    cr_assert_eq(e.n, 0);
    rpc_envelope_free(&e);
    free(buf);
    free(d);
}

Test(rpc_codec, send_checks)
{
    peer_msg m = msg_request(0, 1, 1);
    cr_assert_eq(rpc_msg_check_send(&m, 3, 0, 100), HDMLP_OK);
    m.to = 0;
    cr_assert_eq(rpc_msg_check_send(&m, 3, 0, 100), HDMLP_E_INVAL); /* to self */
    m.to = 3;
    cr_assert_eq(rpc_msg_check_send(&m, 3, 0, 100), HDMLP_E_INVAL); /* to >= world */
    m.to = 1;
    m.kind = 9;
    cr_assert_eq(rpc_msg_check_send(&m, 3, 0, 100), HDMLP_E_INVAL);
    cr_assert_str_neq(hdmlp_last_error(), "");
    uint8_t d[101] = {0};
    m = msg_sample(0, 1, 5, d, 101, 0);
    cr_assert_eq(rpc_msg_check_send(&m, 3, 0, 100), HDMLP_E_RANGE);
    m.size = 100;
    cr_assert_eq(rpc_msg_check_send(&m, 3, 0, 100), HDMLP_OK);
    m.data = NULL;
    cr_assert_eq(rpc_msg_check_send(&m, 3, 0, 100), HDMLP_E_INVAL);
    cr_assert_eq(rpc_msg_check_send(NULL, 3, 0, 100), HDMLP_E_INVAL);
}

Test(rpc_codec, rejects_header_errors)
{
    peer_msg m = msg_request(0, 1, 1);
    size_t len;
    uint8_t *b = envelope(chk3.token ^ 1, 0, 1, &m, 1, &len);
    cr_assert_eq(decode_rc(b, len), HDMLP_E_PEER, "wrong token");
    free(b);
    b = envelope(chk3.token, 3, 1, &m, 1, &len);
    cr_assert_eq(decode_rc(b, len), HDMLP_E_CORRUPT, "from >= world");
    free(b);
    b = envelope(chk3.token, 1, 1, &m, 1, &len);
    cr_assert_eq(decode_rc(b, len), HDMLP_E_CORRUPT, "from == self");
    free(b);
    b = envelope(chk3.token, 0, 2, &m, 1, &len);
    cr_assert_eq(decode_rc(b, len), HDMLP_E_CORRUPT, "to != self");
    cr_assert(strstr(hdmlp_last_error(), "rank 2") != NULL, "%s", hdmlp_last_error());
    free(b);
    /* Missing header fields: a lone fragment. */
    uint8_t *f;
    size_t fl;
    cr_assert_eq(rpc_encode_msg(&m, &f, &fl), HDMLP_OK);
    cr_assert_eq(decode_rc(f, fl), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "missing field token") != NULL, "%s",
              hdmlp_last_error());
    hd_free(f);
    cr_assert_eq(decode_rc(NULL, 0), HDMLP_E_CORRUPT, "empty");
}

Test(rpc_codec, rejects_message_errors)
{
    size_t len;
    uint8_t *b;
    uint8_t d[16] = {1, 2, 3};
    /* unknown kind */
    peer_msg m = msg_request(0, 1, 1);
    m.kind = 7;
    b = envelope(chk3.token, 0, 1, &m, 1, &len);
    cr_assert_eq(decode_rc(b, len), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "unknown kind 7") != NULL, "%s", hdmlp_last_error());
    free(b);
    /* data above max_data */
    uint8_t *big = calloc(1, (1 << 20) + 1);
    m = msg_sample(0, 1, 5, big, (1 << 20) + 1, 0);
    b = envelope(chk3.token, 0, 1, &m, 1, &len);
    cr_assert_eq(decode_rc(b, len), HDMLP_E_RANGE, "%s", hdmlp_last_error());
    free(b);
    free(big);
    /* envelope above the limit */
    uint8_t *huge = calloc(1, RPC_ENVELOPE_MAX(chk3.max_data) + 1);
    cr_assert_eq(decode_rc(huge, RPC_ENVELOPE_MAX(chk3.max_data) + 1), HDMLP_E_RANGE);
    free(huge);
    /* A REQUEST with a SAMPLE's data field: encode as SAMPLE, then flip the kind byte. */
    m = msg_sample(0, 1, 5, d, sizeof d, 0);
    b = envelope(chk3.token, 0, 1, &m, 1, &len);
    cr_assert_eq(decode_rc(b, len), HDMLP_OK);
    /* find the kind field of the fragment (tag 0x08 value 2) and make it REQUEST */
    size_t k = 0;
    while (k + 1 < len && !(b[k] == 0x08 && b[k + 1] == PEER_SAMPLE)) {
        k++;
    }
    cr_assert(k + 1 < len);
    b[k + 1] = PEER_REQUEST;
    cr_assert_eq(decode_rc(b, len), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "missing field credit") != NULL, "%s",
              hdmlp_last_error());
    b[k + 1] = PEER_DONE;
    cr_assert_eq(decode_rc(b, len), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "unexpected field") != NULL, "%s", hdmlp_last_error());
    free(b);
}

/* Hand-made wire bytes: header then one fragment built field by field. */
static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    return n;
}

static size_t wire(uint8_t *out, const uint8_t *body, size_t body_len)
{
    size_t n = rpc_encode_header(chk3.token, 0, 1, out);
    out[n++] = 0x22; /* field 4, length-delimited */
    n += put_varint(out + n, body_len);
    memcpy(out + n, body, body_len);
    return n + body_len;
}

Test(rpc_codec, rejects_wire_errors)
{
    uint8_t out[256], body[64];
    size_t bl = 0;
    /* DONE: kind = 3 */
    body[bl++] = 0x08;
    body[bl++] = 3;
    cr_assert_eq(decode_rc(out, wire(out, body, bl)), HDMLP_OK, "%s", hdmlp_last_error());
    /* duplicate field */
    body[bl++] = 0x08;
    body[bl++] = 3;
    cr_assert_eq(decode_rc(out, wire(out, body, bl)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "twice") != NULL, "%s", hdmlp_last_error());
    /* unknown field 12 */
    bl = 2;
    body[bl++] = (12 << 3) | 0;
    body[bl++] = 1;
    cr_assert_eq(decode_rc(out, wire(out, body, bl)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "unknown field 12") != NULL, "%s", hdmlp_last_error());
    /* wrong wire type for kind (fixed32) */
    bl = 0;
    body[bl++] = 0x0d;
    memset(body + bl, 0, 4);
    bl += 4;
    cr_assert_eq(decode_rc(out, wire(out, body, bl)), HDMLP_E_CORRUPT);
    /* kind above 32 bits */
    bl = 0;
    body[bl++] = 0x08;
    bl += put_varint(body + bl, (1ull << 32) + PEER_DONE);
    cr_assert_eq(decode_rc(out, wire(out, body, bl)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "out of range") != NULL, "%s", hdmlp_last_error());
    /* truncated varint at the end */
    bl = 0;
    body[bl++] = 0x08;
    body[bl++] = 0x80;
    cr_assert_eq(decode_rc(out, wire(out, body, bl)), HDMLP_E_CORRUPT);
    /* fragment length beyond the buffer */
    const size_t n = wire(out, (const uint8_t *)"\x08\x03", 2);
    cr_assert_eq(decode_rc(out, n - 1), HDMLP_E_CORRUPT);
    /* a group wire type at top level */
    out[0] = 0x0b;
    cr_assert_eq(decode_rc(out, n), HDMLP_E_CORRUPT);
}

Test(rpc_codec, rejects_size_mismatch_and_too_many)
{
    /* SAMPLE whose size field disagrees with its data: encode size 4 data 3 by hand. */
    uint8_t d[4] = {9, 9, 9, 9};
    peer_msg m = msg_sample(0, 1, 1, d, 4, 1);
    uint8_t *f;
    size_t fl;
    cr_assert_eq(rpc_encode_msg(&m, &f, &fl), HDMLP_OK);
    /* data is the last field: tag 0x5a, len 4, bytes; shrink it to 3 and fix lengths */
    cr_assert_eq(f[fl - 6], 0x5a);
    cr_assert_eq(f[fl - 5], 4);
    f[fl - 5] = 3;
    cr_assert_eq(f[1], fl - 2); /* one-byte fragment length */
    f[1] = (uint8_t)(fl - 3);
    uint8_t buf[256];
    size_t n = rpc_encode_header(chk3.token, 0, 1, buf);
    memcpy(buf + n, f, fl - 1);
    n += fl - 1;
    cr_assert_eq(decode_rc(buf, n), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "size 4 but 3 data bytes") != NULL, "%s",
              hdmlp_last_error());
    hd_free(f);
    /* RPC_MAX_MSGS + 1 DONE messages */
    const size_t many = RPC_MAX_MSGS + 1;
    uint8_t *big = malloc(RPC_HEADER_MAX + many * 4);
    n = rpc_encode_header(chk3.token, 0, 1, big);
    for (size_t i = 0; i < many; i++) {
        big[n++] = 0x22;
        big[n++] = 2;
        big[n++] = 0x08;
        big[n++] = PEER_DONE;
    }
    cr_assert_eq(decode_rc(big, n), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "more than") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(decode_rc(big, n - 4), HDMLP_OK, "%s", hdmlp_last_error());
    free(big);
}

Test(rpc_codec, random_bytes_never_crash)
{
    /* Seeded random mutations of a valid envelope: every result is OK or an error. */
    uint8_t d[100];
    for (size_t i = 0; i < sizeof d; i++) {
        d[i] = (uint8_t)i;
    }
    peer_msg ms[3] = {msg_request(0, 1, 5), msg_sample(2, 1, 7, d, sizeof d, 1),
                      msg_request(0, 1, 6)};
    size_t len;
    uint8_t *base = envelope(chk3.token, 0, 1, ms, 3, &len);
    uint64_t s = 12345;
    printf("rpc_codec.random_bytes_never_crash: seed 12345\n");
    uint8_t *buf = malloc(len);
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(buf, base, len);
        const int flips = 1 + iter % 4;
        for (int f = 0; f < flips; f++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            buf[(s >> 33) % len] = (uint8_t)(s >> 20);
        }
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const size_t cut = iter % 3 == 0 ? (size_t)((s >> 33) % (len + 1)) : len;
        const int rc = decode_rc(buf, cut);
        cr_assert(rc == HDMLP_OK || rc == HDMLP_E_CORRUPT || rc == HDMLP_E_RANGE ||
                      rc == HDMLP_E_PEER,
                  "rc %d", rc);
    }
    free(buf);
    free(base);
}
