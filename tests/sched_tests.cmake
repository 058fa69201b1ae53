# Scheduler, sampler and refill-plan tests (pure policy, no I/O).
hdmlp_add_test(NAME test_sched SOURCES test_sched.c TIMEOUT 180)
hdmlp_add_test(NAME test_costmodel SOURCES test_costmodel.c LIBS m TIMEOUT 60)
hdmlp_add_test(NAME test_forecast
  SOURCES test_forecast.c support/testds.c support/fakenet.c TIMEOUT 300)

# Planner time at ImageNet scale (a benchmark, not a ctest test).
add_executable(bench_forecast bench/bench_forecast.c)
target_link_libraries(bench_forecast PRIVATE hdmlp_static m)
hdmlp_add_test(NAME test_tiers SOURCES test_tiers.c support/testds.c TIMEOUT 300)
hdmlp_add_test(NAME test_reliability
  SOURCES test_reliability.c support/testds.c support/fakenet.c TIMEOUT 300)
