/* hdmlp_config_bootstrap_mpi (work in progress). */
#include "rpc.h"

#include <mpi.h>

int hdmlp_config_bootstrap_mpi(hdmlp_config *cfg, const char *bind_host)
{
    (void)cfg;
    (void)bind_host;
    return hd_err(HDMLP_E_UNSUPPORTED, "bootstrap_mpi: not implemented yet");
}
