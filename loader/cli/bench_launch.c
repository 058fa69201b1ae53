/* hdmlp-bench under mpirun, srun or torchrun without a distributed option (bench_launch.h). */
#include "bench_launch.h"

#include "bench_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* The variable's value as a non-negative integer, or -1 (unset, empty or not a number). */
static long env_long(const char *name)
{
    const char *s = getenv(name);
    if (s == NULL || *s == '\0') {
        return -1;
    }
    char *end = NULL;
    errno = 0;
    const long v = strtol(s, &end, 10);
    return errno == 0 && *end == '\0' && v >= 0 ? v : -1;
}

static int found(bench_launch *out, bench_launcher kind, const char *name, const char *size_var,
                 const char *rank_var)
{
    const long world = env_long(size_var);
    if (world <= 1) {
        return 0;
    }
    *out = (bench_launch){kind, name, size_var, env_long(rank_var), world};
    return 1;
}

void bench_launch_detect(bench_launch *out)
{
    *out = (bench_launch){BENCH_LAUNCH_NONE, NULL, NULL, -1, 1};
    if (found(out, BENCH_LAUNCH_MPI, "mpirun", "OMPI_COMM_WORLD_SIZE",
              "OMPI_COMM_WORLD_RANK")) {
        return;
    }
    /* srun: the step's task count; SLURM_NTASKS alone is also set in a batch script. */
    if (getenv("SLURM_PROCID") != NULL &&
        (found(out, BENCH_LAUNCH_SLURM, "srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID") ||
         found(out, BENCH_LAUNCH_SLURM, "srun", "SLURM_NTASKS", "SLURM_PROCID"))) {
        return;
    }
    if (found(out, BENCH_LAUNCH_MPI, "mpiexec", "PMI_SIZE", "PMI_RANK")) {
        return;
    }
    if ((getenv("TORCHELASTIC_RUN_ID") != NULL || getenv("LOCAL_RANK") != NULL) &&
        found(out, BENCH_LAUNCH_TORCH, "torchrun", "WORLD_SIZE", "RANK")) {
        return;
    }
}

int bench_launch_apply(bench_opts *o)
{
    if (o->standalone || o->mpi || o->n_peers > 0 || o->world > 0) {
        return -1;
    }
    bench_launch l;
    bench_launch_detect(&l);
    if (l.kind == BENCH_LAUNCH_NONE) {
        return -1;
    }
    char who[96];
    if (l.rank >= 0) {
        snprintf(who, sizeof who, "rank %ld of %ld", l.rank, l.world);
    } else {
        snprintf(who, sizeof who, "one of %ld copies", l.world);
    }
    if (l.kind == BENCH_LAUNCH_MPI) {
        o->mpi = 1;
        if (l.rank == 0 && !o->quiet) {
            fprintf(stderr,
                    "hdmlp-bench: started by %s as %ld ranks (%s): bootstrapping them as one "
                    "job through MPI, as with --mpi (--standalone runs independent copies "
                    "instead)\n",
                    l.name, l.world, l.size_var);
        }
        return -1;
    }
    const char *how =
        l.kind == BENCH_LAUNCH_SLURM
            ? "Add --mpi (an MPI bootstrap through srun's PMI), or give every rank --peers "
              "LIST --rank R"
            : "hdmlp-bench has no torch.distributed rendezvous: start it with mpirun and "
              "--mpi, or give every rank --peers LIST --rank R";
    fprintf(stderr,
            "hdmlp-bench: started by %s as %s (%s=%ld) without --mpi or --peers: each copy "
            "would run the whole job alone. %s; --standalone runs independent copies on "
            "purpose.\nTry 'hdmlp-bench --help'.\n",
            l.name, who, l.size_var, l.world, how);
    return BENCH_EXIT_USAGE;
}
