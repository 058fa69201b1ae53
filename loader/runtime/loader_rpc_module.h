/*
 * The distributed stack as a module loaded on demand (DESIGN.md §2).
 *
 * The shared libhdmlp carries no gRPC, protobuf-c, OpenSSL or MPI: rpc/ is built a second
 * time as the module libhdmlp-rpc.so, which libhdmlp dlopen()s (loader_rpc_load.c) the first
 * time a config has world > 1 or a program asks for the MPI bootstrap. The module resolves
 * the library's internal helpers through the rpc_host table below (they are hidden in
 * libhdmlp) and the public API through its DT_NEEDED on libhdmlp. The static libhdmlp.a
 * links rpc/ directly and never loads the module: its loader_rpc_load.c (compiled with
 * HDMLP_RPC_LINKED) takes the table from rpc_module_fill. The public functions behind the
 * table are defined once, in loader_rpc_load.c, for both libraries.
 */
#ifndef HDMLP_LOADER_RPC_MODULE_H
#define HDMLP_LOADER_RPC_MODULE_H

#include "loader.h"

#include <stdarg.h>
#include <stddef.h>

/* File name of the module, looked for beside libhdmlp first. */
#define RPC_MODULE_FILE "libhdmlp-rpc.so"
/* Symbol the module exports (its only one). */
#define RPC_MODULE_INIT "hdmlp_rpc_module_init"

/* What libhdmlp lends the module. version and config_size pin the module to the library it
 * was built with: the two share struct hdmlp_config's layout. */
typedef struct rpc_host {
    const char *version; /* HDMLP_VERSION string of libhdmlp */
    size_t config_size;  /* sizeof(struct hdmlp_config) */
    int (*verr)(int code, const char *fmt, va_list ap);
    void *(*malloc_fn)(size_t n);
    void *(*calloc_fn)(size_t count, size_t size);
    void (*free_fn)(void *p);
    int (*config_copy)(struct hdmlp_config *dst, const struct hdmlp_config *src);
    void (*config_clear)(struct hdmlp_config *cfg);
} rpc_host;

struct hdmlp_stats;

/* What the module provides. */
typedef struct rpc_module {
    peer_transport_factory transport_create;
    int (*bootstrap_mpi)(struct hdmlp_config *cfg, const char *bind_host);
    int (*gather_stats)(const struct hdmlp_stats *mine, struct hdmlp_stats *all_on_rank0,
                        size_t size);
} rpc_module;

/* Fills *out with rpc/'s functions (rpc/rpc_loader.c): linked into libhdmlp.a and into the
 * module, never into the shared libhdmlp. */
void rpc_module_fill(rpc_module *out);

/* The module's entry point: checks the host's version and config size, keeps the host
 * table for the life of the process and fills *out. Returns 0 or a negative HDMLP_E_*
 * code, with a message of at most errlen bytes in err. */
typedef int (*rpc_module_init_fn)(const rpc_host *host, rpc_module *out, char *err,
                                  size_t errlen);

#endif
