/* The public loader constructor: the loader with the gRPC transport for its peers. */
#include "rpc.h"

int hdmlp_loader_create(hdmlp_dataset *ds, const hdmlp_config *cfg, hdmlp_loader **out)
{
    return loader_create_with(ds, cfg, rpc_transport_create, out);
}
