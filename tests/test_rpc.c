/*
 * rpc/ tests: the codec (round trips and every rejection), and the gRPC transport on
 * loopback: messages of every kind between three ranks, order per pair, answers ahead of
 * queued prefetches, wrong token, malformed and oversized calls, a destroyed or absent
 * peer, a full send queue, bind failure, draining on destroy, a throughput figure, and
 * real loaders exchanging samples over gRPC (exactly once per epoch).
 * Ports come from rpc_pick_endpoint("127.0.0.1") (bind port 0, release, reuse).
 */
#include "hdmlp.h"
#include "loader.h"
#include "rpc_codec.h"
#include "rpc_transport.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 4
#define MAX_RECS 20000

/* ---- helpers --------------------------------------------------------------------------- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Deterministic payload byte i of sample `index`. */
static uint8_t pattern(uint64_t index, uint64_t i)
{
    return (uint8_t)(index * 131u + i * 7u + 1u);
}

static uint8_t *make_data(uint64_t index, size_t n)
{
    uint8_t *d = malloc(n > 0 ? n : 1);
    cr_assert_not_null(d);
    for (size_t i = 0; i < n; i++) {
        d[i] = pattern(index, i);
    }
    return d;
}

typedef struct rec {
    peer_msg m; /* data pointer cleared */
    int data_ok;
} rec;

typedef struct err_rec {
    uint32_t rank;
    int code;
    char detail[256];
    uint64_t at_ms;
} err_rec;

typedef struct node {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rec *recs;
    size_t n_recs; /* messages received; the first MAX_RECS are kept in recs */
    err_rec errs[8];
    size_t n_errs;
    int check_data;
    /* optional: block on_msg until released */
    int block;
    peer_transport *t;
} node;

