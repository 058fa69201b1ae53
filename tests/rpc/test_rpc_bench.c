/*
 * rpc/ tests, figures: the transport's throughput and round-trip time on loopback, printed
 * for the log. Part of the test_rpc binary (fixtures: support/rpc_fixture.h).
 */
#include "hdmlp.h"
#include "rpc_transport.h"
#include "support/rpc_fixture.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
