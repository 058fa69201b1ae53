# Reliability tests (issue 7): fuzz regression replay, crash-safe packing under SIGKILL,
# valgrind over the CLIs and examples, soak and resource limits. Scripts and helpers live
# in tests/rel/; long forms are documented in tests/fuzz/README.md and the README.
# Included from tests/CMakeLists.txt.

# ---- fuzz regression replay -------------------------------------------------------------
# Each libFuzzer target (tests/fuzz/fuzz_*.c) built without the fuzzer and linked with
# tests/rel/fuzz_replay.c: replays its seed corpus and every input that once crashed it
# (tests/fuzz/regress/TARGET/). Under the ASan build of tests/run.sh this is the sanitizer
# check of each regression.
set(REL_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR}/fuzz)
foreach(t index chunk rpc list archive)
  add_executable(fuzz_replay_${t} ${CMAKE_CURRENT_LIST_DIR}/rel/fuzz_replay.c
                 ${REL_FUZZ_DIR}/fuzz_${t}.c)
  target_link_libraries(fuzz_replay_${t} PRIVATE hdmlp_static)
  set(dirs ${REL_FUZZ_DIR}/corpus/${t})
  if(EXISTS ${REL_FUZZ_DIR}/regress/${t})
    list(APPEND dirs ${REL_FUZZ_DIR}/regress/${t})
  endif()
  add_test(NAME fuzz_replay_${t} COMMAND fuzz_replay_${t} ${dirs})
  set_tests_properties(fuzz_replay_${t} PROPERTIES TIMEOUT 120 LABELS "fuzz;rel"
    ENVIRONMENT "TMPDIR=${CMAKE_CURRENT_BINARY_DIR}/tmp")
endforeach()
target_include_directories(fuzz_replay_rpc PRIVATE ${PROJECT_SOURCE_DIR}/rpc
  $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
target_link_libraries(fuzz_replay_list PRIVATE hdmlp_packer)
target_link_libraries(fuzz_replay_archive PRIVATE hdmlp_packer)

# ---- soak and resource limits (tests/rel/soak.c) ----------------------------------------
add_executable(rel_soak ${CMAKE_CURRENT_LIST_DIR}/rel/soak.c
               ${CMAKE_CURRENT_LIST_DIR}/support/testds.c)
target_link_libraries(rel_soak PRIVATE hdmlp_static)
target_include_directories(rel_soak PRIVATE ${CMAKE_CURRENT_LIST_DIR})
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

# ---- crash-safe packing and valgrind over the CLIs ---------------------------------------
if(TARGET hdmlp-pack)
  find_program(HDMLP_BASH bash REQUIRED)
  # SIGKILL at random moments; the long form is TRIALS=500 (tests/rel/kill_pack.sh)
  add_test(NAME rel_kill_pack
           COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_LIST_DIR}/rel/kill_pack.sh
                   $<TARGET_FILE:hdmlp-pack> ${CMAKE_CURRENT_BINARY_DIR}/tmp)
  set_tests_properties(rel_kill_pack PROPERTIES TIMEOUT 180 LABELS "rel;packer"
    ENVIRONMENT "TRIALS=40;FILES=2000;SEED=1")
  # memcheck cannot run sanitizer builds
  if(NOT HDMLP_SANITIZE)
    add_test(NAME rel_valgrind
             COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_LIST_DIR}/rel/valgrind_clis.sh
                     $<TARGET_FILE:hdmlp-pack> $<TARGET_FILE:hdmlp_example_iterate>
                     $<TARGET_FILE:hdmlp-bench> ${CMAKE_CURRENT_BINARY_DIR}/tmp)
    set_tests_properties(rel_valgrind PROPERTIES TIMEOUT 900 LABELS rel SKIP_RETURN_CODE 77)
  endif()
endif()
