/*
 * rpc_bootstrap_mpi (behind hdmlp_config_bootstrap_mpi, loader/runtime/loader_rpc_load.c):
 * rank, world, endpoints, seed and job token from MPI.
 *
 * Every rank picks a free TCP port on bind_host (rpc_pick_endpoint: bind port 0, read it
 * back, release it; another process could take the port before the transport binds it,
 * which then fails with HDMLP_E_IO naming the address) and the endpoints are all-gathered;
 * a rank whose endpoint equals an earlier rank's picks again (up to 8 rounds).
 * Rank 0 draws the job token from /dev/urandom and broadcasts it with its seed. Collectives
 * run on a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN; the ranks first agree that
 * all are ready, so a local failure fails every rank together instead of leaving the others
 * waiting in a collective. bind_host NULL means this host's name (gethostname). Call it
 * from one thread (MPI is initialised with MPI_THREAD_FUNNELED when we initialise it).
 *
 * rpc_gather_stats (behind hdmlp_mpi_gather_stats): every rank's hdmlp_stats on rank 0
 * (MPI_Gather of the caller's `size` bytes on a duplicate of MPI_COMM_WORLD), for tools
 * such as hdmlp-bench that report per rank.
 */
#include "rpc_transport.h"

#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EP_LEN 272 /* one gathered endpoint, NUL-terminated; "" = that rank failed */

/* Whether rank r's gathered endpoint equals an earlier rank's. */
static int has_earlier_twin(const char *all, int r)
{
    for (int i = 0; i < r; i++) {
        if (strncmp(&all[(size_t)i * EP_LEN], &all[(size_t)r * EP_LEN], EP_LEN) == 0) {
            return 1;
        }
    }
    return 0;
}

static int any_twin(const char *all, int world)
{
    for (int r = 1; r < world; r++) {
        if (has_earlier_twin(all, r)) {
            return 1;
        }
    }
    return 0;
}

/* MPI itself is process-global; this flag only avoids registering the handler twice. */
static int finalize_registered;

static void finalize_at_exit(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
        MPI_Finalize();
    }
}

static int mpi_fail(int code, int mpi_rc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    MPI_Error_string(mpi_rc, s, &n);
    return hd_err(code, "bootstrap_mpi: %s failed: %s", what, s);
}

/* A private duplicate of MPI_COMM_WORLD whose errors return (the caller frees it), and this
 * process's rank and the world size in it. */
