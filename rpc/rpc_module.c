/*
 * The entry point of libhdmlp-rpc.so, the distributed stack as a module that the shared
 * libhdmlp loads on demand (loader_rpc_module.h). Also the module's definitions of
 * the library helpers rpc/ calls (hd_err, hd_malloc, config_copy, ...): libhdmlp keeps them
 * hidden, so they forward to the host table libhdmlp hands over, which keeps error detail
 * in the library's own thread-local (hdmlp_last_error) and allocations in its wrappers.
 * Not part of libhdmlp.a, which links rpc/ directly (rpc_loader.c fills the same table).
 */
#include "loader_rpc_module.h"
#include "rpc.h"

#include <stdio.h>
#include <string.h>

/* Set once by hdmlp_rpc_module_init, before any other function here can run. */
static const rpc_host *host;

int hd_verr(int code, const char *fmt, va_list ap) { return host->verr(code, fmt, ap); }

int hd_err(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int rc = host->verr(code, fmt, ap);
    va_end(ap);
    return rc;
}

void *hd_malloc(size_t n) { return host->malloc_fn(n); }

void *hd_calloc(size_t count, size_t size) { return host->calloc_fn(count, size); }

void hd_free(void *p) { host->free_fn(p); }

int config_copy(struct hdmlp_config *dst, const struct hdmlp_config *src)
{
    return host->config_copy(dst, src);
}

void config_clear(struct hdmlp_config *cfg) { host->config_clear(cfg); }

__attribute__((visibility("default"))) int
hdmlp_rpc_module_init(const rpc_host *h, rpc_module *out, char *err, size_t errlen);

int hdmlp_rpc_module_init(const rpc_host *h, rpc_module *out, char *err, size_t errlen)
{
#define RPC_STR2(x) #x
#define RPC_STR(x) RPC_STR2(x)
    /* This module's own version, from the header it was compiled with. */
    static const char mine[] = RPC_STR(HDMLP_VERSION_MAJOR) "." RPC_STR(
        HDMLP_VERSION_MINOR) "." RPC_STR(HDMLP_VERSION_PATCH);
#undef RPC_STR
#undef RPC_STR2
    if (h == NULL || out == NULL) {
        snprintf(err, errlen, "module initialised without a host table");
        return HDMLP_E_INVAL;
    }
    if (h->version == NULL || strcmp(h->version, mine) != 0 ||
        h->config_size != sizeof(struct hdmlp_config)) {
        snprintf(err, errlen,
                 "built for libhdmlp %s (config of %zu bytes), loaded by libhdmlp %s (%zu "
                 "bytes): install the two from the same build",
                 mine, sizeof(struct hdmlp_config), h->version != NULL ? h->version : "?",
                 h->config_size);
        return HDMLP_E_UNSUPPORTED;
    }
    host = h;
    rpc_module_fill(out);
    return HDMLP_OK;
}
