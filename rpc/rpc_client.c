/* Client side of the gRPC transport: one channel and one lane per peer, one completion-
 * queue thread that chains calls, sends probes and reports failed peers (rpc_transport.h). */
#include "rpc_internal.h"

#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *status_name(grpc_status_code s)
{
    static const char *const names[] = {"OK",
                                        "CANCELLED",
                                        "UNKNOWN",
                                        "INVALID_ARGUMENT",
                                        "DEADLINE_EXCEEDED",
                                        "NOT_FOUND",
                                        "ALREADY_EXISTS",
                                        "PERMISSION_DENIED",
                                        "RESOURCE_EXHAUSTED",
                                        "FAILED_PRECONDITION",
                                        "ABORTED",
                                        "OUT_OF_RANGE",
                                        "UNIMPLEMENTED",
                                        "INTERNAL",
                                        "UNAVAILABLE",
                                        "DATA_LOSS",
                                        "UNAUTHENTICATED"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "UNKNOWN";
}

void rpc_fifo_free(rpc_fifo *q)
{
    rpc_item *it = q->head;
    while (it != NULL) {
        rpc_item *next = it->next;
        hd_free(it->buf);
        hd_free(it);
        it = next;
    }
    q->head = q->tail = NULL;
}

void rpc_lane_fail(rpc_tr *t, rpc_lane *l, const char *fmt, ...)
{
    if (l->failed) {
        return;
    }
    l->failed = 1;
    l->reported = t->closing; /* no on_error once destroy() began */
    int n = snprintf(l->why, sizeof l->why, "rank %u (%s%s): ", l->rank, l->target,
                     l->same_host ? " via the same-host socket" : "");
    if (n < 0 || (size_t)n >= sizeof l->why) {
        n = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->why + n, sizeof l->why - (size_t)n, fmt, ap);
    va_end(ap);
    rpc_fifo_free(&l->urgent);
    rpc_fifo_free(&l->prefetch);
    l->queued = 0;
    pthread_cond_broadcast(&t->cv);
}

static rpc_item *fifo_pop(rpc_fifo *q)
{
    rpc_item *it = q->head;
    if (it != NULL) {
        q->head = it->next;
        if (q->head == NULL) {
            q->tail = NULL;
        }
    }
    return it;
}

/* A lane has one call in flight, so an answer queued meanwhile waits for it: the prefetches
 * a call carries are limited to what the lane delivers in this time (at least 64 KiB). */
#define PREFETCH_CALL_NS 5000000.0
#define PREFETCH_CALL_MIN (64u << 10)

static size_t prefetch_budget(const rpc_tr *t, const rpc_lane *l)
{
    if (l->bytes_per_s <= 0) {
        return t->o.batch_bytes;
    }
    const double b = l->bytes_per_s * PREFETCH_CALL_NS / 1e9;
    return b < PREFETCH_CALL_MIN          ? PREFETCH_CALL_MIN
           : b > (double)t->o.batch_bytes ? t->o.batch_bytes
                                          : (size_t)b;
}

rpc_start rpc_lane_take(rpc_tr *t, rpc_lane *l, int probe)
{
    rpc_start s = {NULL, NULL, NULL};
    rpc_call *c = hd_calloc(1, sizeof *c);
    /* Count the messages of this call: urgent first, then prefetches, up to batch_bytes in
     * all and the prefetch budget for prefetches. */
    size_t n = 0, bytes = 0;
    if (!probe) {
        const size_t pre_cap = prefetch_budget(t, l);
        size_t pre = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (const rpc_item *it = pass == 0 ? l->urgent.head : l->prefetch.head;
                 it != NULL && n < RPC_MAX_MSGS; it = it->next) {
                if (n > 0 && (bytes + it->len > t->o.batch_bytes ||
                              (pass == 1 && pre + it->len > pre_cap))) {
                    pass = 2;
                    break;
                }
                n++;
                bytes += it->len;
                pre += pass == 1 ? it->len : 0;
            }
        }
    }
    grpc_slice *slices = hd_malloc((n + 1) * sizeof *slices);
    if (c == NULL || slices == NULL) {
        hd_free(c);
        hd_free(slices);
        rpc_lane_fail(t, l, "out of memory for a call");
        return s;
    }
    uint8_t hdr[RPC_HEADER_MAX];
    const size_t hlen = rpc_encode_header(t->cfg.token, t->self, l->rank, hdr);
    slices[0] = grpc_slice_from_copied_buffer((const char *)hdr, hlen);
    for (size_t i = 0; i < n; i++) {
        rpc_item *it = l->urgent.head != NULL ? fifo_pop(&l->urgent) : fifo_pop(&l->prefetch);
        slices[i + 1] = grpc_slice_new(it->buf, it->len, hd_free);
        hd_free(it);
    }
    l->queued -= bytes;
    c->req = grpc_raw_byte_buffer_create(slices, n + 1);
    for (size_t i = 0; i <= n; i++) {
        grpc_slice_unref(slices[i]);
    }
    hd_free(slices);
    c->lane = l;
    c->n_msgs = n;
    c->bytes = hlen + bytes;
    c->probe = probe;
    c->start_ns = rpc_now_ns();
    grpc_metadata_array_init(&c->init_md);
    grpc_metadata_array_init(&c->trailing_md);
    c->details = grpc_empty_slice();
    c->call = grpc_channel_create_registered_call(
        l->ch, NULL, GRPC_PROPAGATE_DEFAULTS, t->ccq, l->method,
        rpc_deadline_ms(t->cfg.peer_timeout_ms), NULL);
    l->call = c;
    t->in_flight++;
    s.c = c;
    s.call = c->call;
    s.req = c->req;
    return s;
}

