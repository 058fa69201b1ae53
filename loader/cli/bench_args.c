/* hdmlp-bench: command line parsing (see bench_args.h); the --help text is in
 * bench_usage.c, the configuration of the loader in bench_config.c. */
#include "bench_args.h"

#include "bench_launch.h"
#include "bench_parse.h"
#include "loader_units.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static int usage_error(const char *fmt, const char *arg)
{
    fputs("hdmlp-bench: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'hdmlp-bench --help'.\n", stderr);
    return BENCH_EXIT_USAGE;
}

static int pick(const char *arg, const char *const *names, size_t n, int *out)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(arg, names[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    }
    return -1;
}

/* Splits --peers into o->peers (in place, in a copy). Returns 0, or -1 if malformed. */
static int split_peers(const char *arg, bench_opts *o)
{
    size_t n = 1;
    for (const char *p = arg; *p != '\0'; p++) {
        n += *p == ',';
    }
    if (n > UINT32_MAX) {
        return -1;
    }
    bench_args_free(o);
    o->peers_buf = strdup(arg);
    o->peers = calloc(n, sizeof(*o->peers));
    o->n_peers = 0;
    if (o->peers_buf == NULL || o->peers == NULL) {
        return -1;
    }
    char *tok = o->peers_buf;
    for (size_t i = 0; i < n; i++) {
        char *comma = strchr(tok, ',');
        if (comma != NULL) {
            *comma = '\0';
        }
        if (tok[0] == '\0' || strrchr(tok, ':') == NULL) {
            return -1;
        }
        o->peers[o->n_peers++] = tok;
        tok = comma != NULL ? comma + 1 : tok;
    }
    return 0;
}

void bench_args_free(bench_opts *o)
{
    free(o->peers_buf);
    free((void *)o->peers);
    o->peers_buf = NULL;
    o->peers = NULL;
    o->n_peers = 0;
}

enum {
    OPT_MEMORY = 256,
    OPT_BATCH,
    OPT_EPOCHS,
    OPT_START_EPOCH,
    OPT_SEED,
    OPT_THREADS,
    OPT_ENGINE,
    OPT_POLICY,
    OPT_REFILL,
    OPT_RELAXED,
    OPT_ORDER,
    OPT_POOL_READS,
    OPT_ON_CORRUPT,
    OPT_STATE,
    OPT_RESUME_AFTER,
    OPT_DIRECT,
    OPT_BUFFERED,
    OPT_NO_COST_LEARNING,
    OPT_LOOKAHEAD,
    OPT_OP_US,
    OPT_BANDWIDTH,
    OPT_CALIBRATE,
    OPT_RAM_CACHE,
    OPT_SSD_CACHE,
    OPT_SSD_CAPACITY,
    OPT_COMPUTE_MS,
    OPT_DROP_LAST,
    OPT_PLAN,
    OPT_IDS,
    OPT_NO_RANDOMNESS,
    OPT_JSON,
    OPT_QUIET,
    OPT_MPI,
    OPT_STANDALONE,
    OPT_BIND_HOST,
    OPT_PEERS,
    OPT_RANK,
    OPT_WORLD,
    OPT_TOKEN,
    OPT_PREFETCH,
    OPT_REMOTE_MEMORY,
    OPT_PEER_TIMEOUT,
    OPT_TLS_CA,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_SAME_HOST,
    OPT_NODE_BOARD
};

