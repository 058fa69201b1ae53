# rpc/ tests: codec and gRPC transport on loopback (tests/test_rpc.c), its same-host path
# (tests/test_samehost.c), its optional TLS
# (tests/test_tls.c, tests/dist/dist_tls.sh), and the MPI bootstrap under mpirun
# (tests/rpc_mpi_boot.c). Included from tests/CMakeLists.txt.
hdmlp_add_test(NAME test_rpc
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_rpc.c ${CMAKE_CURRENT_LIST_DIR}/support/testds.c
  LIBS PkgConfig::GRPC
  TIMEOUT 600)
target_include_directories(test_rpc PRIVATE ${PROJECT_SOURCE_DIR}/rpc ${CMAKE_CURRENT_LIST_DIR}
  $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)

# The same-host path (a Unix socket between ranks of one host) and its TCP override.
hdmlp_add_test(NAME test_samehost
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_samehost.c ${CMAKE_CURRENT_LIST_DIR}/support/testds.c
  TIMEOUT 120)
target_include_directories(test_samehost PRIVATE ${PROJECT_SOURCE_DIR}/rpc
  ${CMAKE_CURRENT_LIST_DIR} $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
set_tests_properties(test_samehost PROPERTIES LABELS rpc)

# MPI bootstrap under mpirun (skipped when mpirun is missing). OpenMPI as root needs the
# ALLOW_RUN_AS_ROOT pair; ob1/vader avoid probing UCX (TOOLCHAIN.md).
add_executable(rpc_mpi_boot ${CMAKE_CURRENT_LIST_DIR}/rpc_mpi_boot.c)
target_link_libraries(rpc_mpi_boot PRIVATE hdmlp_static MPI::MPI_C)
target_include_directories(rpc_mpi_boot PRIVATE ${PROJECT_SOURCE_DIR}/rpc)
find_program(HDMLP_MPIRUN NAMES mpirun mpiexec)
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
add_executable(rpc_stress ${CMAKE_CURRENT_LIST_DIR}/rpc_stress.c)
target_link_libraries(rpc_stress PRIVATE hdmlp_static)
target_include_directories(rpc_stress PRIVATE ${PROJECT_SOURCE_DIR}/rpc)
add_test(NAME rpc_stress COMMAND rpc_stress)
set_tests_properties(rpc_stress PROPERTIES TIMEOUT 300 LABELS threads)

# Mutual TLS for the exchange (tests/test_tls.c), with the committed test certificates of
# tests/data/tls (regenerate with tests/data/tls/make.sh).
hdmlp_add_test(NAME test_tls
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tls.c ${CMAKE_CURRENT_LIST_DIR}/support/testds.c
  TIMEOUT 120)
target_include_directories(test_tls PRIVATE ${PROJECT_SOURCE_DIR}/rpc ${CMAKE_CURRENT_LIST_DIR}
  $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
set_tests_properties(test_tls PROPERTIES LABELS rpc)
# hdmlp-bench with --tls-* over --peers and --mpi (tests/dist/dist_tls.sh; exit 77 = skipped).
if(TARGET hdmlp-bench AND TARGET hdmlp-pack)
  add_test(NAME dist_tls
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/dist/dist_tls.sh $<TARGET_FILE:hdmlp-bench>
                   $<TARGET_FILE:hdmlp-pack> ${CMAKE_CURRENT_BINARY_DIR}/tmp/dist)
  set_tests_properties(dist_tls PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "rpc;dist"
    ENVIRONMENT "HDMLP_MPIRUN=${HDMLP_MPIRUN};HDMLP_PYTHON=/usr/bin/python3")
endif()