static void on_msg(void *ctx, const peer_msg *m)
{
    node *n = ctx;
    int ok = 1;
    if (n->check_data && m->kind == PEER_SAMPLE) {
        for (uint64_t i = 0; i < m->size; i++) {
            if (m->data[i] != pattern(m->index, i)) {
                ok = 0;
                break;
            }
        }
    }
    pthread_mutex_lock(&n->mu);
    while (n->block) {
        pthread_cond_wait(&n->cv, &n->mu);
    }
    if (n->n_recs < MAX_RECS) {
        n->recs[n->n_recs].m = *m;
        n->recs[n->n_recs].m.data = NULL;
        n->recs[n->n_recs].data_ok = ok;
    }
    n->n_recs++;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

static void on_error(void *ctx, uint32_t rank, int code, const char *detail)
{
    node *n = ctx;
    pthread_mutex_lock(&n->mu);
    if (n->n_errs < sizeof n->errs / sizeof n->errs[0]) {
        err_rec *e = &n->errs[n->n_errs++];
        e->rank = rank;
        e->code = code;
        snprintf(e->detail, sizeof e->detail, "%s", detail);
        e->at_ms = now_ms();
    }
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

static void node_init(node *n)
{
    memset(n, 0, sizeof *n);
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    n->recs = calloc(MAX_RECS, sizeof *n->recs);
    n->check_data = 1;
    cr_assert_not_null(n->recs);
}

static void node_fini(node *n)
{
    if (n->t != NULL) {
        n->t->destroy(n->t);
        n->t = NULL;
    }
    free(n->recs);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
}

/* Waits until n has at least `count` messages (1) or errors (0) within ms. */
static int node_wait(node *n, size_t count, int errors, uint64_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&n->mu);
    while ((errors ? n->n_errs : n->n_recs) < count) {
        if (pthread_cond_timedwait(&n->cv, &n->mu, &until) != 0) {
            break;
        }
    }
    const int ok = (errors ? n->n_errs : n->n_recs) >= count;
    pthread_mutex_unlock(&n->mu);
    return ok;
}

static size_t node_count(node *n, int errors)
{
    pthread_mutex_lock(&n->mu);
    const size_t c = errors ? n->n_errs : n->n_recs;
    pthread_mutex_unlock(&n->mu);
    return c;
}

typedef struct cluster {
    uint32_t world;
    char eps[MAX_RANKS][64];
    hdmlp_config *cfg[MAX_RANKS];
    node nodes[MAX_RANKS];
} cluster;

/* Configures `world` ranks on loopback (tokens[r], or 77 for all if tokens is NULL), whose
 * peers are reached through the path HDMLP_TEST_SAME_HOST names: "socket" (gRPC over the
 * Unix socket: the default here, these are the gRPC transport's tests) or "shm" (rings;
 * ctest runs the rpc_transport tests both ways). */
static void cluster_config(cluster *c, uint32_t world, const uint64_t *tokens, uint32_t timeout)
{
    memset(c, 0, sizeof *c);
    c->world = world;
    const char *ptrs[MAX_RANKS];
    for (uint32_t r = 0; r < world; r++) {
        cr_assert_eq(rpc_pick_endpoint("127.0.0.1", c->eps[r], sizeof c->eps[r]), HDMLP_OK,
                     "%s", hdmlp_last_error());
        ptrs[r] = c->eps[r];
    }
    for (uint32_t r = 0; r < world; r++) {
        cr_assert_eq(hdmlp_config_create(&c->cfg[r]), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_rank(c->cfg[r], r, world), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_peers(c->cfg[r], ptrs, world), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_job_token(c->cfg[r], tokens ? tokens[r] : 77), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_peer_timeout(c->cfg[r], timeout), HDMLP_OK);
        const char *path = getenv("HDMLP_TEST_SAME_HOST");
        cr_assert_eq(
            hdmlp_config_set_same_host(c->cfg[r], path != NULL && strcmp(path, "shm") == 0
                                                      ? HDMLP_SAME_HOST_SHM
                                                      : HDMLP_SAME_HOST_SOCKET),
            HDMLP_OK);
        node_init(&c->nodes[r]);
    }
}

static void cluster_start_one(cluster *c, uint32_t r, const rpc_opts *o)
{
    const peer_handler h = {&c->nodes[r], on_msg, on_error};
    const int rc = rpc_transport_create_opts(c->cfg[r], &h, o, &c->nodes[r].t);
    cr_assert_eq(rc, HDMLP_OK, "rank %u: %s: %s", r, hdmlp_err_name(rc), hdmlp_last_error());
}

static void cluster_start(cluster *c, uint32_t world, const uint64_t *tokens, uint32_t timeout,
                          const rpc_opts *o)
{
    cluster_config(c, world, tokens, timeout);
    for (uint32_t r = 0; r < world; r++) {
        cluster_start_one(c, r, o);
    }
}

static void cluster_stop(cluster *c)
{
    for (uint32_t r = 0; r < c->world; r++) {
        node_fini(&c->nodes[r]);
        hdmlp_config_free(c->cfg[r]);
    }
}

static peer_msg msg_request(uint32_t from, uint32_t to, uint64_t pos)
{
    peer_msg m;
    memset(&m, 0, sizeof m);
    m.kind = PEER_REQUEST;
    m.from = from;
    m.to = to;
    m.epoch = 3;
    m.position = pos;
    m.group = pos % 17;
    m.slot = (uint32_t)(pos % 5);
    m.free_remote = 1000 + pos;
    return m;
}

static peer_msg msg_sample(uint32_t from, uint32_t to, uint64_t index, const uint8_t *data,
                           uint64_t size, uint32_t prefetch)
{
    peer_msg m;
    memset(&m, 0, sizeof m);
    m.kind = PEER_SAMPLE;
    m.from = from;
    m.to = to;
    m.epoch = 2;
    m.position = index * 3;
    m.group = index % 11;
    m.slot = (uint32_t)(index % 7);
    m.prefetch = prefetch;
    m.index = index;
    m.label = (uint32_t)(index % 10);
    m.data = data;
    m.size = size;
    return m;
}

static int send_ok(peer_transport *t, const peer_msg *m)
{
    const int rc = t->send(t, m);
    cr_assert_eq(rc, HDMLP_OK, "send: %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    return rc;
}

/* A synchronous call made with gRPC directly (not through a transport). */
static grpc_status_code raw_call(const char *target, const char *method, const void *buf,
                                 size_t len, int with_message, char *detail, size_t cap)
{
    grpc_init();
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, cr, NULL);
    grpc_channel_credentials_release(cr);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_slice ms = grpc_slice_from_static_string(method);
    const gpr_timespec dl =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(5000, GPR_TIMESPAN));
    grpc_call *call =
        grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, ms, NULL, dl, NULL);
    grpc_slice s = grpc_slice_from_copied_buffer(buf, len);
    grpc_byte_buffer *req = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    grpc_byte_buffer *resp = NULL;
    grpc_metadata_array imd, tmd;
    grpc_metadata_array_init(&imd);
    grpc_metadata_array_init(&tmd);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details;
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n++].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
    if (with_message) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = req;
    }
    ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &imd;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &resp;
    ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[n].data.recv_status_on_client.trailing_metadata = &tmd;
    ops[n].data.recv_status_on_client.status = &status;
    ops[n++].data.recv_status_on_client.status_details = &details;
    cr_assert_eq(grpc_call_start_batch(call, ops, n, (void *)1, NULL), GRPC_CALL_OK);
    const grpc_event ev =
        grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    cr_assert_eq(ev.type, GRPC_OP_COMPLETE);
    snprintf(detail, cap, "%.*s", (int)GRPC_SLICE_LENGTH(details),
             (const char *)GRPC_SLICE_START_PTR(details));
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&imd);
    grpc_metadata_array_destroy(&tmd);
    grpc_byte_buffer_destroy(req);
    if (resp != NULL) {
        grpc_byte_buffer_destroy(resp);
    }
    grpc_call_unref(call);
    grpc_channel_destroy(ch);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
    grpc_shutdown();
    return status;
}

