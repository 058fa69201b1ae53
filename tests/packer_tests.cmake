# tests for this module are registered here

# ---- hdmlp-pack CLI tests (tests/cli/*.sh) and pack benchmarks (tests/bench/) ----------
# Each CLI test is a standalone bash script: bash tests/cli/NAME.sh PATH/TO/hdmlp-pack SCRATCH
# (see tests/cli/lib.sh). Exit 77 = skipped (e.g. no tmpfs mount permission).
if(TARGET hdmlp-pack)
  # dsdump: prints a dataset's samples through the public API only (hdmlp.h).
  add_executable(hdmlp_dsdump cli/dsdump.c)
  target_link_libraries(hdmlp_dsdump PRIVATE hdmlp)

  find_program(HDMLP_BASH bash REQUIRED)
  if(EXISTS /usr/bin/python3)
    set(HDMLP_TEST_PYTHON /usr/bin/python3)
  else()
    find_program(HDMLP_TEST_PYTHON python3)
  endif()

  foreach(t usage realdata options archives badinput verify diskfull)
    add_test(NAME cli_${t}
             COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/cli/cli_${t}.sh
                     $<TARGET_FILE:hdmlp-pack> ${CMAKE_CURRENT_BINARY_DIR}/tmp/cli)
    set_tests_properties(cli_${t} PROPERTIES
      TIMEOUT 120
      SKIP_RETURN_CODE 77
      LABELS "cli;packer"
      ENVIRONMENT "HDMLP_DSDUMP=$<TARGET_FILE:hdmlp_dsdump>;HDMLP_PYTHON=${HDMLP_TEST_PYTHON};LC_ALL=C.UTF-8")
  endforeach()
  # each script uses its own subdirectory of tmp/cli; the disk-full test mounts a tmpfs
  set_tests_properties(cli_diskfull PROPERTIES RUN_SERIAL TRUE)

  # Quick smoke run of the pack benchmark (2k files, warm: it must not drop the caches of
  # the whole machine under ctest); the full run is manual (README).
  add_test(NAME bench_pack_smoke
           COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/bench/bench_pack.sh --small --keep-data
                   --no-drop --pack $<TARGET_FILE:hdmlp-pack> --work ${CMAKE_CURRENT_BINARY_DIR}/tmp/bench_pack
                   --out ${CMAKE_CURRENT_BINARY_DIR}/tmp/bench_pack_small.json)
  set_tests_properties(bench_pack_smoke PROPERTIES TIMEOUT 180 LABELS "bench;packer" RUN_SERIAL TRUE)

  # Index-open benchmark (not a ctest test): bench_index_open DIR [--runs N] [--cold]
  add_executable(bench_index_open bench/bench_index_open.c)
  target_link_libraries(bench_index_open PRIVATE hdmlp)
endif()
