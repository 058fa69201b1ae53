# Resource use (ctest label rel), included from tests/CMakeLists.txt: soak*.c (RSS and file
# descriptors flat over epochs and create/free cycles, the memory budget with 1-16 I/O
# threads, a full SSD cache, too few file descriptors) and valgrind memcheck over the CLIs
# and the C example (valgrind_clis.sh). Long forms are in the README.
add_executable(rel_soak ${CMAKE_CURRENT_LIST_DIR}/soak.c ${CMAKE_CURRENT_LIST_DIR}/soak_budget.c
               ${CMAKE_CURRENT_LIST_DIR}/soak_limits.c ${CMAKE_CURRENT_LIST_DIR}/soak_measure.c
               ${CMAKE_CURRENT_LIST_DIR}/soak_run.c ${CMAKE_CURRENT_SOURCE_DIR}/support/testds.c)
target_link_libraries(rel_soak PRIVATE hdmlp_static)
target_include_directories(rel_soak PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
set(REL_ENV "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")
# the soak also runs under TSan (label threads, tests/run.sh)
add_test(NAME rel_soak COMMAND rel_soak soak 20)
set_tests_properties(rel_soak PROPERTIES TIMEOUT 300 LABELS "threads;rel" ENVIRONMENT "${REL_ENV}")
add_test(NAME rel_budget COMMAND rel_soak budget)
set_tests_properties(rel_budget PROPERTIES TIMEOUT 300 LABELS rel ENVIRONMENT "${REL_ENV}")
add_test(NAME rel_ssd_enospc COMMAND rel_soak ssd-enospc)
set_tests_properties(rel_ssd_enospc PROPERTIES TIMEOUT 120 LABELS rel SKIP_RETURN_CODE 77
  RUN_SERIAL TRUE ENVIRONMENT "${REL_ENV}")
add_test(NAME rel_emfile COMMAND rel_soak emfile)
set_tests_properties(rel_emfile PROPERTIES TIMEOUT 120 LABELS rel ENVIRONMENT "${REL_ENV}")

# memcheck cannot run sanitizer builds
if(TARGET hdmlp-pack AND NOT HDMLP_SANITIZE)
  add_test(NAME rel_valgrind
           COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_LIST_DIR}/valgrind_clis.sh
                   $<TARGET_FILE:hdmlp-pack> $<TARGET_FILE:hdmlp_example_iterate>
                   $<TARGET_FILE:hdmlp-bench> ${CMAKE_CURRENT_BINARY_DIR}/tmp)
  set_tests_properties(rel_valgrind PROPERTIES TIMEOUT 900 LABELS rel SKIP_RETURN_CODE 77)
endif()
