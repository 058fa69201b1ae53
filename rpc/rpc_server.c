/* Server side of the gRPC transport: one server, one completion-queue thread that
 * validates incoming Envelopes and hands their messages to on_msg (rpc_transport.h). */
#include "rpc_internal.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <limits.h>
#include <string.h>

enum srv_kind { SRV_REQUEST = 1, SRV_GENERIC = 2, SRV_RESPOND = 3 };

/* One pending request or one call being answered (the tag of its events). */
typedef struct srv_ctx {
    int kind;
    int generic; /* an unregistered method */
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_call_details details;
    grpc_byte_buffer *payload;
    grpc_byte_buffer *reply;
    grpc_slice status_details;
    int cancelled;
} srv_ctx;

static void ctx_free(srv_ctx *c)
{
    if (c->call != NULL) {
        grpc_call_unref(c->call);
    }
    grpc_metadata_array_destroy(&c->md);
    if (c->generic) {
        grpc_call_details_destroy(&c->details);
    }
    if (c->payload != NULL) {
        grpc_byte_buffer_destroy(c->payload);
    }
    if (c->reply != NULL) {
        grpc_byte_buffer_destroy(c->reply);
    }
    grpc_slice_unref(c->status_details);
    hd_free(c);
}

static int arm(rpc_tr *t, int generic)
{
    srv_ctx *c = hd_calloc(1, sizeof *c);
    if (c == NULL) {
        return HDMLP_E_NOMEM;
    }
    c->kind = generic ? SRV_GENERIC : SRV_REQUEST;
    c->generic = generic;
    c->status_details = grpc_empty_slice();
    grpc_metadata_array_init(&c->md);
    grpc_call_error e;
    if (generic) {
        grpc_call_details_init(&c->details);
        e = grpc_server_request_call(t->srv, &c->call, &c->details, &c->md, t->scq, t->scq, c);
    } else {
        e = grpc_server_request_registered_call(t->srv, t->srv_method, &c->call, &c->deadline,
                                                &c->md, &c->payload, t->scq, t->scq, c);
    }
    if (e != GRPC_CALL_OK) {
        ctx_free(c);
        return HDMLP_E_STATE;
    }
    t->srv_outstanding++;
    return HDMLP_OK;
}

/* Answers call c with status (and an empty message when OK). */
static void respond(rpc_tr *t, srv_ctx *c, grpc_status_code status, const char *detail)
{
    grpc_op ops[4];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (status == GRPC_STATUS_OK) {
        c->reply = grpc_raw_byte_buffer_create(NULL, 0);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->reply;
    }
    grpc_slice_unref(c->status_details);
    c->status_details = grpc_slice_from_copied_string(detail);
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = status;
    ops[n++].data.send_status_from_server.status_details = &c->status_details;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    c->kind = SRV_RESPOND;
    if (grpc_call_start_batch(c->call, ops, n, c, NULL) == GRPC_CALL_OK) {
        t->srv_outstanding++;
    } else {
        ctx_free(c);
    }
}

