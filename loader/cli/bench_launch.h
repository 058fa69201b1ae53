/*
 * hdmlp-bench under a launcher: mpirun, srun and torchrun start N copies of the program,
 * and without a distributed option each copy would run the whole job on its own (N silent
 * single-rank runs writing the same files). The launcher is recognised from the variables it
 * sets (the CLI may read the environment; the library never does):
 *   mpirun (Open MPI)  OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK
 *   mpiexec (MPICH)    PMI_SIZE, PMI_RANK
 *   srun (Slurm)       SLURM_STEP_NUM_TASKS (or SLURM_NTASKS), SLURM_PROCID
 *   torchrun           WORLD_SIZE, RANK with TORCHELASTIC_RUN_ID or LOCAL_RANK
 */
#ifndef HDMLP_BENCH_LAUNCH_H
#define HDMLP_BENCH_LAUNCH_H

#include "bench_types.h"

typedef enum bench_launcher {
    BENCH_LAUNCH_NONE = 0,
    BENCH_LAUNCH_MPI,   /* an MPI launcher: MPI_Init finds the job */
    BENCH_LAUNCH_SLURM, /* srun: MPI may or may not be wired to it */
    BENCH_LAUNCH_TORCH  /* torchrun: no MPI; hdmlp-bench has no torch rendezvous */
} bench_launcher;

typedef struct bench_launch {
    bench_launcher kind;
    const char *name;     /* "mpirun", "srun", ... */
    const char *size_var; /* the variable that gave the world size */
    long rank, world;     /* rank -1 when the launcher does not say */
} bench_launch;

/* Reads the launcher variables; kind NONE when none or a world of 1. */
void bench_launch_detect(bench_launch *out);

/* Called once the options are parsed: when a launcher started several copies and no
 * distributed option (--mpi, --peers, --world) or --standalone was given, either turns
 * --mpi on (MPI launchers: the copies bootstrap as one job; a note on rank 0's stderr) or
 * refuses with a message naming the options (srun, torchrun). Returns -1 to go on, or an
 * exit status (BENCH_EXIT_USAGE) after printing why. */
int bench_launch_apply(bench_opts *o);

#endif
