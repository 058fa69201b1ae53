/* hdmlp-bench: the options applied to the loader configuration (see bench_args.h). */
#include "bench_args.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int rejected(int rc, const char *name)
{
    if (rc == HDMLP_OK) {
        return 0;
    }
    const char *detail = hdmlp_last_error();
    fprintf(stderr, "hdmlp-bench: %s: %s%s%s\nTry 'hdmlp-bench --help'.\n", name,
            hdmlp_strerror(rc), detail[0] != '\0' ? ": " : "", detail);
    return BENCH_EXIT_USAGE;
}

int bench_configure(const bench_opts *o, hdmlp_config *cfg)
{
    const double op_us = o->op_us >= 0 ? o->op_us : 100.0;
    const double bandwidth = o->bandwidth > 0 ? o->bandwidth : 1e9;
    int st = 0;

    st = st ? st : rejected(hdmlp_config_set_memory(cfg, o->memory), "--memory");
    /* --memory P%: a share of the data, raised to the least that works (run() says so). */
    st = st ? st : rejected(hdmlp_config_set_memory_raise(cfg, o->memory_pct > 0), "--memory");
    st = st ? st
            : rejected(o->batch > UINT32_MAX
                           ? HDMLP_E_INVAL
                           : hdmlp_config_set_batch_size(cfg, (uint32_t)o->batch),
                       "--batch");
    st = st ? st : rejected(hdmlp_config_set_epochs(cfg, o->epochs), "--epochs");
    st = st ? st : rejected(hdmlp_config_set_start_epoch(cfg, o->start_epoch), "--start-epoch");
    st = st ? st : rejected(hdmlp_config_set_seed(cfg, o->seed), "--seed");
    st = st ? st
            : rejected(o->threads > UINT32_MAX
                           ? HDMLP_E_INVAL
                           : hdmlp_config_set_threads(cfg, (uint32_t)o->threads),
                       "--threads");
    st = st ? st : rejected(hdmlp_config_set_engine(cfg, o->engine), "--engine");
    st = st ? st : rejected(hdmlp_config_set_direct_io(cfg, o->direct), "--direct");
    st = st ? st : rejected(hdmlp_config_set_lookahead(cfg, o->lookahead), "--lookahead");
    st = st ? st : rejected(hdmlp_config_set_policy(cfg, o->policy), "--policy");
    st = st ? st : rejected(hdmlp_config_set_refill(cfg, o->refill), "--refill");
    st = st ? st : rejected(hdmlp_config_set_drop_last(cfg, o->drop_last), "--drop-last");
    st = st ? st : rejected(hdmlp_config_set_order(cfg, o->order), "--order");
    st = st ? st
            : rejected(hdmlp_config_set_pool_reads(cfg, (uint32_t)o->pool_reads),
                       "--pool-reads");
    st = st ? st
            : rejected(hdmlp_config_set_on_corrupt(cfg, o->skip_corrupt ? HDMLP_CORRUPT_SKIP
                                                                        : HDMLP_CORRUPT_FAIL),
                       "--on-corrupt");
    st = st ? st : rejected(hdmlp_config_set_calibrate(cfg, o->calibrate), "--calibrate");
    st = st ? st
            : rejected(hdmlp_config_set_cost_learning(cfg, !o->no_cost_learning),
                       "--no-cost-learning");
    if (o->op_us >= 0 || o->bandwidth > 0) {
        st = st ? st
                : rejected(hdmlp_config_set_storage_cost(cfg, op_us, bandwidth),
                           "--op-us/--bandwidth");
    }
    if (o->ram_cache_set) {
        st = st ? st : rejected(hdmlp_config_set_ram_cache(cfg, o->ram_cache), "--ram-cache");
    }
    if (o->ssd_dir != NULL) {
        st = st ? st
                : rejected(hdmlp_config_set_ssd_cache(cfg, o->ssd_dir, o->ssd_capacity),
                           "--ssd-cache/--ssd-capacity");
    }
    if (o->prefetch_set) {
        st = st ? st
                : rejected(hdmlp_config_set_prefetch(cfg, (uint32_t)o->prefetch), "--prefetch");
    }
    if (o->remote_memory_set) {
        st = st ? st
                : rejected(hdmlp_config_set_remote_memory(cfg, o->remote_memory),
                           "--remote-memory");
    }
    if (o->peer_timeout_set) {
        st = st ? st
                : rejected(hdmlp_config_set_peer_timeout(cfg, (uint32_t)o->peer_timeout),
                           "--peer-timeout");
    }
    if (o->same_host != NULL) {
        const int mode = strcmp(o->same_host, "tcp") == 0      ? HDMLP_SAME_HOST_TCP
                         : strcmp(o->same_host, "socket") == 0 ? HDMLP_SAME_HOST_SOCKET
                                                               : HDMLP_SAME_HOST_SHM;
        st = st ? st : rejected(hdmlp_config_set_same_host(cfg, mode), "--same-host");
    }
    if (o->node_board != NULL) {
        const int mode = strcmp(o->node_board, "off") == 0  ? HDMLP_NODE_BOARD_OFF
                         : strcmp(o->node_board, "on") == 0 ? HDMLP_NODE_BOARD_ON
                                                            : HDMLP_NODE_BOARD_AUTO;
        st = st ? st : rejected(hdmlp_config_set_node_board(cfg, mode), "--node-board");
    }
    if (o->tls_ca != NULL) {
        st = st ? st
                : rejected(hdmlp_config_set_tls(cfg, o->tls_ca, o->tls_cert, o->tls_key),
                           "--tls-ca/--tls-cert/--tls-key");
    }
    if (o->n_peers > 0) {
        st = st ? st : rejected(hdmlp_config_set_peers(cfg, o->peers, o->n_peers), "--peers");
        st = st ? st
                : rejected(hdmlp_config_set_rank(cfg, (uint32_t)o->rank, o->n_peers), "--rank");
        st = st ? st : rejected(hdmlp_config_set_job_token(cfg, o->token), "--token");
    } else if (o->world > 0) {
        st = st ? st
                : rejected(o->world > UINT32_MAX ? HDMLP_E_INVAL
                                                 : hdmlp_config_set_rank(cfg, (uint32_t)o->rank,
                                                                         (uint32_t)o->world),
                           "--rank/--world");
    }
    return st;
}