static const struct option longopts[] = {
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"start-epoch", required_argument, NULL, OPT_START_EPOCH},
    {"seed", required_argument, NULL, OPT_SEED},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"engine", required_argument, NULL, OPT_ENGINE},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"refill", required_argument, NULL, OPT_REFILL},
    {"relaxed", no_argument, NULL, OPT_RELAXED},
    {"order", required_argument, NULL, OPT_ORDER},
    {"pool-reads", required_argument, NULL, OPT_POOL_READS},
    {"on-corrupt", required_argument, NULL, OPT_ON_CORRUPT},
    {"state", required_argument, NULL, OPT_STATE},
    {"resume-after", required_argument, NULL, OPT_RESUME_AFTER},
    {"direct", no_argument, NULL, OPT_DIRECT},
    {"buffered", no_argument, NULL, OPT_BUFFERED},
    {"no-cost-learning", no_argument, NULL, OPT_NO_COST_LEARNING},
    {"lookahead", required_argument, NULL, OPT_LOOKAHEAD},
    {"op-us", required_argument, NULL, OPT_OP_US},
    {"bandwidth", required_argument, NULL, OPT_BANDWIDTH},
    {"calibrate", no_argument, NULL, OPT_CALIBRATE},
    {"ram-cache", required_argument, NULL, OPT_RAM_CACHE},
    {"ssd-cache", required_argument, NULL, OPT_SSD_CACHE},
    {"ssd-capacity", required_argument, NULL, OPT_SSD_CAPACITY},
    {"compute-ms", required_argument, NULL, OPT_COMPUTE_MS},
    {"drop-last", no_argument, NULL, OPT_DROP_LAST},
    {"plan", no_argument, NULL, OPT_PLAN},
    {"ids", required_argument, NULL, OPT_IDS},
    {"no-randomness", no_argument, NULL, OPT_NO_RANDOMNESS},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"mpi", no_argument, NULL, OPT_MPI},
    {"standalone", no_argument, NULL, OPT_STANDALONE},
    {"bind-host", required_argument, NULL, OPT_BIND_HOST},
    {"peers", required_argument, NULL, OPT_PEERS},
    {"rank", required_argument, NULL, OPT_RANK},
    {"world", required_argument, NULL, OPT_WORLD},
    {"token", required_argument, NULL, OPT_TOKEN},
    {"prefetch", required_argument, NULL, OPT_PREFETCH},
    {"remote-memory", required_argument, NULL, OPT_REMOTE_MEMORY},
    {"peer-timeout", required_argument, NULL, OPT_PEER_TIMEOUT},
    {"same-host", required_argument, NULL, OPT_SAME_HOST},
    {"node-board", required_argument, NULL, OPT_NODE_BOARD},
    {"tls-ca", required_argument, NULL, OPT_TLS_CA},
    {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
    {"tls-key", required_argument, NULL, OPT_TLS_KEY},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* A plain size (no percentage); -1 if malformed. */
static int size_arg(const char *arg, uint64_t *out)
{
    return units_parse_size(arg, 0, out, NULL, NULL, 0);
}

/* One option; returns -1 to continue, else the exit status. */
static int one_option(int c, const char *arg, char **argv, bench_opts *o)
{
    int choice = 0;

    switch (c) {
    case OPT_MEMORY:
        o->memory_arg = arg;
        /* A percentage is resolved once the dataset is open (memory_pct > 0, memory 0). */
        if (units_parse_size(arg, 0, &o->memory, &o->memory_pct, NULL, 0) != 0) {
            return usage_error("--memory: invalid size '%s'", arg);
        }
        return -1;
    case OPT_BATCH:
        return bench_parse_u64(arg, &o->batch) != 0
                   ? usage_error("--batch: invalid number '%s'", arg)
                   : -1;
    case OPT_EPOCHS:
        if (bench_parse_u64(arg, &o->epochs) != 0 || o->epochs == 0) {
            return usage_error("--epochs: expected a number >= 1, got '%s'", arg);
        }
        return -1;
    case OPT_START_EPOCH:
        return bench_parse_u64(arg, &o->start_epoch) != 0
                   ? usage_error("--start-epoch: invalid number '%s'", arg)
                   : -1;
    case OPT_SEED:
        return bench_parse_u64(arg, &o->seed) != 0
                   ? usage_error("--seed: invalid number '%s'", arg)
                   : -1;
    case OPT_THREADS:
        return bench_parse_u64(arg, &o->threads) != 0
                   ? usage_error("--threads: invalid number '%s'", arg)
                   : -1;
    case OPT_ENGINE:
        if (pick(arg, bench_engine_names, 3, &choice) != 0) {
            return usage_error("--engine: expected auto, pread or io_uring, got '%s'", arg);
        }
        o->engine = (hdmlp_engine)choice;
        return -1;
    case OPT_POLICY:
        if (pick(arg, bench_policy_names, 4, &choice) != 0) {
            return usage_error(
                "--policy: expected auto, fill-rate, random or clairvoyant, got '%s'", arg);
        }
        o->policy = (hdmlp_policy)choice;
        return -1;
    case OPT_REFILL:
        if (pick(arg, bench_refill_names, 3, &choice) != 0) {
            return usage_error("--refill: expected whole, ranges or auto, got '%s'", arg);
        }
        o->refill = (hdmlp_refill)choice;
        return -1;
    case OPT_RELAXED:
        o->order = HDMLP_ORDER_POOL; /* the pool order's former name */
        return -1;
    case OPT_ORDER:
        if (strcmp(arg, "relaxed") == 0) {
            o->order = HDMLP_ORDER_POOL;
            return -1;
        }
        if (pick(arg, bench_order_names, 2, &choice) != 0) {
            return usage_error("--order: expected strict or pool, got '%s'", arg);
        }
        o->order = (hdmlp_order)choice;
        return -1;
    case OPT_POOL_READS:
        return bench_parse_u64(arg, &o->pool_reads) != 0 || o->pool_reads > HDMLP_POOL_READS_MAX
                   ? usage_error("--pool-reads: expected 0 (auto) .. 65536, got '%s'", arg)
                   : -1;
    case OPT_ON_CORRUPT:
        if (strcmp(arg, "fail") != 0 && strcmp(arg, "skip") != 0) {
            return usage_error("--on-corrupt: expected fail or skip, got '%s'", arg);
        }
        o->skip_corrupt = strcmp(arg, "skip") == 0;
        return -1;
    case OPT_STATE:
        o->state_file = arg;
        return -1;
    case OPT_RESUME_AFTER:
        return bench_parse_u64(arg, &o->resume_after) != 0 || o->resume_after == 0
                   ? usage_error("--resume-after: invalid batch count '%s'", arg)
                   : -1;
    case OPT_DIRECT:
    case OPT_BUFFERED:
        if (o->direct != HDMLP_DIRECT_IO_AUTO) {
            return usage_error("--direct and --buffered exclude each other%s", "");
        }
        o->direct = c == OPT_DIRECT;
        return -1;
    case OPT_NO_COST_LEARNING:
        o->no_cost_learning = 1;
        return -1;
    case OPT_LOOKAHEAD:
        return bench_parse_u64(arg, &o->lookahead) != 0
                   ? usage_error("--lookahead: invalid number '%s'", arg)
                   : -1;
    case OPT_OP_US:
        return bench_parse_double(arg, &o->op_us) != 0
                   ? usage_error("--op-us: invalid number '%s'", arg)
                   : -1;
    case OPT_BANDWIDTH: {
        uint64_t bw = 0;
        if (size_arg(arg, &bw) != 0 || bw == 0) {
            return usage_error("--bandwidth: expected bytes per second > 0, got '%s'", arg);
        }
        o->bandwidth = (double)bw;
        return -1;
    }
    case OPT_CALIBRATE:
        o->calibrate = 1;
        return -1;
    case OPT_RAM_CACHE:
        o->ram_cache_set = 1;
        if (strcmp(arg, "auto") == 0) {
            o->ram_cache = HDMLP_RAM_CACHE_AUTO;
            return -1;
        }
        return size_arg(arg, &o->ram_cache) != 0
                   ? usage_error("--ram-cache: expected a size, auto or 0, got '%s'", arg)
                   : -1;
    case OPT_SSD_CACHE:
        if (arg[0] == '\0') {
            return usage_error("--ssd-cache: empty directory name%s", "");
        }
        o->ssd_dir = arg;
        return -1;
    case OPT_SSD_CAPACITY:
        o->ssd_capacity_set = 1;
        return size_arg(arg, &o->ssd_capacity) != 0
                   ? usage_error("--ssd-capacity: invalid size '%s'", arg)
                   : -1;
    case OPT_COMPUTE_MS:
        return bench_parse_double(arg, &o->compute_ms) != 0
                   ? usage_error("--compute-ms: invalid number '%s'", arg)
                   : -1;
    case OPT_DROP_LAST:
        o->drop_last = 1;
        return -1;
    case OPT_PLAN:
        o->plan = 1;
        return -1;
    case OPT_IDS:
        o->ids_path = arg;
        return -1;
    case OPT_NO_RANDOMNESS:
        o->no_randomness = 1;
        return -1;
    case OPT_JSON:
        o->json = 1;
        return -1;
    case OPT_QUIET:
        o->quiet = 1;
        return -1;
    case OPT_MPI:
        o->mpi = 1;
        return -1;
    case OPT_STANDALONE:
        o->standalone = 1;
        return -1;
    case OPT_BIND_HOST:
        o->bind_host = arg;
        return -1;
    case OPT_PEERS:
        return split_peers(arg, o) != 0
                   ? usage_error("--peers: expected host:port[,host:port...], got '%s'", arg)
                   : -1;
    case OPT_RANK:
        o->rank_set = 1;
        return bench_parse_u64(arg, &o->rank) != 0
                   ? usage_error("--rank: invalid number '%s'", arg)
                   : -1;
    case OPT_WORLD:
        if (bench_parse_u64(arg, &o->world) != 0 || o->world == 0) {
            return usage_error("--world: expected a number >= 1, got '%s'", arg);
        }
        return -1;
    case OPT_TOKEN:
        o->token_set = 1;
        return bench_parse_u64(arg, &o->token) != 0
                   ? usage_error("--token: invalid number '%s'", arg)
                   : -1;
    case OPT_PREFETCH:
        o->prefetch_set = 1;
        return bench_parse_u64(arg, &o->prefetch) != 0 || o->prefetch > UINT32_MAX
                   ? usage_error("--prefetch: invalid window '%s'", arg)
                   : -1;
    case OPT_REMOTE_MEMORY:
        o->remote_memory_set = 1;
        return size_arg(arg, &o->remote_memory) != 0
                   ? usage_error("--remote-memory: invalid size '%s'", arg)
                   : -1;
    case OPT_PEER_TIMEOUT:
        o->peer_timeout_set = 1;
        return bench_parse_u64(arg, &o->peer_timeout) != 0 || o->peer_timeout > UINT32_MAX
                   ? usage_error("--peer-timeout: invalid number of milliseconds '%s'", arg)
                   : -1;
    case OPT_SAME_HOST:
        if (strcmp(arg, "shm") != 0 && strcmp(arg, "socket") != 0 && strcmp(arg, "tcp") != 0) {
            return usage_error("--same-host: expected shm, socket or tcp, got '%s'", arg);
        }
        o->same_host = arg;
        return -1;
    case OPT_NODE_BOARD:
        if (strcmp(arg, "off") != 0 && strcmp(arg, "auto") != 0 && strcmp(arg, "on") != 0) {
            return usage_error("--node-board: expected off, auto or on, got '%s'", arg);
        }
        o->node_board = arg;
        return -1;
    case OPT_TLS_CA:
    case OPT_TLS_CERT:
    case OPT_TLS_KEY:
        if (arg[0] == '\0') {
            return usage_error("option '%s' needs a file name", argv[optind - 1]);
        }
        *(c == OPT_TLS_CA ? &o->tls_ca : c == OPT_TLS_CERT ? &o->tls_cert : &o->tls_key) = arg;
        return -1;
    case 'h':
        bench_usage(stdout);
        return 0;
    case 'V':
        printf("hdmlp-bench %s\n", hdmlp_version_string());
        return 0;
    case ':':
        return usage_error("option '%s' needs a value", argv[optind - 1]);
    default:
        return usage_error("unknown option '%s'", argv[optind - 1]);
    }
}

/* Combinations the options alone rule out. */
static int check_combinations(const bench_opts *o)
{
    if (o->mpi && o->n_peers > 0) {
        return usage_error("%s", "--mpi and --peers exclude each other");
    }
    if (o->standalone && (o->mpi || o->n_peers > 0)) {
        return usage_error("%s", "--standalone excludes --mpi and --peers");
    }
    if (o->bind_host != NULL && !o->mpi) {
        return usage_error("%s", "--bind-host needs --mpi (with --peers the list says it)");
    }
    if (o->token_set && o->n_peers == 0) {
        return usage_error("%s", "--token needs --peers (--mpi shares a random token)");
    }
    if (o->n_peers > 0 && !o->rank_set) {
        return usage_error("%s", "--peers needs --rank R");
    }
    if (o->n_peers > 0 && o->rank >= o->n_peers) {
        return usage_error("--rank: must be below the number of --peers%s", "");
    }
    if (o->world > 0 && (!o->plan || o->mpi || o->n_peers > 0)) {
        return usage_error("%s", "--world is for --plan without --mpi or --peers");
    }
    if (o->world > 0 && (!o->rank_set || o->rank >= o->world)) {
        return usage_error("%s", "--world W needs --rank R with R < W");
    }
    if (o->rank_set && o->n_peers == 0 && o->world == 0) {
        return usage_error("%s", "--rank needs --peers (or --plan --world)");
    }
    if (o->mpi && o->rank_set) {
        return usage_error("%s", "--rank comes from MPI with --mpi");
    }
    const int tls = (o->tls_ca != NULL) + (o->tls_cert != NULL) + (o->tls_key != NULL);
    if (tls != 0 && tls != 3) {
        return usage_error("%s", "--tls-ca, --tls-cert and --tls-key go together");
    }
    if (tls != 0 && !o->mpi && o->n_peers == 0) {
        return usage_error("%s", "--tls-* secure the exchange: they need --mpi or --peers");
    }
    if ((o->ssd_dir != NULL) != o->ssd_capacity_set) {
        return usage_error("%s", "--ssd-cache DIR and --ssd-capacity SIZE go together");
    }
    if (o->resume_after > 0 && o->state_file == NULL) {
        return usage_error("%s", "--resume-after needs --state FILE");
    }
    if (o->start_epoch >= o->epochs) {
        return usage_error("%s", "--start-epoch must be below --epochs");
    }
    if (o->plan && o->ids_path != NULL) {
        return usage_error("%s", "--plan reads no samples: --ids does not apply");
    }
    return -1;
}

int bench_parse_args(int argc, char **argv, bench_opts *o)
{
    int c = 0;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
        const int status = one_option(c, optarg, argv, o);
        if (status >= 0) {
            return status;
        }
    }
    if (optind >= argc) {
        return usage_error("%s", "missing DATASET");
    }
    if (optind + 1 < argc) {
        return usage_error("unexpected argument '%s'", argv[optind + 1]);
    }
    o->dataset = argv[optind];
    if (o->memory_arg == NULL) {
        return usage_error("%s", "missing --memory SIZE");
    }
    const int status = check_combinations(o);
    return status >= 0 ? status : bench_launch_apply(o);
}
