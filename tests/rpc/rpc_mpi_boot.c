/*
 * Run under mpirun: every rank bootstraps its config with hdmlp_config_bootstrap_mpi, checks
 * that all ranks agree on peers, token and seed (rank 0's), then creates the gRPC transport
 * and exchanges one REQUEST with every other rank.
 *
 *   rpc_mpi_boot            the library initialises MPI (and must finalise it at exit)
 *   rpc_mpi_boot app-init   the program initialises MPI first; the library must not
 *                           finalise it (checked by an atexit handler registered before)
 * Exit 0 on success; prints "rpc_mpi_boot: rank R of W ok" per rank.
 */
#include "hdmlp.h"
#include "loader.h"
#include "rpc_transport.h"

#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Under ASan: OpenMPI keeps allocations from MPI_Init to process exit (and frees some only
 * in components it has unloaded). Unwind allocations fully (MPI is built without frame
 * pointers) so that such leaks are attributed to MPI's libraries, and suppress only those. */
#define SAN_HOOK __attribute__((visibility("default"))) /* found by the sanitizer runtime */
SAN_HOOK const char *__asan_default_options(void);
SAN_HOOK const char *__asan_default_options(void) { return "fast_unwind_on_malloc=0"; }
SAN_HOOK const char *__lsan_default_suppressions(void);
SAN_HOOK const char *__lsan_default_suppressions(void)
{
    return "leak:libmpi.so\nleak:libopen-rte.so\nleak:libopen-pal.so\nleak:libevent_core\n"
           "leak:libpmix.so\nleak:libhwloc.so\n";
}

static int rank_g = -1;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "rpc_mpi_boot: rank %d: check failed: %s: ", rank_g, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                      \
        }                                                                                      \
    } while (0)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static uint32_t seen_mask, n_errors;

static void on_msg(void *ctx, const peer_msg *m)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    if (m->kind == PEER_REQUEST && m->position == 1000u + m->from) {
        seen_mask |= 1u << m->from;
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void on_error(void *ctx, uint32_t rank, int code, const char *detail)
{
    (void)ctx;
    fprintf(stderr, "rpc_mpi_boot: rank %d: peer %u failed (%d): %s\n", rank_g, rank, code,
            detail);
    pthread_mutex_lock(&mu);
    n_errors++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void app_exit_check(void)
{
    int fin = 1;
    MPI_Finalized(&fin);
    if (fin) {
        fprintf(stderr, "rpc_mpi_boot: rank %d: MPI finalised by the library\n", rank_g);
        _exit(3);
    }
    MPI_Finalize();
}

int main(int argc, char **argv)
{
    const int app_init = argc > 1 && strcmp(argv[1], "app-init") == 0;
    if (app_init) {
        MPI_Init(&argc, &argv);
        atexit(app_exit_check);
    }
    hdmlp_config *cfg = NULL;
    if (hdmlp_config_create(&cfg) != HDMLP_OK) {
        return 1;
    }
    /* Each rank starts from a different seed: rank 0's must win. */
    const char *env_rank = getenv("OMPI_COMM_WORLD_RANK");
    const uint64_t my_seed = 1000u + (env_rank ? (uint64_t)atoi(env_rank) : 0u);
    hdmlp_config_set_seed(cfg, my_seed);
    const int rc = hdmlp_config_bootstrap_mpi(cfg, "127.0.0.1");
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        fprintf(stderr, "rpc_mpi_boot: MPI not initialised after bootstrap (%s)\n",
                hdmlp_last_error());
        return 1;
    }
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    rank_g = rank;
    CHECK(rc == HDMLP_OK, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    CHECK(world <= 32, "world %d", world);
    CHECK(cfg->rank == (uint32_t)rank && cfg->world == (uint32_t)world, "rank %u world %u",
          cfg->rank, cfg->world);
    CHECK(cfg->n_peers == (uint32_t)world, "%u peers", cfg->n_peers);
    CHECK(cfg->listen != NULL && strcmp(cfg->listen, cfg->peers[rank]) == 0, "listen %s",
          cfg->listen ? cfg->listen : "(null)");
    CHECK(strncmp(cfg->peers[rank], "127.0.0.1:", 10) == 0, "endpoint %s", cfg->peers[rank]);
    CHECK(cfg->token != 0, "token 0");
    CHECK(cfg->seed == 1000, "seed %llu", (unsigned long long)cfg->seed);
    for (int r = 0; r < world; r++) {
        for (int q = r + 1; q < world; q++) {
            CHECK(strcmp(cfg->peers[r], cfg->peers[q]) != 0, "ranks %d and %d share %s", r, q,
                  cfg->peers[r]);
        }
    }
    /* Everyone agrees with rank 0 on the whole (peers, token, seed). */
    char digest[4096];
    int n = snprintf(digest, sizeof digest, "%llx/%llu", (unsigned long long)cfg->token,
                     (unsigned long long)cfg->seed);
    for (int r = 0; r < world && n > 0 && (size_t)n < sizeof digest; r++) {
        n += snprintf(digest + n, sizeof digest - (size_t)n, "/%s", cfg->peers[r]);
    }
    char root[4096];
    memcpy(root, digest, sizeof root);
    MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(strcmp(root, digest) == 0, "mine %s, rank 0's %s", digest, root);

    /* The endpoints work: everyone sends one REQUEST to everyone. */
    const peer_handler h = {NULL, on_msg, on_error};
    hdmlp_config_set_peer_timeout(cfg, 5000);
    peer_transport *t = NULL;
    const int trc = rpc_transport_create(cfg, &h, &t);
    CHECK(trc == HDMLP_OK, "transport: %s", hdmlp_last_error());
    for (int r = 0; r < world; r++) {
        if (r != rank) {
            peer_msg m;
            memset(&m, 0, sizeof m);
            m.kind = PEER_REQUEST;
            m.from = (uint32_t)rank;
            m.to = (uint32_t)r;
            m.position = 1000u + (uint32_t)rank;
            CHECK(t->send(t, &m) == HDMLP_OK, "send to %d: %s", r, hdmlp_last_error());
        }
    }
    const uint32_t want = ((world == 32 ? 0u : (1u << world)) - 1u) & ~(1u << rank);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&mu);
    while (seen_mask != want && n_errors == 0) {
        if (pthread_cond_timedwait(&cv, &mu, &until) != 0) {
            break;
        }
    }
    const uint32_t got = seen_mask;
    pthread_mutex_unlock(&mu);
    CHECK(got == want, "received from mask %#x, wanted %#x", got, want);
    /* Keep serving until everyone has received everything, then stop together. */
    MPI_Barrier(MPI_COMM_WORLD);
    t->destroy(t);
    hdmlp_config_free(cfg);
    printf("rpc_mpi_boot: rank %d of %d ok (%s)\n", rank, world,
           app_init ? "application initialised MPI" : "library initialised MPI");
    return 0;
}