/* An Envelope: header + fragments of msgs (not checked: tests build bad ones on purpose). */
static uint8_t *envelope(uint64_t token, uint32_t from, uint32_t to, const peer_msg *msgs,
                         size_t n, size_t *len)
{
    uint8_t hdr[RPC_HEADER_MAX];
    size_t total = rpc_encode_header(token, from, to, hdr);
    uint8_t *out = malloc(total);
    cr_assert_not_null(out);
    memcpy(out, hdr, total);
    for (size_t i = 0; i < n; i++) {
        uint8_t *f;
        size_t fl;
        cr_assert_eq(rpc_encode_msg(&msgs[i], &f, &fl), HDMLP_OK);
        out = realloc(out, total + fl);
        cr_assert_not_null(out);
        memcpy(out + total, f, fl);
        total += fl;
        hd_free(f);
    }
    *len = total;
    return out;
}

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
    in[3].free_remote = 0;
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
        cr_assert_eq(b->free_remote, a->free_remote);
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
    cr_assert(strstr(hdmlp_last_error(), "missing field free_remote") != NULL, "%s",
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

/* ---- transport --------------------------------------------------------------------------- */

Test(rpc_transport, create_checks_config, .timeout = 20)
{
    cluster c;
    cluster_config(&c, 2, NULL, 1000);
    const peer_handler h = {&c.nodes[0], on_msg, on_error};
    peer_transport *t = (peer_transport *)1;
    hdmlp_config *one;
    cr_assert_eq(hdmlp_config_create(&one), HDMLP_OK);
    cr_assert_eq(rpc_transport_create(one, &h, &t), HDMLP_E_INVAL, "world 1");
    cr_assert_null(t);
    const char *eps[3] = {c.eps[0], c.eps[1], c.eps[1]};
    cr_assert_eq(hdmlp_config_set_rank(one, 0, 2), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_peers(one, eps, 3), HDMLP_OK);
    cr_assert_eq(rpc_transport_create(one, &h, &t), HDMLP_E_INVAL, "3 peers for world 2");
    cr_assert(strstr(hdmlp_last_error(), "3 peer endpoints") != NULL, "%s", hdmlp_last_error());
    const peer_handler none = {NULL, NULL, NULL};
    cr_assert_eq(rpc_transport_create(c.cfg[0], &none, &t), HDMLP_E_INVAL, "no on_msg");
    hdmlp_config_free(one);
    cluster_stop(&c);
}

Test(rpc_transport, all_kinds_three_ranks, .timeout = 60)
{
    cluster c;
    cluster_start(&c, 3, NULL, 5000, NULL);
    const size_t sizes[] = {0, 1, 4096, 65536, 3u << 20};
    const size_t n_sizes = sizeof sizes / sizeof sizes[0];
    uint8_t *data[5];
    for (size_t i = 0; i < n_sizes; i++) {
        data[i] = make_data(100 + i, sizes[i]);
    }
    /* Every rank sends to every other: a REQUEST, an answer and a prefetch of each size,
     * then DONE. */
    for (uint32_t from = 0; from < 3; from++) {
        for (uint32_t to = 0; to < 3; to++) {
            if (to == from) {
                continue;
            }
            peer_msg m = msg_request(from, to, 10 * from + to);
            send_ok(c.nodes[from].t, &m);
            for (size_t i = 0; i < n_sizes; i++) {
                m = msg_sample(from, to, 100 + i, data[i], sizes[i], 0);
                send_ok(c.nodes[from].t, &m);
                m = msg_sample(from, to, 100 + i, data[i], sizes[i], 1);
                send_ok(c.nodes[from].t, &m);
            }
            memset(&m, 0, sizeof m);
            m.kind = PEER_DONE;
            m.from = from;
            m.to = to;
            send_ok(c.nodes[from].t, &m);
        }
    }
    const size_t per_pair = 2 + 2 * n_sizes;
    for (uint32_t r = 0; r < 3; r++) {
        node *n = &c.nodes[r];
        cr_assert(node_wait(n, 2 * per_pair, 0, 20000), "rank %u got %zu", r, node_count(n, 0));
        pthread_mutex_lock(&n->mu);
        cr_assert_eq(n->n_recs, 2 * per_pair);
        cr_assert_eq(n->n_errs, 0, "%s", n->n_errs ? n->errs[0].detail : "");
        for (uint32_t from = 0; from < 3; from++) {
            if (from == r) {
                continue;
            }
            /* Urgent messages in order: REQUEST, answers by size, DONE; prefetches in
             * order among themselves. */
            size_t urgent = 0, pf = 0;
            for (size_t i = 0; i < n->n_recs; i++) {
                const rec *x = &n->recs[i];
                if (x->m.from != from) {
                    continue;
                }
                cr_assert_eq(x->m.to, r);
                cr_assert_eq(x->m.token, 77);
                cr_assert(x->data_ok, "sample %lu corrupt", (unsigned long)x->m.index);
                if (x->m.kind == PEER_SAMPLE && x->m.prefetch) {
                    cr_assert_eq(x->m.index, 100 + pf);
                    cr_assert_eq(x->m.size, sizes[pf]);
                    pf++;
                    continue;
                }
                if (urgent == 0) {
                    cr_assert_eq(x->m.kind, PEER_REQUEST);
                    cr_assert_eq(x->m.position, 10 * from + r);
                    cr_assert_eq(x->m.free_remote, 1000 + 10 * from + r);
                    cr_assert_eq(x->m.epoch, 3);
                } else if (urgent <= n_sizes) {
                    cr_assert_eq(x->m.kind, PEER_SAMPLE);
                    cr_assert_eq(x->m.index, 100 + urgent - 1);
                    cr_assert_eq(x->m.size, sizes[urgent - 1]);
                    cr_assert_eq(x->m.label, (100 + urgent - 1) % 10);
                    cr_assert_eq(x->m.slot, (100 + urgent - 1) % 7);
                    cr_assert_eq(x->m.group, (100 + urgent - 1) % 11);
                    cr_assert_eq(x->m.position, (100 + urgent - 1) * 3);
                    cr_assert_eq(x->m.epoch, 2);
                } else {
                    cr_assert_eq(x->m.kind, PEER_DONE);
                }
                urgent++;
            }
            cr_assert_eq(urgent, 2 + n_sizes);
            cr_assert_eq(pf, n_sizes);
        }
        pthread_mutex_unlock(&n->mu);
    }
    rpc_stats st;
    rpc_transport_stats(c.nodes[0].t, &st);
    /* The sender counts a message when its call completes, which may lag the receiver's
     * handler: give the completion a bounded moment. */
    for (int i = 0; i < 500 && st.msgs_sent < 2 * per_pair; i++) {
        usleep(10000);
        rpc_transport_stats(c.nodes[0].t, &st);
    }
    cr_assert_geq(st.msgs_sent, 2 * per_pair);
    cr_assert_eq(st.msgs_recv, 2 * per_pair);
    cr_assert_eq(st.rejected, 0);
    for (size_t i = 0; i < n_sizes; i++) {
        free(data[i]);
    }
    cluster_stop(&c);
}

Test(rpc_transport, order_per_pair, .timeout = 60)
{
    cluster c;
    cluster_start(&c, 2, NULL, 5000, NULL);
    const size_t n_msgs = 5000;
    /* Both directions at once, from two threads each side would be the loader's pattern;
     * here one thread per side suffices to check FIFO per pair. */
    for (size_t i = 0; i < n_msgs; i++) {
        peer_msg m = msg_request(0, 1, i);
        send_ok(c.nodes[0].t, &m);
        uint8_t d[8];
        memset(d, 0, sizeof d);
        for (size_t k = 0; k < sizeof d; k++) {
            d[k] = pattern(i, k);
        }
        m = msg_sample(1, 0, i, d, sizeof d, 0);
        send_ok(c.nodes[1].t, &m);
    }
    cr_assert(node_wait(&c.nodes[1], n_msgs, 0, 30000));
    cr_assert(node_wait(&c.nodes[0], n_msgs, 0, 30000));
    for (size_t i = 0; i < n_msgs; i++) {
        cr_assert_eq(c.nodes[1].recs[i].m.position, i, "message %zu out of order", i);
        cr_assert_eq(c.nodes[0].recs[i].m.index, i, "answer %zu out of order", i);
        cr_assert(c.nodes[0].recs[i].data_ok);
    }
    cluster_stop(&c);
}

Test(rpc_transport, answers_overtake_prefetches, .timeout = 60)
{
    cluster c;
    cluster_start(&c, 2, NULL, 5000, NULL);
    const size_t n_pf = 300, sz = 64 << 10;
    uint8_t *d = make_data(1, sz);
    /* Hold the receiver so the prefetches are still queued at the sender when the answer
     * is queued, however the machine schedules the threads. */
    pthread_mutex_lock(&c.nodes[1].mu);
    c.nodes[1].block = 1;
    pthread_mutex_unlock(&c.nodes[1].mu);
    for (size_t i = 0; i < n_pf; i++) {
        peer_msg m = msg_sample(0, 1, 1, d, sz, 1);
        m.position = i;
        send_ok(c.nodes[0].t, &m);
    }
    peer_msg a = msg_sample(0, 1, 1, d, sz, 0);
    a.position = 999999;
    send_ok(c.nodes[0].t, &a);
    pthread_mutex_lock(&c.nodes[1].mu);
    c.nodes[1].block = 0;
    pthread_cond_broadcast(&c.nodes[1].cv);
    pthread_mutex_unlock(&c.nodes[1].mu);
    cr_assert(node_wait(&c.nodes[1], n_pf + 1, 0, 30000));
    size_t at = SIZE_MAX, pf = 0;
    for (size_t i = 0; i < n_pf + 1; i++) {
        const rec *x = &c.nodes[1].recs[i];
        cr_assert(x->data_ok);
        if (!x->m.prefetch) {
            at = i;
        } else {
            cr_assert_eq(x->m.position, pf, "prefetches reordered");
            pf++;
        }
    }
    printf("rpc_transport.answers_overtake_prefetches: answer arrived %zu-th of %zu "
           "(queued last)\n",
           at + 1, n_pf + 1);
    cr_assert_lt(at, n_pf / 2, "the answer waited behind %zu prefetches", at);
    free(d);
    cluster_stop(&c);
}

Test(rpc_transport, wrong_token_rejected, .timeout = 30)
{
    /* Rank 0 belongs to another job (token 5); ranks 1 and 2 share token 6. */
    const uint64_t tokens[3] = {5, 6, 6};
    cluster c;
    cluster_start(&c, 3, tokens, 2000, NULL);
    peer_msg m = msg_request(0, 1, 1);
    const int rc = c.nodes[0].t->send(c.nodes[0].t, &m); /* may already be refused */
    cr_assert(rc == HDMLP_OK || rc == HDMLP_E_PEER);
    m = msg_request(2, 1, 2);
    send_ok(c.nodes[2].t, &m);
    cr_assert(node_wait(&c.nodes[1], 1, 0, 10000));
    /* rank 0 learns that rank 1 (and 2) refuse it */
    cr_assert(node_wait(&c.nodes[0], 2, 1, 10000), "no error on the foreign rank");
    for (size_t i = 0; i < 2; i++) {
        const err_rec *e = &c.nodes[0].errs[i];
        cr_assert_eq(e->code, HDMLP_E_PEER);
        cr_assert(strstr(e->detail, "PERMISSION_DENIED") != NULL ||
                      strstr(e->detail, "rejected by the peer") != NULL,
                  "%s", e->detail);
        cr_assert(strstr(e->detail, "token") != NULL, "%s", e->detail);
    }
    cr_assert_eq(c.nodes[0].t->send(c.nodes[0].t, &(peer_msg){.kind = PEER_DONE, .to = 1}),
                 HDMLP_E_PEER);
    /* rank 1 delivered only rank 2's message */
    pthread_mutex_lock(&c.nodes[1].mu);
    for (size_t i = 0; i < c.nodes[1].n_recs; i++) {
        cr_assert_eq(c.nodes[1].recs[i].m.from, 2);
    }
    pthread_mutex_unlock(&c.nodes[1].mu);
    rpc_stats st;
    rpc_transport_stats(c.nodes[1].t, &st);
    cr_assert_geq(st.rejected, 1);
    cluster_stop(&c);
}

Test(rpc_transport, malformed_calls_rejected, .timeout = 30)
{
    rpc_opts o;
    cluster c;
    cluster_config(&c, 2, NULL, 5000);
    rpc_opts_default(c.cfg[0], &o);
    o.max_data = 64 << 10;
    for (uint32_t r = 0; r < 2; r++) {
        cluster_start_one(&c, r, &o);
    }
    char det[256];
    const char garbage[] = "\xff\xff\xff\xff this is not an envelope";
    cr_assert_eq(
        raw_call(c.eps[1], "/hdmlp.Peer/Deliver", garbage, sizeof garbage, 1, det, sizeof det),
        GRPC_STATUS_INVALID_ARGUMENT, "%s", det);
    cr_assert(strstr(det, "rpc:") != NULL, "%s", det);
    cr_assert_eq(raw_call(c.eps[1], "/hdmlp.Peer/Deliver", "", 0, 0, det, sizeof det),
                 GRPC_STATUS_INVALID_ARGUMENT, "no message: %s", det);
    cr_assert_eq(raw_call(c.eps[1], "/other.Service/Method", "x", 1, 1, det, sizeof det),
                 GRPC_STATUS_UNIMPLEMENTED, "%s", det);
    /* Oversized: beyond gRPC's receive limit, and a well-formed envelope whose sample
     * exceeds max_data. */
    uint8_t *big = make_data(3, 256 << 10);
    cr_assert_eq(raw_call(c.eps[1], "/hdmlp.Peer/Deliver", big, 256 << 10, 1, det, sizeof det),
                 GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", det);
    peer_msg m = msg_sample(0, 1, 3, big, (64 << 10) + 1, 0);
    cr_assert_eq(c.nodes[0].t->send(c.nodes[0].t, &m), HDMLP_E_RANGE);
    size_t len;
    uint8_t *env = envelope(77, 0, 1, &m, 1, &len);
    cr_assert_eq(raw_call(c.eps[1], "/hdmlp.Peer/Deliver", env, len, 1, det, sizeof det),
                 GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", det);
    cr_assert(strstr(det, "limit") != NULL, "%s", det);
    free(env);
    /* A valid envelope made by hand is delivered; the server kept working. */
    m = msg_sample(0, 1, 3, big, 64 << 10, 0);
    env = envelope(77, 0, 1, &m, 1, &len);
    cr_assert_eq(raw_call(c.eps[1], "/hdmlp.Peer/Deliver", env, len, 1, det, sizeof det),
                 GRPC_STATUS_OK, "%s", det);
    free(env);
    cr_assert(node_wait(&c.nodes[1], 1, 0, 5000));
    m = msg_request(0, 1, 4);
    send_ok(c.nodes[0].t, &m);
    cr_assert(node_wait(&c.nodes[1], 2, 0, 5000));
    cr_assert_eq(c.nodes[1].recs[0].m.index, 3);
    cr_assert(c.nodes[1].recs[0].data_ok);
    cr_assert_eq(c.nodes[1].recs[1].m.kind, PEER_REQUEST);
    cr_assert_eq(node_count(&c.nodes[0], 1), 0);
    cr_assert_eq(node_count(&c.nodes[1], 1), 0);
    rpc_stats st;
    rpc_transport_stats(c.nodes[1].t, &st);
    /* garbage, no message, unknown method, sample above max_data; the 256 KiB call is
     * refused by gRPC itself (max receive length) before the server sees it */
    cr_assert_eq(st.rejected, 4);
    free(big);
    cluster_stop(&c);
}

Test(rpc_transport, destroyed_peer_reported, .timeout = 30)
{
    cluster c;
    cluster_start(&c, 3, NULL, 500, NULL);
    peer_msg m = msg_request(0, 1, 1);
    send_ok(c.nodes[0].t, &m);
    cr_assert(node_wait(&c.nodes[1], 1, 0, 5000));
    const uint64_t t0 = now_ms();
    c.nodes[1].t->destroy(c.nodes[1].t);
    c.nodes[1].t = NULL;
    for (uint32_t r = 0; r < 3; r += 2) {
        cr_assert(node_wait(&c.nodes[r], 1, 1, 5000), "rank %u never reported rank 1", r);
        const err_rec *e = &c.nodes[r].errs[0];
        printf("rpc_transport.destroyed_peer_reported: rank %u after %llu ms: %s\n", r,
               (unsigned long long)(e->at_ms - t0), e->detail);
        cr_assert_eq(e->rank, 1);
        cr_assert_eq(e->code, HDMLP_E_PEER);
        cr_assert(strstr(e->detail, "rank 1 (127.0.0.1:") != NULL, "%s", e->detail);
        /* within 1.25 x timeout plus scheduling slack */
        cr_assert_leq(e->at_ms - t0, 1000, "took %llu ms", (unsigned long long)(e->at_ms - t0));
        cr_assert_eq(c.nodes[r].t->send(c.nodes[r].t, &(peer_msg){.kind = PEER_DONE, .to = 1}),
                     HDMLP_E_PEER);
        cr_assert(strstr(hdmlp_last_error(), "rank 1") != NULL, "%s", hdmlp_last_error());
    }
    /* 0 and 2 still talk, and report nothing else */
    m = msg_request(0, 2, 5);
    send_ok(c.nodes[0].t, &m);
    cr_assert(node_wait(&c.nodes[2], 1, 0, 5000));
    cr_assert_eq(node_count(&c.nodes[0], 1), 1);
    cr_assert_eq(node_count(&c.nodes[2], 1), 1);
    cluster_stop(&c);
}

Test(rpc_transport, absent_peer_reported, .timeout = 30)
{
    cluster c;
    cluster_config(&c, 2, NULL, 300);
    cluster_start_one(&c, 0, NULL); /* rank 1 never starts */
    const uint64_t t0 = now_ms();
    peer_msg m = msg_request(0, 1, 1);
    send_ok(c.nodes[0].t, &m);
    cr_assert(node_wait(&c.nodes[0], 1, 1, 5000));
    const err_rec *e = &c.nodes[0].errs[0];
    printf("rpc_transport.absent_peer_reported: after %llu ms: %s\n",
           (unsigned long long)(e->at_ms - t0), e->detail);
    cr_assert_eq(e->rank, 1);
    cr_assert(strstr(e->detail, "no answer within 300 ms") != NULL, "%s", e->detail);
    cr_assert_geq(e->at_ms - t0, 250);
    cr_assert_leq(e->at_ms - t0, 1500);
    cr_assert_eq(c.nodes[0].t->send(c.nodes[0].t, &m), HDMLP_E_PEER);
    cluster_stop(&c);
}

Test(rpc_transport, late_peer_waited_for, .timeout = 30)
{
    /* A peer that starts listening within the timeout is not an error. */
    cluster c;
    cluster_config(&c, 2, NULL, 3000);
    cluster_start_one(&c, 0, NULL);
    peer_msg m = msg_request(0, 1, 1);
    send_ok(c.nodes[0].t, &m);
    struct timespec ts = {0, 700 * 1000000L};
    nanosleep(&ts, NULL);
    cluster_start_one(&c, 1, NULL);
    cr_assert(node_wait(&c.nodes[1], 1, 0, 5000));
    cr_assert_eq(node_count(&c.nodes[0], 1), 0, "%s", c.nodes[0].errs[0].detail);
    cluster_stop(&c);
}

Test(rpc_transport, full_queue_fails_peer, .timeout = 30)
{
    rpc_opts o;
    cluster c;
    cluster_config(&c, 2, NULL, 5000);
    rpc_opts_default(c.cfg[0], &o);
    o.queue_bytes = 1 << 20;
    o.batch_bytes = 64 << 10;
    for (uint32_t r = 0; r < 2; r++) {
        cluster_start_one(&c, r, &o);
    }
    c.nodes[1].block = 1; /* rank 1's handler stops consuming */
    uint8_t *d = make_data(1, 60 << 10);
    int rc = HDMLP_OK;
    size_t sent = 0;
    while (rc == HDMLP_OK && sent < 1000) {
        peer_msg m = msg_sample(0, 1, 1, d, 60 << 10, 1);
        rc = c.nodes[0].t->send(c.nodes[0].t, &m);
        sent += rc == HDMLP_OK;
    }
    cr_assert_eq(rc, HDMLP_E_PEER, "never overflowed after %zu sends", sent);
    cr_assert(strstr(hdmlp_last_error(), "send queue full") != NULL, "%s", hdmlp_last_error());
    cr_assert_lt(sent, 40, "queue held %zu x 60 KiB with a 1 MiB cap", sent);
    cr_assert(node_wait(&c.nodes[0], 1, 1, 5000), "on_error not delivered");
    cr_assert(strstr(c.nodes[0].errs[0].detail, "send queue full") != NULL);
    pthread_mutex_lock(&c.nodes[1].mu);
    c.nodes[1].block = 0;
    pthread_cond_broadcast(&c.nodes[1].cv);
    pthread_mutex_unlock(&c.nodes[1].mu);
    free(d);
    cluster_stop(&c);
}

Test(rpc_transport, bind_in_use, .timeout = 30)
{
    cluster c;
    cluster_start(&c, 2, NULL, 1000, NULL);
    /* A third config whose listen address is rank 0's. */
    hdmlp_config *cfg;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    const char *eps[2] = {c.eps[0], c.eps[1]};
    cr_assert_eq(hdmlp_config_set_rank(cfg, 0, 2), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_peers(cfg, eps, 2), HDMLP_OK);
    peer_transport *t = (peer_transport *)1;
    const peer_handler h = {&c.nodes[0], on_msg, on_error};
    cr_assert_eq(rpc_transport_create(cfg, &h, &t), HDMLP_E_IO);
    cr_assert_null(t);
    printf("rpc_transport.bind_in_use: %s\n", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), c.eps[0]) != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "in use") != NULL, "%s", hdmlp_last_error());
    /* not an address of this host */
    cr_assert_eq(hdmlp_config_set_listen(cfg, "192.0.2.1:5555"), HDMLP_OK);
    cr_assert_eq(rpc_transport_create(cfg, &h, &t), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "192.0.2.1:5555") != NULL, "%s", hdmlp_last_error());
    hdmlp_config_free(cfg);
    /* the existing transports are unaffected */
    peer_msg m = msg_request(1, 0, 1);
    send_ok(c.nodes[1].t, &m);
    cr_assert(node_wait(&c.nodes[0], 1, 0, 5000));
    cluster_stop(&c);
}

