# The cost model in a benchmark cell (tests/cell/), included from tests/CMakeLists.txt:
# default settings pick whole or merged reads where operations are dear and ranges where
# bandwidth is, and follow a throttle changed mid-run. Root and cgroup v1 only (SKIP
# otherwise). Not in sanitizer builds: their shadow memory does not fit a cell sized for the
# loader's budget.
if(NOT HDMLP_SANITIZE)
  add_executable(cost_follow ${CMAKE_CURRENT_LIST_DIR}/cost_follow.c)
  target_link_libraries(cost_follow PRIVATE hdmlp_static)
  add_test(NAME cell_cost COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cost_cell.sh
    ${PROJECT_BINARY_DIR})
  set_tests_properties(cell_cost PROPERTIES TIMEOUT 240 LABELS cell RUN_SERIAL TRUE
    SKIP_REGULAR_EXPRESSION "SKIP:"
    ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")
endif()
