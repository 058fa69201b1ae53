# Hostile input at run time (ctest label reliability), included from tests/CMakeLists.txt:
# segment files damaged under a running loader (corrupt_trials) and hostile traffic against
# a real 2-rank gRPC exchange (hostile_rpc). Longer runs: HDMLP_CORRUPT_TRIALS=1000 and
# HDMLP_HOSTILE_SECONDS=60 (see each file's header).
add_executable(corrupt_trials ${CMAKE_CURRENT_LIST_DIR}/corrupt_trials.c
  ${CMAKE_CURRENT_SOURCE_DIR}/support/testds.c)
target_link_libraries(corrupt_trials PRIVATE hdmlp_static)
target_include_directories(corrupt_trials PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME corrupt_trials COMMAND corrupt_trials)
set_tests_properties(corrupt_trials PROPERTIES TIMEOUT 300 LABELS reliability
  ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")

add_executable(hostile_rpc ${CMAKE_CURRENT_LIST_DIR}/hostile_rpc.c
  ${CMAKE_CURRENT_LIST_DIR}/hostile_rpc_exchange.c ${CMAKE_CURRENT_LIST_DIR}/hostile_rpc_payloads.c
  ${CMAKE_CURRENT_LIST_DIR}/hostile_rpc_attacker.c ${CMAKE_CURRENT_SOURCE_DIR}/support/testds.c)
target_link_libraries(hostile_rpc PRIVATE hdmlp_static PkgConfig::GRPC)
target_include_directories(hostile_rpc PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
  ${PROJECT_SOURCE_DIR}/rpc $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
add_test(NAME hostile_rpc COMMAND hostile_rpc)
set_tests_properties(hostile_rpc PROPERTIES TIMEOUT 180 LABELS "rpc;reliability"
  ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")

# Hostile peers of the same-host rings: plain C, so it also runs under TSan (label threads).
add_executable(hostile_shm ${CMAKE_CURRENT_LIST_DIR}/hostile_shm.c)
target_link_libraries(hostile_shm PRIVATE hdmlp_static)
target_include_directories(hostile_shm PRIVATE ${PROJECT_SOURCE_DIR}/rpc
  $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
add_test(NAME hostile_shm COMMAND hostile_shm)
set_tests_properties(hostile_shm PROPERTIES TIMEOUT 60 LABELS "rpc;reliability;threads")
