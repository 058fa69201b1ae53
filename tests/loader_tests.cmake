# Loader tests: public API and errors, properties over random parameters, randomness of
# the delivered order. tests/support/testds.c writes their datasets. Each binary runs its
# tests two at a time (--jobs=2); timeouts leave room for sanitizer builds.
hdmlp_add_test(NAME test_loader
  SOURCES test_loader.c support/testds.c
  LIBS m
  TIMEOUT 120)
hdmlp_add_test(NAME test_loader_props
  SOURCES test_loader_props.c support/testds.c
  LIBS m
  TIMEOUT 600)
hdmlp_add_test(NAME test_loader_random
  SOURCES test_loader_random.c support/testds.c
  LIBS m
  TIMEOUT 600)
# hdmlp_parse_size: the size grammar of hdmlp-bench and the Python module (pure, no I/O).
hdmlp_add_test(NAME test_units SOURCES test_units.c TIMEOUT 60)
# hdmlp-bench arguments and exit codes (tests/cli/cli_bench.sh; packs its own tiny dataset).
if(TARGET hdmlp-bench AND TARGET hdmlp-pack)
  find_program(HDMLP_BASH bash REQUIRED)
  add_test(NAME cli_bench
           COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/cli/cli_bench.sh
                   $<TARGET_FILE:hdmlp-pack> ${CMAKE_CURRENT_BINARY_DIR}/tmp/cli)
  set_tests_properties(cli_bench PROPERTIES TIMEOUT 120 LABELS "cli;loader"
    ENVIRONMENT "HDMLP_BENCH=$<TARGET_FILE:hdmlp-bench>;HDMLP_PYTHON=/usr/bin/python3")
endif()
