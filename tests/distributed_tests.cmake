# The distributed protocol over the in-process transport (no network).
hdmlp_add_test(NAME test_distributed
  SOURCES test_distributed.c support/testds.c support/fakenet.c
  TIMEOUT 300)

# Threading stress without Criterion, so it also runs under TSan (Criterion does not).
add_executable(stress_threads stress_threads.c support/testds.c support/fakenet.c)
target_link_libraries(stress_threads PRIVATE hdmlp_static)
target_include_directories(stress_threads PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME stress_threads COMMAND stress_threads)
set_tests_properties(stress_threads PROPERTIES TIMEOUT 300 LABELS threads
  ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")
