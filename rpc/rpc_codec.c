/* peer_msg <-> protobuf-c bytes, with validation of everything received. */
#include "rpc_codec.h"
