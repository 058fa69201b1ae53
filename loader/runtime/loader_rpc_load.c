/*
 * The library's entry points into the distributed stack, defined here once for both
 * libraries: hdmlp_loader_create, hdmlp_config_bootstrap_mpi and hdmlp_mpi_gather_stats
 * check their arguments and then call rpc/ through an rpc_module table
 * (loader_rpc_module.h). The shared libhdmlp gets the table from libhdmlp-rpc.so, loaded
 * on first need: a single-rank loader never loads it, so a process that only reads
 * locally maps neither gRPC nor MPI. The static libhdmlp.a (this file compiled with
 * HDMLP_RPC_LINKED) links rpc/ and takes the table from rpc_module_fill.
 *
 * Where the module is looked for: beside the libhdmlp that holds this code (dladdr; the
 * build tree, an install prefix's libdir and a pip-installed package all keep the two
 * together), then the dynamic linker's search path. The outcome of the first attempt is
 * kept for the life of the process (a dlopen handle is process-wide by nature, and the
 * module is never unloaded: MPI and gRPC cannot be finalised and loaded again), so a
 * missing module is reported identically by every later call.
 */
#include "loader_rpc_module.h"

#ifndef HDMLP_RPC_LINKED
#include <dlfcn.h>
#endif
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static rpc_module module;
static int module_rc = HDMLP_OK;
static char module_err[1024];

#ifdef HDMLP_RPC_LINKED
static void load_module(void) { rpc_module_fill(&module); }
#else
/* Directory of the object holding this file's data, with a trailing '/', or "" if unknown. */
static void own_dir(char *dir, size_t len)
{
    Dl_info info;
    dir[0] = '\0';
    if (dladdr(&module_rc, &info) == 0 || info.dli_fname == NULL) {
        return;
    }
    const char *slash = strrchr(info.dli_fname, '/');
    if (slash == NULL) {
        return;
    }
    const size_t n = (size_t)(slash - info.dli_fname) + 1;
    if (n < len) {
        memcpy(dir, info.dli_fname, n);
        dir[n] = '\0';
    }
}

static void load_module(void)
{
    /* Static: the module keeps a pointer to it. */
    static rpc_host h;
    h = (rpc_host){.version = hdmlp_version_string(),
                   .config_size = sizeof(struct hdmlp_config),
                   .verr = hd_verr,
                   .malloc_fn = hd_malloc,
                   .calloc_fn = hd_calloc,
                   .free_fn = hd_free,
                   .config_copy = config_copy,
                   .config_clear = config_clear};
    char dir[4096];
    char path[4096 + sizeof RPC_MODULE_FILE];
    own_dir(dir, sizeof dir);
    void *so = NULL;
    char first[512] = "";
    if (dir[0] != '\0') {
        snprintf(path, sizeof path, "%s%s", dir, RPC_MODULE_FILE);
        so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (so == NULL) {
            snprintf(first, sizeof first, "%s", dlerror());
        }
    }
    if (so == NULL) {
        so = dlopen(RPC_MODULE_FILE, RTLD_NOW | RTLD_LOCAL);
    }
    if (so == NULL) {
        const char *second = dlerror();
        module_rc = HDMLP_E_UNSUPPORTED;
        snprintf(module_err, sizeof module_err,
                 "the distributed transport (gRPC, MPI) lives in %s, which could not be "
                 "loaded: %s%s%s",
                 RPC_MODULE_FILE, first[0] != '\0' ? first : "", first[0] != '\0' ? "; " : "",
                 second != NULL ? second : "unknown error");
        return;
    }
    rpc_module_init_fn init = NULL;
    void *sym = dlsym(so, RPC_MODULE_INIT);
    memcpy(&init, &sym, sizeof init); /* object pointer → function pointer (POSIX) */
    if (init == NULL) {
        module_rc = HDMLP_E_UNSUPPORTED;
        snprintf(module_err, sizeof module_err, "%s has no %s: not an hdmlp module",
                 RPC_MODULE_FILE, RPC_MODULE_INIT);
        return;
    }
    char err[512] = "";
    module_rc = init(&h, &module, err, sizeof err);
    if (module_rc != HDMLP_OK) {
        snprintf(module_err, sizeof module_err, "%s: %s", RPC_MODULE_FILE, err);
    }
}
#endif

/* The loaded module, or NULL with the error set ("what" names the caller). */
static const rpc_module *get_module(const char *what)
{
    pthread_once(&module_once, load_module);
    if (module_rc != HDMLP_OK) {
        hd_err(module_rc, "%s: %s", what, module_err);
        return NULL;
    }
    return &module;
}

int hdmlp_loader_create(hdmlp_dataset *ds, const hdmlp_config *cfg, hdmlp_loader **out)
{
    peer_transport_factory factory = NULL;
    if (cfg != NULL && cfg->world > 1) {
        const rpc_module *m = get_module("loader");
        if (m == NULL) {
            if (out != NULL) {
                *out = NULL;
            }
            return module_rc;
        }
        factory = m->transport_create;
    }
    return loader_create_with(ds, cfg, factory, out);
}

int hdmlp_config_bootstrap_mpi(hdmlp_config *cfg, const char *bind_host)
{
    if (cfg == NULL) {
        return hd_err(HDMLP_E_INVAL, "bootstrap_mpi: NULL config");
    }
    const rpc_module *m = get_module("bootstrap_mpi");
    return m != NULL ? m->bootstrap_mpi(cfg, bind_host) : module_rc;
}

int hdmlp_mpi_gather_stats(const hdmlp_stats *mine, hdmlp_stats *all_on_rank0, size_t size)
{
    if (mine == NULL) {
        return hd_err(HDMLP_E_INVAL, "mpi_gather_stats: NULL stats");
    }
    if (size == 0 || size > INT_MAX) {
        return hd_err(HDMLP_E_INVAL, "mpi_gather_stats: size %zu (expected HDMLP_STATS_SIZE)",
                      size);
    }
    const rpc_module *m = get_module("mpi_gather_stats");
    return m != NULL ? m->gather_stats(mine, all_on_rank0, size) : module_rc;
}
