# hdmlp-bench: the loader benchmark CLI. Included from loader/CMakeLists.txt; links the
# shared library and sees only the public header (include/hdmlp.h).
add_executable(hdmlp-bench
  ${CMAKE_CURRENT_LIST_DIR}/hdmlp_bench_main.c
  ${CMAKE_CURRENT_LIST_DIR}/bench_args.c
  ${CMAKE_CURRENT_LIST_DIR}/bench_dist.c
  ${CMAKE_CURRENT_LIST_DIR}/bench_json.c
  ${CMAKE_CURRENT_LIST_DIR}/bench_launch.c
  ${CMAKE_CURRENT_LIST_DIR}/bench_parse.c
  ${CMAKE_CURRENT_LIST_DIR}/bench_random.c
  ${CMAKE_CURRENT_LIST_DIR}/bench_report.c)
target_link_libraries(hdmlp-bench PRIVATE hdmlp m)
install(TARGETS hdmlp-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
