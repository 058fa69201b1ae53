# Command-line tests (tests/cli/*.sh), included from tests/CMakeLists.txt. Each is a
# standalone bash script: bash tests/cli/NAME.sh PATH/TO/hdmlp-pack SCRATCH (see
# tests/cli/lib.sh). Exit 77 = skipped (e.g. no tmpfs mount permission).
if(TARGET hdmlp-pack)
  # dsdump: prints a dataset's samples through the public API only (hdmlp.h).
  add_executable(hdmlp_dsdump ${CMAKE_CURRENT_LIST_DIR}/dsdump.c)
  target_link_libraries(hdmlp_dsdump PRIVATE hdmlp)

  # hdmlp-pack
  foreach(t usage realdata options archives badinput verify diskfull images accounting stream
            webdataset)
    add_test(NAME cli_${t}
             COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_LIST_DIR}/cli_${t}.sh
                     $<TARGET_FILE:hdmlp-pack> ${CMAKE_CURRENT_BINARY_DIR}/tmp/cli)
    set_tests_properties(cli_${t} PROPERTIES
      TIMEOUT 120
      SKIP_RETURN_CODE 77
      LABELS "cli;packer"
      ENVIRONMENT "HDMLP_DSDUMP=$<TARGET_FILE:hdmlp_dsdump>;HDMLP_PYTHON=${HDMLP_TEST_PYTHON};LC_ALL=C.UTF-8")
  endforeach()
  # each script uses its own subdirectory of tmp/cli; the disk-full test mounts a tmpfs
  set_tests_properties(cli_diskfull cli_stream PROPERTIES RUN_SERIAL TRUE)
endif()

# hdmlp-bench arguments and exit codes (cli_bench.sh; packs its own tiny dataset).
if(TARGET hdmlp-bench AND TARGET hdmlp-pack)
  add_test(NAME cli_bench
           COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_LIST_DIR}/cli_bench.sh
                   $<TARGET_FILE:hdmlp-pack> ${CMAKE_CURRENT_BINARY_DIR}/tmp/cli)
  set_tests_properties(cli_bench PROPERTIES TIMEOUT 120 LABELS "cli;loader"
    ENVIRONMENT "HDMLP_BENCH=$<TARGET_FILE:hdmlp-bench>;HDMLP_PYTHON=/usr/bin/python3")
endif()