static void call_free(rpc_call *c)
{
    if (c->call != NULL) {
        grpc_call_unref(c->call);
    }
    grpc_byte_buffer_destroy(c->req);
    if (c->resp != NULL) {
        grpc_byte_buffer_destroy(c->resp);
    }
    grpc_metadata_array_destroy(&c->init_md);
    grpc_metadata_array_destroy(&c->trailing_md);
    grpc_slice_unref(c->details);
    if (c->error_string != NULL) {
        gpr_free((void *)c->error_string);
    }
    hd_free(c);
}

static void deliver_reports(rpc_tr *t);
static void call_done(rpc_tr *t, rpc_call *c);

void rpc_call_start(rpc_tr *t, rpc_start s)
{
    rpc_call *c = s.c; /* only its field addresses are used until the batch fails */
    if (c == NULL) {
        return;
    }
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY |
                   GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s.req;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &c->resp;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &c->trailing_md;
    ops[5].data.recv_status_on_client.status = &c->status;
    ops[5].data.recv_status_on_client.status_details = &c->details;
    ops[5].data.recv_status_on_client.error_string = &c->error_string;
    const grpc_call_error e = grpc_call_start_batch(s.call, ops, 6, c, NULL);
    if (e != GRPC_CALL_OK) {
        /* Not expected with these ops; complete the call here as failed. */
        c->status = GRPC_STATUS_INTERNAL;
        grpc_slice_unref(c->details);
        c->details = grpc_slice_from_copied_string("grpc_call_start_batch refused the call");
        call_done(t, c);
        deliver_reports(t);
    }
}

static uint64_t lane_ms_since(const rpc_lane *l, uint64_t now)
{
    return l->last_ok_ns != 0 && now > l->last_ok_ns ? (now - l->last_ok_ns) / 1000000u : 0;
}