Test(rpc_transport, destroy_drains_queue, .timeout = 30)
{
    cluster c;
    cluster_start(&c, 2, NULL, 5000, NULL);
    const size_t n = 200;
    uint8_t *d = make_data(9, 32 << 10);
    for (size_t i = 0; i < n; i++) {
        peer_msg m = msg_sample(0, 1, 9, d, 32 << 10, i % 2);
        send_ok(c.nodes[0].t, &m);
    }
    peer_msg done = {.kind = PEER_DONE, .from = 0, .to = 1};
    send_ok(c.nodes[0].t, &done);
    c.nodes[0].t->destroy(c.nodes[0].t);
    c.nodes[0].t = NULL;
    cr_assert(node_wait(&c.nodes[1], n + 1, 0, 5000), "got %zu of %zu",
              node_count(&c.nodes[1], 0), n + 1);
    free(d);
    cluster_stop(&c);
}

Test(rpc_transport, create_destroy_repeatedly, .timeout = 60)
{
    for (int i = 0; i < 5; i++) {
        cluster c;
        cluster_start(&c, 2, NULL, 1000, NULL);
        peer_msg m = msg_request(0, 1, (uint64_t)i);
        send_ok(c.nodes[0].t, &m);
        cr_assert(node_wait(&c.nodes[1], 1, 0, 5000));
        cluster_stop(&c);
    }
}

