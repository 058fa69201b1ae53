/*
 * Fixtures shared by the rpc/ tests (see rpc_fixture.h).
 */
#include "support/rpc_fixture.h"

#include "loader.h"
#include "rpc_codec.h"

#include <criterion/criterion.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint8_t pattern(uint64_t index, uint64_t i) { return (uint8_t)(index * 131u + i * 7u + 1u); }

uint8_t *make_data(uint64_t index, size_t n)
{
    uint8_t *d = malloc(n > 0 ? n : 1);
    cr_assert_not_null(d);
    for (size_t i = 0; i < n; i++) {
        d[i] = pattern(index, i);
    }
    return d;
}

void on_msg(void *ctx, const peer_msg *m)
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
    if (m->lent != NULL) { /* a block a ring peer lent: given back once looked at */
        m->lent->give_back(m->lent, (void *)(uintptr_t)m->data, m->size, m->from);
    }
}

void on_error(void *ctx, uint32_t rank, int code, const char *detail)
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

void node_init(node *n)
{
    memset(n, 0, sizeof *n);
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    n->recs = calloc(MAX_RECS, sizeof *n->recs);
    n->check_data = 1;
    cr_assert_not_null(n->recs);
}

void node_fini(node *n)
{
    if (n->t != NULL) {
        n->t->destroy(n->t);
        n->t = NULL;
    }
    free(n->recs);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
}

int node_wait(node *n, size_t count, int errors, uint64_t ms)
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

size_t node_count(node *n, int errors)
{
    pthread_mutex_lock(&n->mu);
    const size_t c = errors ? n->n_errs : n->n_recs;
    pthread_mutex_unlock(&n->mu);
    return c;
}

void cluster_config(cluster *c, uint32_t world, const uint64_t *tokens, uint32_t timeout)
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

void cluster_start_one(cluster *c, uint32_t r, const rpc_opts *o)
{
    const peer_handler h = {&c->nodes[r], on_msg, on_error};
    const int rc = rpc_transport_create_opts(c->cfg[r], &h, o, &c->nodes[r].t);
    cr_assert_eq(rc, HDMLP_OK, "rank %u: %s: %s", r, hdmlp_err_name(rc), hdmlp_last_error());
}

void cluster_start(cluster *c, uint32_t world, const uint64_t *tokens, uint32_t timeout,
                   const rpc_opts *o)
{
    /* A picked port is free until a transport listens on it: another process (a connection's
     * ephemeral port, as with a parallel test) may take it meanwhile. Then the cluster
     * starts again on new ports. */
    for (int attempt = 0;; attempt++) {
        cluster_config(c, world, tokens, timeout);
        int rc = HDMLP_OK;
        uint32_t r = 0;
        for (; r < world && rc == HDMLP_OK; r++) {
            const peer_handler h = {&c->nodes[r], on_msg, on_error};
            rc = rpc_transport_create_opts(c->cfg[r], &h, o, &c->nodes[r].t);
        }
        if (rc == HDMLP_OK) {
            return;
        }
        const int in_use = strstr(hdmlp_last_error(), "Address already in use") != NULL;
        cr_assert(in_use && attempt < 4, "rank %u: %s: %s", r - 1, hdmlp_err_name(rc),
                  hdmlp_last_error());
        cluster_stop(c);
    }
}

void cluster_stop(cluster *c)
{
    for (uint32_t r = 0; r < c->world; r++) {
        node_fini(&c->nodes[r]);
        hdmlp_config_free(c->cfg[r]);
    }
}

peer_msg msg_request(uint32_t from, uint32_t to, uint64_t pos)
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
    m.credit = 1000 + pos;
    return m;
}

peer_msg msg_sample(uint32_t from, uint32_t to, uint64_t index, const uint8_t *data,
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

int send_ok(peer_transport *t, const peer_msg *m)
{
    const int rc = t->send(t, m);
    cr_assert_eq(rc, HDMLP_OK, "send: %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    return rc;
}

grpc_status_code raw_call(const char *target, const char *method, const void *buf, size_t len,
                          int with_message, char *detail, size_t cap)
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

uint8_t *envelope(uint64_t token, uint32_t from, uint32_t to, const peer_msg *msgs, size_t n,
                  size_t *len)
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
