/*
 * rpc/ tests, failures of the gRPC transport: a wrong token, malformed and oversized
 * calls, a destroyed, absent or late peer, a full send queue, an endpoint in use, draining
 * on destroy, and repeated create/destroy. Part of the test_rpc binary (fixtures:
 * support/rpc_fixture.h).
 */
#include "hdmlp.h"
#include "rpc_codec.h"
#include "rpc_transport.h"
#include "support/rpc_fixture.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
