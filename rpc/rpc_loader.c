/* What rpc/ gives the library (loader/runtime/loader_rpc_module.h): the gRPC transport for a
 * loader's peers, the MPI bootstrap and the MPI stats gather. The static libhdmlp.a calls
 * rpc_module_fill directly, the module libhdmlp-rpc.so from hdmlp_rpc_module_init; either
 * way the public functions are defined once, in loader/runtime/loader_rpc_load.c. */
#include "loader_rpc_module.h"
#include "rpc.h"

void rpc_module_fill(rpc_module *out)
{
    out->transport_create = rpc_transport_create;
    out->bootstrap_mpi = rpc_bootstrap_mpi;
    out->gather_stats = rpc_gather_stats;
}
