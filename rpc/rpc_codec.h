#ifndef HDMLP_RPC_CODEC_H
#define HDMLP_RPC_CODEC_H
#include "loader_peer.h"
#endif
