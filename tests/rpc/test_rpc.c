/*
 * rpc/ tests: the gRPC transport on loopback, configuration checks, messages of every kind
 * between three ranks, order per pair, answers ahead of queued prefetches. The rest of the
 * test_rpc binary: the codec (test_rpc_codec.c), failures (test_rpc_failures.c: wrong
 * token, malformed and oversized calls, a destroyed or absent peer, a full send queue, bind
 * failure, draining on destroy), a throughput figure (test_rpc_bench.c), and real loaders
 * exchanging samples over gRPC (test_rpc_loader.c); fixtures in support/rpc_fixture.h.
 * Ports come from rpc_pick_endpoint("127.0.0.1") (a free port below the ephemeral range).
 */
#include "hdmlp.h"
#include "rpc_transport.h"
#include "support/rpc_fixture.h"

#include <criterion/criterion.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- transport --------------------------------------------------------------------------- */

/* Picked ports lie below the kernel's ephemeral range (which outgoing connections draw
 * from, so none takes a picked port before its server listens), differ, and are free. */
Test(rpc_port, picked_ports_are_free_and_below_the_ephemeral_range)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    cr_assert_not_null(f);
    int lo = 0, hi = 0;
    cr_assert_eq(fscanf(f, "%d %d", &lo, &hi), 2);
    fclose(f);
    int seen[20];
    for (int i = 0; i < 20; i++) {
        char ep[64];
        cr_assert_eq(rpc_pick_endpoint("127.0.0.1", ep, sizeof ep), HDMLP_OK, "%s",
                     hdmlp_last_error());
        cr_assert_eq(strncmp(ep, "127.0.0.1:", 10), 0, "%s", ep);
        seen[i] = atoi(ep + 10);
        cr_assert(seen[i] >= 10000 && seen[i] < lo, "port %d, ephemeral range from %d", seen[i],
                  lo);
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)seen[i]);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "port %d is free", seen[i]);
        close(fd);
    }
    int distinct = 0;
    for (int i = 0; i < 20; i++) {
        int dup = 0;
        for (int j = 0; j < i; j++) {
            dup |= seen[j] == seen[i];
        }
        distinct += !dup;
    }
    cr_assert_geq(distinct, 18, "picks spread over the range");
}

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
                    cr_assert_eq(x->m.credit, 1000 + 10 * from + r);
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

/* ---- lending over the rings ----------------------------------------------------------------
 */

/* Rank 0 sends n SAMPLEs from its arena (m.lend), of sizes up to 600 KiB (above a ring
 * fragment), half as prefetches, to rank 1, whose arena is arena1 bytes (0: none). */
static void lend_run(size_t n, uint64_t arena1, int want_lent)
{
    cluster c;
    cluster_config(&c, 2, NULL, 5000);
    rpc_opts o;
    for (uint32_t r = 0; r < 2; r++) {
        cr_assert_eq(hdmlp_config_set_same_host(c.cfg[r], HDMLP_SAME_HOST_SHM), HDMLP_OK);
        rpc_opts_default(c.cfg[r], &o);
        o.shm_arena_bytes = r == 1 ? arena1 : (uint64_t)64 << 20;
        cluster_start_one(&c, r, &o);
    }
    peer_transport *t0 = c.nodes[0].t;
    cr_assert_not_null(t0->mem, "a transport with ring peers has an arena");
    c.nodes[1].check_data = 1;
    for (size_t i = 0; i < n; i++) {
        const uint64_t size = i % 50 == 7 ? 600 << 10 : 100 + (i * 977) % 40000;
        uint8_t *p = t0->mem->alloc(t0->mem, size);
        cr_assert_not_null(p, "sample %zu: arena full", i);
        for (uint64_t j = 0; j < size; j++) {
            p[j] = pattern(i, j);
        }
        peer_msg m = msg_sample(0, 1, i, p, size, (uint32_t)(i % 2));
        m.lend = 1;
        send_ok(t0, &m);
    }
    cr_assert(node_wait(&c.nodes[1], n, 0, 20000), "%zu of %zu delivered",
              node_count(&c.nodes[1], 0), n);
    for (size_t i = 0; i < n; i++) {
        const rec *r = &c.nodes[1].recs[i];
        cr_assert(r->data_ok, "sample %zu: bytes", i);
        cr_assert_eq(r->m.lent != NULL, want_lent, "sample %zu lent", i);
    }
    /* Every block comes back to rank 0's arena: released by rank 1, or copied and freed. */
    rpc_stats st;
    const uint64_t until = now_ms() + 10000;
    do {
        usleep(10000);
        rpc_transport_stats(t0, &st);
    } while (st.arena_used > 0 && now_ms() < until);
    cr_assert_eq(st.arena_used, 0, "%llu bytes of rank 0's arena not back",
                 (unsigned long long)st.arena_used);
    cr_assert_eq(st.shm_lent, want_lent ? n : 0);
    cr_assert_eq(st.shm_released, want_lent ? n : 0);
    cluster_stop(&c);
}

Test(rpc_lend, lent_samples_arrive_in_place_and_come_back, .timeout = 60)
{
    lend_run(1000, (uint64_t)64 << 20, 1);
}

Test(rpc_lend, a_peer_without_an_arena_gets_copies, .timeout = 60) { lend_run(300, 0, 0); }
