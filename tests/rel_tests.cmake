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