/* ---- throughput ----------------------------------------------------------------------------
 */

/* batch_bytes 0: the default; 1: one message per call (plain unary). */
static void measure(const char *what, size_t n, size_t sz, uint32_t prefetch, uint64_t batch)
{
    cluster c;
    cluster_config(&c, 2, NULL, 10000);
    rpc_opts o;
    rpc_opts_default(c.cfg[0], &o);
    if (batch != 0) {
        o.batch_bytes = batch;
    }
    cluster_start_one(&c, 0, &o);
    cluster_start_one(&c, 1, &o);
    c.nodes[1].check_data = 0;
    uint8_t *d = make_data(5, sz > 0 ? sz : 1);
    /* warm up the connection */
    peer_msg m = msg_request(0, 1, 0);
    send_ok(c.nodes[0].t, &m);
    cr_assert(node_wait(&c.nodes[1], 1, 0, 5000));
    const uint64_t t0 = now_ms();
    for (size_t i = 0; i < n; i++) {
        if (sz > 0) {
            m = msg_sample(0, 1, 5, d, sz, prefetch);
        } else {
            m = msg_request(0, 1, i);
        }
        int rc;
        while ((rc = c.nodes[0].t->send(c.nodes[0].t, &m)) != HDMLP_OK) {
            cr_assert_fail("send: %s", hdmlp_last_error());
        }
        /* Keep at most ~16 MiB outstanding, as the loader's own accounting would. */
        const size_t window = sz > 0 ? (16u << 20) / sz : n;
        if (i >= window) {
            cr_assert(node_wait(&c.nodes[1], i + 2 - window, 0, 30000));
        }
    }
    cr_assert(node_wait(&c.nodes[1], n + 1, 0, 60000));
    const double s = (double)(now_ms() - t0) / 1000.0;
    rpc_stats st;
    rpc_transport_stats(c.nodes[0].t, &st);
    printf("rpc throughput %-28s %6zu msgs x %7zu B: %8.0f msgs/s %7.1f MB/s (%llu calls, "
           "%.1f msgs/call)\n",
           what, n, sz, (double)n / s, (double)n * (double)sz / s / 1e6,
           (unsigned long long)st.calls_sent, (double)st.msgs_sent / (double)st.calls_sent);
    free(d);
    cluster_stop(&c);
}

