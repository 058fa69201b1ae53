# Fuzz regression replay, included from tests/CMakeLists.txt. Each libFuzzer target
# (tests/fuzz/fuzz_NAME.c) built without the fuzzer and linked with fuzz_replay.c: replays
# its seed corpus and every input that once crashed it (tests/fuzz/regress/NAME/). Under
# the ASan build of tests/run.sh this is the sanitizer check of each regression. Fuzzing
# itself: tests/fuzz/run.sh and tests/fuzz/README.md. A target's first regress/ directory is
# seen at the next configure (cmake -S . -B build).
foreach(t index chunk rpc list archive image manifest)
  add_executable(fuzz_replay_${t} ${CMAKE_CURRENT_LIST_DIR}/fuzz_replay.c
                 ${CMAKE_CURRENT_LIST_DIR}/fuzz_${t}.c)
  target_link_libraries(fuzz_replay_${t} PRIVATE hdmlp_static)
  set(dirs ${CMAKE_CURRENT_LIST_DIR}/corpus/${t})
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/regress/${t})
    list(APPEND dirs ${CMAKE_CURRENT_LIST_DIR}/regress/${t})
  endif()
  add_test(NAME fuzz_replay_${t} COMMAND fuzz_replay_${t} ${dirs})
  set_tests_properties(fuzz_replay_${t} PROPERTIES TIMEOUT 120 LABELS "fuzz;rel"
    ENVIRONMENT "TMPDIR=${CMAKE_CURRENT_BINARY_DIR}/tmp")
endforeach()
target_include_directories(fuzz_replay_rpc PRIVATE ${PROJECT_SOURCE_DIR}/rpc
  $<TARGET_PROPERTY:hdmlp_rpc,INTERFACE_INCLUDE_DIRECTORIES>)
target_link_libraries(fuzz_replay_list PRIVATE hdmlp_packer)
target_link_libraries(fuzz_replay_archive PRIVATE hdmlp_packer)
target_link_libraries(fuzz_replay_manifest PRIVATE hdmlp_packer)
