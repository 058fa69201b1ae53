# rpc/'s tests, included from tests/CMakeLists.txt (paths relative to tests/).
# ---- rpc/: codec and gRPC transport on loopback, the same-host path, TLS, and the MPI
# bootstrap under mpirun (hdmlp-bench over TLS: tests/dist/).
hdmlp_add_test(NAME test_rpc
  SOURCES rpc/test_rpc.c rpc/test_rpc_codec.c rpc/test_rpc_failures.c rpc/test_rpc_bench.c
          rpc/test_rpc_loader.c
          support/rpc_fixture.c support/testds.c
  LIBS PkgConfig::GRPC
  TIMEOUT 600)
target_include_directories(test_rpc PRIVATE ${PROJECT_SOURCE_DIR}/rpc ${CMAKE_CURRENT_SOURCE_DIR}
  $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
# The transport's contracts again, with the peers reached through shared-memory rings.
add_test(NAME test_rpc_shm COMMAND test_rpc --jobs=2 --filter=rpc_transport/*)
set_tests_properties(test_rpc_shm PROPERTIES TIMEOUT 300 LABELS rpc ENVIRONMENT
  "HDMLP_TEST_SAME_HOST=shm;HDMLP_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/data;HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")

# The same-host path (a Unix socket between ranks of one host) and its TCP override.
hdmlp_add_test(NAME test_samehost
  SOURCES rpc/test_samehost.c support/testds.c
  TIMEOUT 120)
target_include_directories(test_samehost PRIVATE ${PROJECT_SOURCE_DIR}/rpc
  ${CMAKE_CURRENT_SOURCE_DIR} $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
set_tests_properties(test_samehost PROPERTIES LABELS rpc)
hdmlp_add_test(NAME test_rpc_arena SOURCES rpc/test_rpc_arena.c TIMEOUT 60)
target_include_directories(test_rpc_arena PRIVATE ${PROJECT_SOURCE_DIR}/rpc
  ${CMAKE_CURRENT_SOURCE_DIR} $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
set_tests_properties(test_rpc_arena PROPERTIES LABELS rpc)

# MPI bootstrap under mpirun (skipped when mpirun is missing). OpenMPI as root needs the
# ALLOW_RUN_AS_ROOT pair; ob1/vader avoid probing UCX (TOOLCHAIN.md).
add_executable(rpc_mpi_boot rpc/rpc_mpi_boot.c)
target_link_libraries(rpc_mpi_boot PRIVATE hdmlp_static MPI::MPI_C)
target_include_directories(rpc_mpi_boot PRIVATE ${PROJECT_SOURCE_DIR}/rpc)
if(HDMLP_MPIRUN)
  set(RPC_MPI_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none)
  add_test(NAME rpc_mpi_boot_np3
    COMMAND ${HDMLP_MPIRUN} -np 3 --oversubscribe $<TARGET_FILE:rpc_mpi_boot>)
  add_test(NAME rpc_mpi_boot_app_init_np2
    COMMAND ${HDMLP_MPIRUN} -np 2 --oversubscribe $<TARGET_FILE:rpc_mpi_boot> app-init)
  set_tests_properties(rpc_mpi_boot_np3 rpc_mpi_boot_app_init_np2 PROPERTIES
    TIMEOUT 120 ENVIRONMENT "${RPC_MPI_ENV}")
else()
  message(STATUS "mpirun not found: rpc_mpi_boot tests not registered")
endif()

# Threaded stress in plain C (runs under TSan, where Criterion cannot start).
add_executable(rpc_stress rpc/rpc_stress.c)
target_link_libraries(rpc_stress PRIVATE hdmlp_static)
target_include_directories(rpc_stress PRIVATE ${PROJECT_SOURCE_DIR}/rpc)
add_test(NAME rpc_stress COMMAND rpc_stress)
set_tests_properties(rpc_stress PROPERTIES TIMEOUT 300 LABELS threads)
# Lending over the same-host rings with loaders and release threads (plain C, TSan).
add_executable(lend_stress rpc/lend_stress.c support/testds.c)
target_link_libraries(lend_stress PRIVATE hdmlp_static)
target_include_directories(lend_stress PRIVATE ${PROJECT_SOURCE_DIR}/rpc ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME lend_stress COMMAND lend_stress)
set_tests_properties(lend_stress PROPERTIES TIMEOUT 300 LABELS "threads;rpc"
  ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")

# Mutual TLS for the exchange, with the committed test certificates of tests/data/tls
# (regenerate with tests/data/tls/make.sh).
hdmlp_add_test(NAME test_tls
  SOURCES rpc/test_tls.c support/testds.c
  TIMEOUT 120)
target_include_directories(test_tls PRIVATE ${PROJECT_SOURCE_DIR}/rpc ${CMAKE_CURRENT_SOURCE_DIR}
  $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
set_tests_properties(test_tls PROPERTIES LABELS rpc)