static int own_comm(MPI_Comm *comm, int *rank, int *world)
{
    const int rc = MPI_Comm_dup(MPI_COMM_WORLD, comm);
    if (rc != MPI_SUCCESS) {
        return mpi_fail(HDMLP_E_PEER, rc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(*comm, rank);
    MPI_Comm_size(*comm, world);
    return HDMLP_OK;
}

static int random_token(uint64_t *out)
{
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    uint64_t v = 0;
    const ssize_t n = read(fd, &v, sizeof v);
    close(fd);
    if (n != (ssize_t)sizeof v) {
        return 0;
    }
    *out = v != 0 ? v : 1; /* 0 is the "no token" default */
    return 1;
}

int rpc_bootstrap_mpi(hdmlp_config *cfg, const char *bind_host)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (fin) {
        return hd_err(HDMLP_E_STATE, "bootstrap_mpi: MPI is already finalised");
    }
    if (!init) {
        int provided = 0;
        const int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) {
            return mpi_fail(HDMLP_E_PEER, rc, "MPI_Init_thread");
        }
        /* We initialised MPI, so we finalise it (never otherwise). */
        if (!finalize_registered && atexit(finalize_at_exit) == 0) {
            finalize_registered = 1;
        }
    }
    MPI_Comm comm;
    int rank = 0, world = 0;
    int rc = own_comm(&comm, &rank, &world);
    if (rc != HDMLP_OK) {
        return rc;
    }

    /* 1. Endpoints. */
    char host[256];
    char ep[EP_LEN];
    memset(ep, 0, sizeof ep);
    int local = HDMLP_OK;
    char local_err[256] = "";
    if (bind_host == NULL) {
        if (gethostname(host, sizeof host) != 0) {
            snprintf(host, sizeof host, "localhost");
        }
        host[sizeof host - 1] = '\0';
    } else {
        snprintf(host, sizeof host, "%s", bind_host);
    }
    local = rpc_pick_endpoint(host, ep, sizeof ep);
    if (local != HDMLP_OK) {
        snprintf(local_err, sizeof local_err, "%s", hdmlp_last_error());
        ep[0] = '\0';
    }
    char *all = hd_calloc((size_t)world, EP_LEN);
    if (local == HDMLP_OK && all == NULL) {
        local = HDMLP_E_NOMEM;
        snprintf(local_err, sizeof local_err, "out of memory for %d endpoints", world);
    }
    /* 2. Agree that every rank is ready, naming the first that is not. */
    struct {
        int ok;
        int rank;
    } mine = {local == HDMLP_OK, rank}, least = {0, 0};
    rc = MPI_Allreduce(&mine, &least, 1, MPI_2INT, MPI_MINLOC, comm);
    /* 3. Endpoints, then seed and token from rank 0. */
    uint64_t pair[2] = {0, 0};
    if (rc == MPI_SUCCESS && least.ok) {
        rc = MPI_Allgather(ep, EP_LEN, MPI_CHAR, all, EP_LEN, MPI_CHAR, comm);
        /* Ranks of one host pick and release their ports before any listens, so two can
         * draw the same one (seen in CI): every rank sees the same endpoints, and while two
         * are equal the later of each pair picks again. */
        for (int round = 0; rc == MPI_SUCCESS && round < 8 && any_twin(all, world); round++) {
            if (has_earlier_twin(all, rank)) {
                char again[EP_LEN];
                if (rpc_pick_endpoint(host, again, sizeof again) == HDMLP_OK) {
                    memcpy(ep, again, sizeof ep);
                }
            }
            rc = MPI_Allgather(ep, EP_LEN, MPI_CHAR, all, EP_LEN, MPI_CHAR, comm);
        }
        if (rank == 0) {
            pair[0] = 0; /* stays 0 if /dev/urandom fails: every rank sees it */
            random_token(&pair[0]);
            pair[1] = cfg->seed;
        }
        if (rc == MPI_SUCCESS) {
            rc = MPI_Bcast(pair, 2, MPI_UINT64_T, 0, comm);
        }
    }
    MPI_Comm_free(&comm);
    int out = HDMLP_OK;
    if (local != HDMLP_OK) {
        out = hd_err(local == HDMLP_E_NOMEM ? HDMLP_E_NOMEM : HDMLP_E_IO,
                     "bootstrap_mpi: rank %d: %s", rank, local_err);
    } else if (rc != MPI_SUCCESS) {
        out = mpi_fail(HDMLP_E_PEER, rc, "exchanging endpoints");
    } else if (!least.ok) {
        out = hd_err(HDMLP_E_PEER, "bootstrap_mpi: rank %d could not pick an endpoint",
                     least.rank);
    } else if (pair[0] == 0) {
        out = hd_err(HDMLP_E_IO, "bootstrap_mpi: rank 0 could not read /dev/urandom");
    }
    if (out == HDMLP_OK) {
        const char **ptrs = hd_calloc((size_t)world, sizeof *ptrs);
        if (ptrs == NULL) {
            out = hd_err(HDMLP_E_NOMEM, "bootstrap_mpi: out of memory");
        } else {
            for (int r = 0; r < world; r++) {
                all[(size_t)r * EP_LEN + EP_LEN - 1] = '\0';
                ptrs[r] = &all[(size_t)r * EP_LEN];
            }
            /* Setters validate; the config is left unchanged by any one that fails. */
            out = hdmlp_config_set_peers(cfg, ptrs, (uint32_t)world);
            if (out == HDMLP_OK) {
                out = hdmlp_config_set_listen(cfg, ptrs[rank]);
            }
            if (out == HDMLP_OK) {
                out = hdmlp_config_set_rank(cfg, (uint32_t)rank, (uint32_t)world);
            }
            if (out == HDMLP_OK) {
                out = hdmlp_config_set_job_token(cfg, pair[0]);
            }
            if (out == HDMLP_OK) {
                out = hdmlp_config_set_seed(cfg, pair[1]);
            }
            hd_free(ptrs);
        }
    }
    hd_free(all);
    return out;
}

int rpc_gather_stats(const hdmlp_stats *mine, hdmlp_stats *all_on_rank0, size_t size)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) {
        return hd_err(HDMLP_E_STATE, "mpi_gather_stats: MPI is %s",
                      fin ? "already finalised" : "not initialised");
    }
    MPI_Comm comm;
    int rank = 0, world = 0;
    int rc = own_comm(&comm, &rank, &world);
    if (rc != HDMLP_OK) {
        return rc;
    }
    /* Rank 0 without a buffer still takes part (the others are already in the collective). */
    void *scratch = NULL;
    void *dst = all_on_rank0;
    if (rank == 0 && dst == NULL) {
        scratch = hd_calloc((size_t)world, size);
        dst = scratch;
    }
    if (rank == 0 && dst == NULL) {
        /* world x ~600 bytes: practically unreachable; the others then wait in the gather. */
        MPI_Comm_free(&comm);
        return hd_err(HDMLP_E_NOMEM, "mpi_gather_stats: out of memory");
    }
    rc = MPI_Gather(mine, (int)size, MPI_BYTE, dst, (int)size, MPI_BYTE, 0, comm);
    MPI_Comm_free(&comm);
    hd_free(scratch);
    if (rc != MPI_SUCCESS) {
        return mpi_fail(HDMLP_E_PEER, rc, "MPI_Gather");
    }
    if (rank == 0 && all_on_rank0 == NULL) {
        return hd_err(HDMLP_E_INVAL, "mpi_gather_stats: rank 0 needs all_on_rank0");
    }
    return HDMLP_OK;
}