/* Handles a finished call (status known), chains the lane's next call. */
static void call_done(rpc_tr *t, rpc_call *c)
{
    rpc_start next = {NULL, NULL, NULL};
    pthread_mutex_lock(&t->lock);
    rpc_lane *l = c->lane;
    l->call = NULL;
    t->in_flight--;
    if (c->status == GRPC_STATUS_OK) {
        l->last_ok_ns = rpc_now_ns();
        /* Calls of a few messages measure round trips, not the link: only larger ones
         * update the lane's rate. */
        if (!c->probe && c->bytes >= PREFETCH_CALL_MIN && l->last_ok_ns > c->start_ns) {
            const double r = (double)c->bytes * 1e9 / (double)(l->last_ok_ns - c->start_ns);
            l->bytes_per_s = l->bytes_per_s > 0 ? 0.7 * l->bytes_per_s + 0.3 * r : r;
        }
        t->st.calls_sent++;
        t->st.probes_sent += c->probe != 0;
        t->st.msgs_sent += c->n_msgs;
        t->st.bytes_sent += c->bytes;
    } else if (!l->failed) {
        char det[160];
        const size_t dl = GRPC_SLICE_LENGTH(c->details);
        snprintf(det, sizeof det, "%.*s", (int)(dl < sizeof det ? dl : sizeof det - 1),
                 (const char *)GRPC_SLICE_START_PTR(c->details));
        const uint64_t now = rpc_now_ns();
        if (c->status == GRPC_STATUS_DEADLINE_EXCEEDED) {
            const grpc_connectivity_state cs = grpc_channel_check_connectivity_state(l->ch, 0);
            char last[48] = "never reached";
            if (l->last_ok_ns != 0) {
                snprintf(last, sizeof last, "last answer %llu ms ago",
                         (unsigned long long)lane_ms_since(l, now));
            }
            rpc_lane_fail(t, l, "no answer within %u ms (%s; %s)", t->cfg.peer_timeout_ms,
                          cs == GRPC_CHANNEL_READY ? "connected, peer not responding"
                          : t->tls.ca != NULL
                              ? "cannot connect or TLS handshake failed: check that it "
                                "uses TLS, with a certificate of our CA naming its host"
                              : "cannot connect",
                          last);
        } else {
            rpc_lane_fail(t, l, "%s call failed: %s%s%s", c->probe ? "probe" : "delivery",
                          status_name(c->status), det[0] ? ": " : "", det);
        }
    }
    if (!l->failed && !t->stopping && (l->urgent.head != NULL || l->prefetch.head != NULL)) {
        next = rpc_lane_take(t, l, 0);
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->lock);
    call_free(c);
    rpc_call_start(t, next);
}

/* Calls on_error for failed lanes not yet reported (never with the lock held). */
static void deliver_reports(rpc_tr *t)
{
    for (;;) {
        char why[sizeof t->lanes[0].why];
        uint32_t rank = UINT32_MAX;
        pthread_mutex_lock(&t->lock);
        for (uint32_t r = 0; r < t->world; r++) {
            rpc_lane *l = &t->lanes[r];
            if (r != t->self && l->failed && !l->reported) {
                l->reported = 1;
                if (!t->closing) {
                    rank = r;
                    memcpy(why, l->why, sizeof why);
                    break;
                }
            }
        }
        pthread_mutex_unlock(&t->lock);
        if (rank == UINT32_MAX) {
            return;
        }
        if (t->h.on_error != NULL) {
            t->h.on_error(t->h.ctx, rank, HDMLP_E_PEER, why);
        }
    }
}

/* Starts probes on idle lanes that are due; returns ms until the next one is due. */
static uint64_t run_probes(rpc_tr *t)
{
    rpc_start starts[64];
    size_t n_start = 0;
    const uint64_t interval_ms = t->probe_ns / 1000000u;
    uint64_t wait_ms = interval_ms;
    pthread_mutex_lock(&t->lock);
    const uint64_t now = rpc_now_ns();
    for (uint32_t r = 0; r < t->world && !t->closing; r++) {
        rpc_lane *l = &t->lanes[r];
        if (r == t->self || l->shm || l->failed || l->call != NULL) {
            continue;
        }
        const uint64_t idle = l->last_ok_ns == 0 ? t->probe_ns : now - l->last_ok_ns;
        if (idle >= t->probe_ns) {
            if (n_start == sizeof starts / sizeof starts[0]) {
                wait_ms = 0; /* more are due: come back at once */
                break;
            }
            starts[n_start] = rpc_lane_take(t, l, 1);
            n_start += starts[n_start].c != NULL;
        } else {
            const uint64_t left = (t->probe_ns - idle) / 1000000u + 1;
            wait_ms = left < wait_ms ? left : wait_ms;
        }
    }
    pthread_mutex_unlock(&t->lock);
    for (size_t i = 0; i < n_start; i++) {
        rpc_call_start(t, starts[i]);
    }
    return wait_ms;
}

static void *client_main(void *arg)
{
    rpc_tr *t = arg;
    uint64_t wait_ms = 0;
    for (;;) {
        deliver_reports(t);
        const grpc_event ev =
            grpc_completion_queue_next(t->ccq, rpc_deadline_ms(wait_ms), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            break;
        }
        if (ev.type == GRPC_OP_COMPLETE) {
            call_done(t, ev.tag);
        }
        wait_ms = run_probes(t);
    }
    return NULL;
}

static grpc_arg int_arg(const char *key, int value)
{
    grpc_arg a;
    a.type = GRPC_ARG_INTEGER;
    a.key = (char *)key;
    a.value.integer = value;
    return a;
}

