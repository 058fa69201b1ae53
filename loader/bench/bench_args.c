/* hdmlp-bench: command line and loader configuration (see bench_args.h). */
#include "bench_args.h"

#include "bench_launch.h"
#include "bench_parse.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void bench_usage(FILE *f)
{
    fputs("usage: hdmlp-bench DATASET --memory SIZE [options]\n"
          "\n"
          "Iterates over the packed dataset DATASET like a training loop (each epoch a fresh\n"
          "random order, each sample once) and reports throughput and I/O statistics.\n"
          "\n"
          "  --memory SIZE        loader memory budget (required); SIZE is bytes with an\n"
          "                       optional suffix K/M/G/T (x1024; also KiB..), KB/MB/GB/TB\n"
          "                       (x1000), or P% of the dataset's raw bytes (e.g. 25%)\n"
          "  --batch B            samples per batch (default 32)\n"
          "  --epochs E           epochs to run, >= 1 (default 1)\n"
          "  --start-epoch E      first epoch to deliver, < --epochs (default 0)\n"
          "  --seed S             seed of the delivery order (default 0)\n"
          "  --threads T          I/O worker threads, 1..64 (default 2)\n"
          "  --engine E           auto | pread | io_uring (default auto)\n"
          "  --policy P           fill-rate | random (default fill-rate)\n"
          "  --refill R           whole | ranges | auto (default auto)\n"
          "  --relaxed            relaxed mode: serve a request from any valid slot of its\n"
          "                       abstract chunk (opt-in; see the randomness figures)\n",
          f);
    fputs(
        "  --on-corrupt A       fail | skip: a corrupt sample fails the run (default) or is\n"
        "                       left out and counted (skipped_samples)\n"
        "  --state FILE         resume from FILE when it exists (FILE.<rank> with peers)\n"
        "  --resume-after N     stop after N batches and save the position to --state FILE\n"
        "  --direct             read segments with O_DIRECT (default: O_DIRECT when the\n"
        "                       page cache cannot hold this rank's share of the dataset)\n"
        "  --buffered           read segments through the page cache\n"
        "  --lookahead N        most requests planned ahead; 0 = as memory allows (default)\n"
        "  --op-us US           storage cost model: microseconds per read operation\n"
        "  --bandwidth RATE     storage cost model: bytes per second (SIZE suffixes apply)\n"
        "  --calibrate          measure the storage cost model at start-up (a short probe)\n"
        "  --no-cost-learning   keep the cost model fixed (default: learnt from the reads;\n"
        "                       --op-us/--bandwidth also fix it)\n"
        "  --ram-cache SIZE     RAM chunk cache within the budget: SIZE, auto (the default:\n"
        "                       everything when the dataset fits with 1/8 to spare) or 0\n"
        "  --ssd-cache DIR      local chunk cache directory (needs --ssd-capacity)\n"
        "  --ssd-capacity SIZE  bytes the SSD cache may hold (0: tier off)\n"
        "  --compute-ms MS      simulated compute per batch (sleep), default 0\n"
        "  --drop-last          drop each epoch's last short batch\n"
        "  --plan               print the forecast of this configuration (a metadata-only\n"
        "                       replay; no sample data is read); with --json the keys are a\n"
        "                       run's (chunk_loads, bytes_read, source_bytes, ...)\n"
        "  --ids FILE           write each epoch's delivered sample indices to FILE: one line\n"
        "                       per epoch, space-separated, in delivery order; with several\n"
        "                       ranks each writes FILE.<rank>\n"
        "  --no-randomness      skip the randomness figures (they keep 8 bytes per sample)\n"
        "  --json               print the statistics as one JSON object on stdout\n"
        "  --quiet              print nothing but errors (and the JSON object with --json)\n"
        "\n",
        f);
    fputs(
        "Distributed (every rank runs hdmlp-bench with the same options):\n"
        "  --mpi                under mpirun: rank, world, endpoints, seed and token from "
        "MPI;\n"
        "                       rank 0 prints every rank and the total. Started by mpirun\n"
        "                       (or MPICH's mpiexec) with several ranks, hdmlp-bench turns\n"
        "                       --mpi on by itself; under srun or torchrun it refuses to\n"
        "                       run without --mpi or --peers\n"
        "  --standalone         under a launcher, run this copy as an independent single\n"
        "                       rank on purpose\n"
        "  --bind-host HOST     address the ranks' servers bind with --mpi (default\n"
        "                       127.0.0.1)\n"
        "  --peers LIST         host:port of every rank, comma-separated, in rank order\n"
        "                       (world = their number); each process prints its own rank\n"
        "  --rank R             this process's rank (with --peers, or --plan --world)\n"
        "  --world W            with --plan and without --peers: forecast rank R of W\n"
        "  --token T            job token shared by the ranks (with --peers; default 0)\n"
        "  --prefetch W         opportunistic prefetch window; 0 = off (default 256)\n"
        "  --remote-memory SIZE cap on samples prefetched from peers, within the budget\n"
        "                       (default and 0: 10 % of the budget)\n"
        "  --peer-timeout MS    a silent peer fails the run after MS (default 5000)\n"
        "  --same-host MODE     peers on this host: shm (shared-memory rings, the default),\n"
        "                       socket (gRPC over a Unix socket) or tcp (loopback TCP)\n"
        "  --tls-ca FILE        mutual TLS between the ranks (with --mpi or --peers; all\n"
        "  --tls-cert FILE      three together): the CA (PEM) that signed every rank's\n"
        "  --tls-key FILE       certificate, this rank's certificate and its key; the\n"
        "                       certificates must name the peer hosts (IP SAN for addresses)\n"
        "\n"
        "  -h, --help           show this help;  -V, --version  show the version\n"
        "\n"
        "Randomness figures (from the delivered indices): same_chunk_distance = mean distance\n"
        "in delivery position between samples of the same chunk, relative to a permutation\n"
        "(1.0 = as random); epoch_position_correlation = correlation of a sample's position\n"
        "in consecutive epochs (0 = unrelated).\n"
        "\n"
        "Exit status: 0 success, 1 runtime failure (any rank), 2 usage error.\n",
        f);
}

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
    OPT_SAME_HOST
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
    return hdmlp_parse_size(arg, 0, out, NULL) == HDMLP_OK ? 0 : -1;
}

/* One option; returns -1 to continue, else the exit status. */
static int one_option(int c, const char *arg, char **argv, bench_opts *o)
{
    int choice = 0;

    switch (c) {
    case OPT_MEMORY:
        o->memory_arg = arg;
        /* A percentage is resolved once the dataset is open (memory_pct > 0, memory 0). */
        if (hdmlp_parse_size(arg, 0, &o->memory, &o->memory_pct) != HDMLP_OK) {
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
        if (pick(arg, bench_policy_names, 2, &choice) != 0) {
            return usage_error("--policy: expected fill-rate or random, got '%s'", arg);
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
        o->relaxed = 1;
        return -1;
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
    st = st ? st : rejected(hdmlp_config_set_relaxed(cfg, o->relaxed), "--relaxed");
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