Test(rpc_bench, throughput, .timeout = 240)
{
    measure("requests", 20000, 0, 0, 0);
    measure("requests, 1 per call", 5000, 0, 0, 1);
    measure("64KiB answers", 8000, 64 << 10, 0, 0);
    measure("64KiB prefetches", 8000, 64 << 10, 1, 0);
    measure("64KiB, 1 per call", 4000, 64 << 10, 0, 1);
    measure("64KiB, 256 KiB calls", 8000, 64 << 10, 0, 256 << 10);
    measure("64KiB, 4 MiB calls", 8000, 64 << 10, 0, 4 << 20);
    measure("1MiB samples", 400, 1 << 20, 0, 0);
}

/* Round trip: REQUEST 0 -> 1, rank 1's handler answers with a 64 KiB SAMPLE. */
typedef struct echo {
    node n;
    peer_transport **t;
    uint8_t *d;
} echo;

static void echo_msg(void *ctx, const peer_msg *m)
{
    echo *e = ctx;
    peer_msg a = msg_sample(1, 0, m->position, e->d, 64 << 10, 0);
    a.position = m->position;
    cr_assert_eq((*e->t)->send(*e->t, &a), HDMLP_OK);
}

Test(rpc_bench, round_trip, .timeout = 120)
{
    cluster c;
    cluster_config(&c, 2, NULL, 10000);
    cluster_start_one(&c, 0, NULL);
    echo e;
    memset(&e, 0, sizeof e);
    e.d = make_data(1, 64 << 10);
    e.t = &c.nodes[1].t;
    const peer_handler h = {&e, echo_msg, on_error};
    cr_assert_eq(rpc_transport_create(c.cfg[1], &h, &c.nodes[1].t), HDMLP_OK, "%s",
                 hdmlp_last_error());
    c.nodes[0].check_data = 0;
    const size_t n = 2000;
    uint64_t t0 = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == 1) {
            t0 = now_ms(); /* the first round trip includes connecting */
        }
        peer_msg m = msg_request(0, 1, i);
        send_ok(c.nodes[0].t, &m);
        cr_assert(node_wait(&c.nodes[0], i + 1, 0, 10000));
    }
    const double s = (double)(now_ms() - t0) / 1000.0;
    printf("rpc round trip REQUEST -> 64 KiB answer, one at a time: %.0f us mean (%zu)\n",
           s * 1e6 / (double)n, n);
    c.nodes[1].t->destroy(c.nodes[1].t);
    c.nodes[1].t = NULL;
    free(e.d);
    cluster_stop(&c);
}