int rpc_client_start(rpc_tr *t)
{
    const uint64_t env_max = RPC_ENVELOPE_MAX(t->o.max_data);
    int backoff_max = (int)(t->cfg.peer_timeout_ms / 4);
    backoff_max = backoff_max < 100 ? 100 : backoff_max > 1000 ? 1000 : backoff_max;
    grpc_arg args[] = {
        int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, env_max > INT_MAX ? INT_MAX : (int)env_max),
        /* Channels of different transports in one process never share connections. */
        int_arg(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1),
        /* Peers start at slightly different times: retry connecting quickly. */
        int_arg(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100),
        int_arg(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000),
        int_arg(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, backoff_max),
    };
    const grpc_channel_args cargs = {sizeof args / sizeof args[0], args};
    t->ccq = grpc_completion_queue_create_for_next(NULL);
    if (t->ccq == NULL) {
        return hd_err(HDMLP_E_NOMEM, "rpc: cannot create a completion queue");
    }
    grpc_channel_credentials *creds = rpc_tls_channel_creds(&t->tls);
    if (creds == NULL) {
        return hd_err(HDMLP_E_INVAL, "rpc: gRPC refused the TLS client credentials (%s, %s)",
                      t->cfg.tls_cert, t->cfg.tls_key);
    }
    for (uint32_t r = 0; r < t->world; r++) {
        rpc_lane *l = &t->lanes[r];
        l->rank = r;
        l->target = t->cfg.peers[r];
        if (r == t->self) {
            continue;
        }
        /* rpc_transport.h, "Paths": no fallback to TCP, so nothing can arrive twice. */
        char dial[RPC_SAME_HOST_ADDR_MAX];
        const int local = t->cfg.same_host != HDMLP_SAME_HOST_TCP && t->tls.ca == NULL &&
                          rpc_endpoint_is_local(l->target) &&
                          rpc_same_host_address(l->target, dial, sizeof dial) == HDMLP_OK;
        t->base.peers_same_host += local != 0;
        if (local && t->cfg.same_host == HDMLP_SAME_HOST_SHM) {
            l->shm = 1; /* rpc_shm.c dials its ring socket */
            continue;
        }
        l->same_host = local;
        l->ch = grpc_channel_create(l->same_host ? dial : l->target, creds, &cargs);
        l->method =
            l->ch != NULL ? grpc_channel_register_call(l->ch, RPC_METHOD, NULL, NULL) : NULL;
        if (l->method == NULL) {
            grpc_channel_credentials_release(creds);
            return hd_err(HDMLP_E_INVAL, "rpc: cannot create a channel to rank %u (%s)", r,
                          l->target);
        }
    }
    grpc_channel_credentials_release(creds);
    if (pthread_create(&t->cthread, NULL, client_main, t) != 0) {
        return hd_err(HDMLP_E_NOMEM, "rpc: cannot start the client thread");
    }
    t->cthread_started = 1;
    return HDMLP_OK;
}

void rpc_client_stop(rpc_tr *t)
{
    pthread_mutex_lock(&t->lock);
    t->stopping = 1;
    for (uint32_t r = 0; r < t->world; r++) {
        rpc_lane *l = &t->lanes[r];
        if (l->call != NULL) {
            grpc_call_cancel(l->call->call, NULL);
        }
        rpc_fifo_free(&l->urgent);
        rpc_fifo_free(&l->prefetch);
        l->queued = 0;
    }
    while (t->in_flight > 0) {
        pthread_cond_wait(&t->cv, &t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    if (t->ccq != NULL) {
        grpc_completion_queue_shutdown(t->ccq);
        if (t->cthread_started) {
            pthread_join(t->cthread, NULL);
            t->cthread_started = 0;
        } else {
            while (grpc_completion_queue_next(t->ccq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
                       .type != GRPC_QUEUE_SHUTDOWN) {
            }
        }
    }
    for (uint32_t r = 0; t->lanes != NULL && r < t->world; r++) {
        if (t->lanes[r].ch != NULL) {
            grpc_channel_destroy(t->lanes[r].ch);
            t->lanes[r].ch = NULL;
        }
    }
    if (t->ccq != NULL) {
        grpc_completion_queue_destroy(t->ccq);
        t->ccq = NULL;
    }
}
