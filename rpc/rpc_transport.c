/* The gRPC peer transport (work in progress: not yet functional). */
#include "rpc.h"

int rpc_transport_create(const struct hdmlp_config *cfg, const peer_handler *h,
                         peer_transport **out)
{
    (void)cfg;
    (void)h;
    *out = NULL;
    return hd_err(HDMLP_E_UNSUPPORTED, "rpc: gRPC transport not implemented yet");
}