/* ---- the loader over gRPC ------------------------------------------------------------------
 */

typedef struct e2e_rank {
    hdmlp_loader *ld;
    testds_seq seq;
    int rc;
    char err[256];
    hdmlp_stats st;
} e2e_rank;

static void *e2e_consume(void *arg)
{
    e2e_rank *r = arg;
    r->rc = testds_drain(r->ld, &r->seq);
    snprintf(r->err, sizeof r->err, "%s", hdmlp_last_error());
    hdmlp_loader_stats(r->ld, &r->st);
    hdmlp_loader_free(r->ld);
    r->ld = NULL;
    return NULL;
}

/* R real loaders in one process, each with its own gRPC transport on loopback; checks that
 * every sample is delivered exactly once per epoch across ranks. */
static void e2e_run(uint32_t world, uint32_t prefetch, uint64_t epochs)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("rpc-e2e", dir, sizeof dir), 0);
    const uint64_t n = 2000;
    const testds_spec spec = {n, 10, 0, 77, 200, 1200, 0, 0, 5};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    cluster c;
    cluster_config(&c, world, NULL, 5000);
    e2e_rank runs[MAX_RANKS];
    memset(runs, 0, sizeof runs);
    for (uint32_t r = 0; r < world; r++) {
        hdmlp_config *cfg = c.cfg[r];
        hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
        hdmlp_config_set_batch_size(cfg, 16);
        hdmlp_config_set_epochs(cfg, epochs);
        hdmlp_config_set_seed(cfg, 5);
        hdmlp_config_set_prefetch(cfg, prefetch);
        const int rc = hdmlp_loader_create(ds, cfg, &runs[r].ld);
        cr_assert_eq(rc, HDMLP_OK, "rank %u: %s", r, hdmlp_last_error());
    }
    pthread_t th[MAX_RANKS];
    for (uint32_t r = 0; r < world; r++) {
        pthread_create(&th[r], NULL, e2e_consume, &runs[r]);
    }
    for (uint32_t r = 0; r < world; r++) {
        pthread_join(th[r], NULL);
    }
    uint8_t *seen = calloc(n * epochs, 1);
    uint64_t total = 0, remote = 0, hits = 0, bytes = 0;
    for (uint32_t r = 0; r < world; r++) {
        cr_assert_eq(runs[r].rc, HDMLP_END, "rank %u: %s: %s", r, hdmlp_err_name(runs[r].rc),
                     runs[r].err);
        const testds_seq *q = &runs[r].seq;
        for (uint64_t i = 0; i < q->n; i++) {
            cr_assert_lt(q->idx[i], n);
            uint8_t *s = &seen[q->ep[i] * n + q->idx[i]];
            cr_assert_eq(*s, 0, "sample %llu twice", (unsigned long long)q->idx[i]);
            *s = 1;
            total++;
        }
        remote += runs[r].st.remote_requests;
        hits += runs[r].st.remote_hits;
        bytes += runs[r].st.net_bytes_in;
        testds_seq_free(&runs[r].seq);
    }
    cr_assert_eq(total, n * epochs);
    printf("rpc_loader: world %u prefetch %u: %llu samples, %llu remote requests, %llu remote "
           "hits, %llu bytes over gRPC\n",
           world, prefetch, (unsigned long long)total, (unsigned long long)remote,
           (unsigned long long)hits, (unsigned long long)bytes);
    free(seen);
    cluster_stop(&c);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

Test(rpc_loader, exactly_once_three_ranks, .timeout = 120) { e2e_run(3, 256, 2); }

Test(rpc_loader, exactly_once_two_ranks_no_prefetch, .timeout = 120) { e2e_run(2, 0, 2); }
