# rpc/ tests: codec and gRPC transport on loopback (tests/test_rpc.c), and the MPI
# bootstrap under mpirun (tests/rpc_mpi_boot.c). Included from tests/CMakeLists.txt.
hdmlp_add_test(NAME test_rpc
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_rpc.c
  LIBS PkgConfig::GRPC
  TIMEOUT 600)
target_include_directories(test_rpc PRIVATE ${PROJECT_SOURCE_DIR}/rpc
  $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
