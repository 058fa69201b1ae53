#!/bin/bash
# hdmlp-pack carries none of the loader and none of the distributed stack: it links the
# packer library and the data library (the base, format/, datasets, object stores), not
# libhdmlp (README "Layout", packer/). Three checks, each failing on its own:
#   1. what CMake links it with (LINKS: its link closure, one target or library a line,
#      written at configure time by tests/pkg/pkg_tests.cmake): the data library, and no
#      libhdmlp, loader, rpc/ objects, gRPC, protobuf-c or MPI;
#   2. ldd: no libgrpc, libgpr, libprotobuf-c, libmpi, libhdmlp;
#   3. nm (defined and undefined symbols, local ones too): no loader runtime, rpc/, gRPC,
#      protobuf-c or MPI symbol, and the data library's are there.
# ldd alone would pass with the whole library linked (--as-needed drops libraries nothing
# calls), and nm alone too (a static archive gives a program only the members it calls):
# check 1 is the one that holds the build to it.
#
#   pkg_pack_links.sh PATH/TO/hdmlp-pack LINKS
set -uo pipefail
PACK=$1 LINKS=$2

fails=0
fail() {
    echo "[pkg_pack_links] FAIL: $*" >&2
    fails=$((fails + 1))
}
step() { echo "[pkg_pack_links] $*"; }

[ -x "$PACK" ] || { fail "no hdmlp-pack at $PACK"; exit 1; }
[ -s "$LINKS" ] || { fail "no link closure at $LINKS (reconfigure the build)"; exit 1; }

# 1. The link closure.
grep -qx 'hdmlp_data' "$LINKS" || fail "hdmlp-pack does not link the data library (hdmlp_data): $(tr '\n' ' ' <"$LINKS")"
bad=$(grep -xE 'hdmlp|hdmlp_static|hdmlp_loader|hdmlp_rpc|hdmlp_rpc_core|hdmlp_rpc_module' "$LINKS")
[ -z "$bad" ] || fail "hdmlp-pack links $(echo "$bad" | tr '\n' ' ')(the loader or rpc/)"
bad=$(grep -E 'GRPC|PROTOBUFC|^MPI::|/libgrpc|/libgpr|/libprotobuf-c|/libmpi|^-l(grpc|gpr|protobuf-c|mpi)' "$LINKS")
[ -z "$bad" ] || fail "hdmlp-pack links $(echo "$bad" | tr '\n' ' ')"
step "link closure: $(tr '\n' ' ' <"$LINKS")"

# 2. The shared libraries it loads.
command -v ldd >/dev/null || { fail "ldd not found"; exit 1; }
ldd_out=$(ldd "$PACK") || fail "ldd $PACK failed"
bad=$(echo "$ldd_out" | grep -E 'libgrpc|libgpr|libprotobuf-c|libmpi|libhdmlp')
[ -z "$bad" ] || fail "ldd lists: $bad"
step "ldd: $(echo "$ldd_out" | awk '{print $1}' | tr '\n' ' ')"

# 3. The symbols in the binary (nm: defined, local and undefined; the library's internal
# functions are hidden, so they are local in a program). The prefixes are those of the
# loader runtime's, the protocol's, rpc/'s and the distributed stack's functions.
command -v nm >/dev/null || { fail "nm not found"; exit 1; }
syms=$(nm "$PACK" 2>&1 | awk '{print $NF}' | sed 's/@.*//')
echo "$syms" | grep -qx 'hdmlp_dataset_open' ||
    fail "nm shows no hdmlp_dataset_open (stripped binary? the check needs its symbols)"
FORBID='^(hdmlp_loader_|hdmlp_config_|hdmlp_batch_|hdmlp_mpi_|loader_|rpc_|shm_mem|shm_in_|shm_out_|board_|node_balance|sched_|sampler_|refill_plan|io_engine|io_ring|tier_ssd|tier_ram|sample_pool|image_pipe|exchange_|cost_model|grpc_|gpr_|protobuf_c_|P?MPI_|ompi_)'
bad=$(echo "$syms" | grep -E "$FORBID" | sort -u)
if [ -n "$bad" ]; then
    fail "nm shows loader runtime, rpc/, gRPC, protobuf-c or MPI symbols: $(echo "$bad" | head -20 | tr '\n' ' ')"
else
    step "nm: $(echo "$syms" | grep -c .) symbols, none of the loader runtime, rpc/, gRPC, protobuf-c or MPI"
fi

[ "$fails" -eq 0 ] || exit 1
step "OK"