static grpc_status_code status_of(int rc)
{
    switch (rc) {
    case HDMLP_E_PEER:
        return GRPC_STATUS_PERMISSION_DENIED;
    case HDMLP_E_RANGE:
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case HDMLP_E_NOMEM:
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    default:
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
}

static void on_deliver(rpc_tr *t, srv_ctx *c)
{
    if (c->payload == NULL) {
        pthread_mutex_lock(&t->lock);
        t->st.rejected++;
        pthread_mutex_unlock(&t->lock);
        respond(t, c, GRPC_STATUS_INVALID_ARGUMENT, "hdmlp: Deliver without an Envelope");
        return;
    }
    grpc_byte_buffer_reader rd;
    grpc_slice all = grpc_empty_slice();
    if (grpc_byte_buffer_reader_init(&rd, c->payload)) {
        all = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
    }
    rpc_envelope env;
    const size_t len = GRPC_SLICE_LENGTH(all);
    const int rc = rpc_decode(&t->chk, GRPC_SLICE_START_PTR(all), len, &env);
    if (rc != HDMLP_OK) {
        grpc_slice_unref(all);
        pthread_mutex_lock(&t->lock);
        t->st.rejected++;
        pthread_mutex_unlock(&t->lock);
        respond(t, c, status_of(rc), hdmlp_last_error());
        return;
    }
    /* Answer first: the sender may start its next call while we deliver this one; the
     * single server thread keeps the order. */
    respond(t, c, GRPC_STATUS_OK, "");
    pthread_mutex_lock(&t->lock);
    t->st.msgs_recv += env.n;
    t->st.bytes_recv += len;
    pthread_mutex_unlock(&t->lock);
    pthread_mutex_lock(&t->deliver); /* the ring thread delivers too (rpc_shm.c) */
    for (size_t i = 0; i < env.n; i++) {
        t->h.on_msg(t->h.ctx, &env.msgs[i]);
    }
    pthread_mutex_unlock(&t->deliver);
    rpc_envelope_free(&env);
    grpc_slice_unref(all);
}

static void count_rejected(rpc_tr *t)
{
    pthread_mutex_lock(&t->lock);
    t->st.rejected++;
    pthread_mutex_unlock(&t->lock);
}

/* Handles server events until the queue is shut down: the server thread's body, or run
 * by rpc_server_stop itself when the thread never started. */
static void server_loop(rpc_tr *t)
{
    for (;;) {
        const grpc_event ev =
            grpc_completion_queue_next(t->scq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            break;
        }
        if (ev.type != GRPC_OP_COMPLETE) {
            continue;
        }
        if (ev.tag == &t->shutdown_tag) {
            t->srv_shutdown_seen = 1;
        } else {
            srv_ctx *c = ev.tag;
            t->srv_outstanding--;
            if (c->kind == SRV_RESPOND || !ev.success) {
                ctx_free(c); /* answered, or a request failed by the server's shutdown */
            } else {
                pthread_mutex_lock(&t->lock);
                const int stopping = t->srv_stopping;
                pthread_mutex_unlock(&t->lock);
                if (!stopping) {
                    arm(t, c->generic);
                }
                if (c->generic) {
                    count_rejected(t);
                    respond(t, c, GRPC_STATUS_UNIMPLEMENTED, "hdmlp: unknown method");
                } else if (stopping) {
                    respond(t, c, GRPC_STATUS_UNAVAILABLE, "hdmlp: peer shutting down");
                } else {
                    on_deliver(t, c);
                }
            }
        }
        if (t->srv_shutdown_seen && t->srv_outstanding == 0 && !t->srv_cq_shut) {
            t->srv_cq_shut = 1;
            grpc_completion_queue_shutdown(t->scq);
        }
    }
}

static void *server_main(void *arg)
{
    server_loop(arg);
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

int rpc_server_start(rpc_tr *t)
{
    const uint64_t env_max = RPC_ENVELOPE_MAX(t->o.max_data);
    grpc_arg args[] = {
        /* Another process (or transport) on our port must make the bind fail, not share
         * the port. */
        int_arg(GRPC_ARG_ALLOW_REUSEPORT, 0),
        int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                env_max > INT_MAX ? INT_MAX : (int)env_max),
    };
    const grpc_channel_args sargs = {sizeof args / sizeof args[0], args};
    const int rc0 = rpc_bind_check(t->listen);
    if (rc0 != HDMLP_OK) {
        return rc0;
    }
    t->scq = grpc_completion_queue_create_for_next(NULL);
    t->srv = t->scq != NULL ? grpc_server_create(&sargs, NULL) : NULL;
    if (t->srv == NULL) {
        return hd_err(HDMLP_E_NOMEM, "rpc: cannot create the server");
    }
    grpc_server_register_completion_queue(t->srv, t->scq, NULL);
    t->srv_method = grpc_server_register_method(t->srv, RPC_METHOD, NULL,
                                                GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    grpc_server_credentials *creds = rpc_tls_server_creds(&t->tls);
    if (creds == NULL) {
        return hd_err(HDMLP_E_INVAL, "rpc: gRPC refused the TLS server credentials (%s, %s)",
                      t->cfg.tls_cert, t->cfg.tls_key);
    }
    t->port = grpc_server_add_http2_port(t->srv, t->listen, creds);
    grpc_server_credentials_release(creds);
    if (t->port == 0 && t->tls.ca != NULL) {
        /* rpc_bind_check passed, so it is most likely the certificate or key. */
        return hd_err(HDMLP_E_INVAL,
                      "rpc: cannot listen on %s with TLS: gRPC refused the certificate "
                      "\"%s\" with the key \"%s\" (a key of another certificate, or an "
                      "unusable PEM?)",
                      t->listen, t->cfg.tls_cert, t->cfg.tls_key);
    }
    if (t->port == 0) {
        return hd_err(HDMLP_E_IO, "rpc: cannot listen on %s (gRPC could not bind it)",
                      t->listen);
    }
    if (t->tls.ca == NULL) {
        /* The same-host socket (rpc_transport.h, "Paths"): named by our peers entry, which
         * is what the other ranks know us by. */
        char *const addr = t->same_host_listen;
        int rc1 =
            rpc_same_host_address(t->cfg.peers[t->self], addr, sizeof t->same_host_listen);
        if (rc1 == HDMLP_OK) {
            rc1 = rpc_same_host_bind_check(addr);
        }
        if (rc1 == HDMLP_OK) {
            grpc_server_credentials *ins = grpc_insecure_server_credentials_create();
            const int p = grpc_server_add_http2_port(t->srv, addr, ins);
            grpc_server_credentials_release(ins);
            if (p == 0) {
                rc1 = hd_err(HDMLP_E_IO,
                             "rpc: cannot listen on the same-host socket %s (gRPC could not "
                             "bind it)",
                             addr);
            }
        }
        if (rc1 != HDMLP_OK) {
            addr[0] = '\0';
            return rc1;
        }
    }
    grpc_server_start(t->srv);
    /* Enough pending requests for every peer to have a call waiting. */
    const uint32_t n_req = t->world < 2 ? 2 : t->world > 16 ? 16 : t->world;
    int rc = HDMLP_OK;
    for (uint32_t i = 0; i < n_req && rc == HDMLP_OK; i++) {
        rc = arm(t, 0);
    }
    if (rc == HDMLP_OK) {
        rc = arm(t, 1);
    }
    if (rc != HDMLP_OK || pthread_create(&t->sthread, NULL, server_main, t) != 0) {
        return hd_err(HDMLP_E_NOMEM, "rpc: cannot start the server thread");
    }
    t->sthread_started = 1;
    return HDMLP_OK;
}

void rpc_server_stop(rpc_tr *t)
{
    if (t->srv != NULL) {
        pthread_mutex_lock(&t->lock);
        t->srv_stopping = 1;
        pthread_mutex_unlock(&t->lock);
        grpc_server_shutdown_and_notify(t->srv, t->scq, &t->shutdown_tag);
        grpc_server_cancel_all_calls(t->srv);
        if (t->sthread_started) {
            pthread_join(t->sthread, NULL);
            t->sthread_started = 0;
        } else {
            server_loop(t);
        }
        grpc_server_destroy(t->srv);
        t->srv = NULL;
    } else if (t->scq != NULL) {
        grpc_completion_queue_shutdown(t->scq);
        while (grpc_completion_queue_next(t->scq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
                   .type != GRPC_QUEUE_SHUTDOWN) {
        }
    }
    if (t->scq != NULL) {
        grpc_completion_queue_destroy(t->scq);
        t->scq = NULL;
    }
}
