/* hdmlp-bench: command line and loader configuration. */
#ifndef HDMLP_BENCH_ARGS_H
#define HDMLP_BENCH_ARGS_H

#include "bench_types.h"

#include <stdio.h>

#define BENCH_EXIT_RUNTIME 1
#define BENCH_EXIT_USAGE 2

void bench_usage(FILE *f);
/* Fills *o from argv (o holds the defaults). Returns -1 to continue, else the exit status
 * (help, version, usage error: message on stderr). o->peers_buf and o->peers are heap
 * (bench_args_free). */
int bench_parse_args(int argc, char **argv, bench_opts *o);
void bench_args_free(bench_opts *o);
/* Applies every option to cfg except the bootstrap (--mpi); --peers/--rank/--token and
 * --world set rank, world, peers and token. A rejected value is a usage error naming the
 * option (message on stderr): returns 0 or BENCH_EXIT_USAGE. */
int bench_configure(const bench_opts *o, hdmlp_config *cfg);

#endif
