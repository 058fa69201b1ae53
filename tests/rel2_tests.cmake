# Reliability trials in plain C (tests/rel2/): corruption of segment files at run time
# (corrupt_trials) and hostile traffic against a real 2-rank gRPC exchange (hostile_rpc).
# Included from tests/CMakeLists.txt. Longer runs: HDMLP_CORRUPT_TRIALS=1000 and
# HDMLP_HOSTILE_SECONDS=60 (see each file's header).
add_executable(corrupt_trials ${CMAKE_CURRENT_LIST_DIR}/rel2/corrupt_trials.c
  ${CMAKE_CURRENT_LIST_DIR}/support/testds.c)
target_link_libraries(corrupt_trials PRIVATE hdmlp_static)
target_include_directories(corrupt_trials PRIVATE ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME corrupt_trials COMMAND corrupt_trials)
set_tests_properties(corrupt_trials PROPERTIES TIMEOUT 300 LABELS reliability
  ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")

add_executable(hostile_rpc ${CMAKE_CURRENT_LIST_DIR}/rel2/hostile_rpc.c
  ${CMAKE_CURRENT_LIST_DIR}/support/testds.c)
target_link_libraries(hostile_rpc PRIVATE hdmlp_static PkgConfig::GRPC)
target_include_directories(hostile_rpc PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/rpc
  $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
add_test(NAME hostile_rpc COMMAND hostile_rpc)
set_tests_properties(hostile_rpc PROPERTIES TIMEOUT 60 LABELS "rpc;reliability"
  ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")
