# The loader's tests by subsystem (tests/loader/<folder>/ mirrors loader/<folder>/),
# included from tests/CMakeLists.txt (paths relative to tests/).

# ---- datasets (tests/support/testds.c writes the test datasets) -------------------------
hdmlp_add_test(NAME test_dataset
  SOURCES loader/dataset/test_dataset.c loader/dataset/test_dataset_corrupt.c
          loader/dataset/test_dataset_tables.c
          loader/dataset/test_dataset_v2.c loader/dataset/test_dataset_v2_corrupt.c
          loader/dataset/test_dataset_v2_remote.c
          support/dataset_fixture.c support/objstore_fixture.c support/testds.c
  TIMEOUT 300)
# Version 2's remote case runs tests/objstore/objstore_server.py (skips without python3).
target_compile_definitions(test_dataset PRIVATE HDMLP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# ---- loader: public API and errors, properties over random parameters, randomness of the
# delivered order. Each binary runs its tests two at a time (--jobs=2); timeouts leave room
# for sanitizer builds.
hdmlp_add_test(NAME test_loader
  SOURCES loader/runtime/test_loader.c loader/runtime/test_loader_config.c
          loader/runtime/test_loader_batches.c loader/runtime/test_loader_errors.c
          loader/runtime/test_loader_wait.c loader/runtime/test_loader_budget.c
          loader/runtime/test_loader_stats_size.c loader/runtime/test_loader_tables.c
          loader/runtime/test_loader_fields.c
          support/loader_fixture.c support/release_queue.c support/testds.c
  LIBS m
  TIMEOUT 120)
hdmlp_add_test(NAME test_loader_props
  SOURCES loader/runtime/test_loader_props.c loader/runtime/test_loader_props_memory.c
          loader/runtime/test_loader_props_order.c
          support/props_case.c support/props_run.c support/testds.c
  LIBS m
  TIMEOUT 600)
hdmlp_add_test(NAME test_loader_random
  SOURCES loader/runtime/test_loader_random.c support/testds.c
  LIBS m
  TIMEOUT 600)
# The image pipeline: decoding, resampling, crop rules (units) and the loader with it on.
hdmlp_add_test(NAME test_image_decode
  SOURCES loader/image/test_image_decode.c support/testimg.c support/testds.c
  LIBS hdmlp_packer m
  TIMEOUT 120)
hdmlp_add_test(NAME test_image_aug
  SOURCES loader/image/test_image_aug.c
  LIBS m
  TIMEOUT 120)
hdmlp_add_test(NAME test_image_loader
  SOURCES loader/image/test_image_loader.c support/testimg.c support/testds.c
          support/fakenet.c
  LIBS hdmlp_packer m
  TIMEOUT 300)
hdmlp_add_test(NAME test_image_errors
  SOURCES loader/image/test_image_errors.c support/testimg.c support/testds.c
  LIBS hdmlp_packer m
  TIMEOUT 300)
hdmlp_add_test(NAME test_image_pool
  SOURCES loader/image/test_image_pool.c support/testimg.c support/testds.c
  LIBS hdmlp_packer m
  TIMEOUT 300)
# examples/image_batches.c on photographs Pillow draws, packed with hdmlp-pack.
if(TARGET hdmlp-pack AND TARGET hdmlp_example_image_batches)
  add_test(NAME test_image_example
           COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/loader/image/test_image_example.sh
                   $<TARGET_FILE:hdmlp-pack> $<TARGET_FILE:hdmlp_example_image_batches>
                   ${HDMLP_TEST_PYTHON} ${CMAKE_CURRENT_BINARY_DIR}/tmp)
  set_tests_properties(test_image_example PROPERTIES TIMEOUT 120)
endif()
# units_parse_size: the size grammar of hdmlp-bench, hdmlp-pack and the Python module
# (loader/config/loader_units.c, compiled into each; pure, no I/O).
hdmlp_add_test(NAME test_units
  SOURCES loader/config/test_units.c ${PROJECT_SOURCE_DIR}/loader/config/loader_units.c
  TIMEOUT 60)

# ---- scheduler, sampler, refill plans, cost model, forecast, tiers (policy) --------------
hdmlp_add_test(NAME test_sched SOURCES loader/protocol/test_sched.c
  loader/protocol/test_sampler.c support/memds.c TIMEOUT 180)
# The budget's owner: its split against the limits the loader had, shares adding up.
hdmlp_add_test(NAME test_budget SOURCES loader/protocol/test_budget.c support/memds.c TIMEOUT 60)
hdmlp_add_test(NAME test_costmodel SOURCES loader/cost/test_costmodel.c LIBS m TIMEOUT 60)
hdmlp_add_test(NAME test_forecast
  SOURCES loader/runtime/test_forecast.c support/testds.c support/fakenet.c TIMEOUT 300)
hdmlp_add_test(NAME test_tiers SOURCES loader/tiers/test_tiers.c support/testds.c TIMEOUT 300)
hdmlp_add_test(NAME test_reliability
  SOURCES loader/runtime/test_reliability.c support/testds.c support/fakenet.c TIMEOUT 300)

# ---- object-store sources without a network: SigV4 vectors, URLs, AWS config ---------------
hdmlp_add_test(NAME test_objstore_sigv4
  SOURCES loader/objstore/test_objstore_sigv4.c support/testds.c
  LIBS PkgConfig::CURL PkgConfig::LIBCRYPTO
  TIMEOUT 60)

# Against nginx and tests/objstore/objstore_server.py on 127.0.0.1 (skips without them).
hdmlp_add_test(NAME test_objstore
  SOURCES loader/objstore/test_objstore.c loader/objstore/test_objstore_s3.c
          loader/objstore/test_objstore_strict.c support/objstore_fixture.c
          support/testds.c
  TIMEOUT 300)
target_compile_definitions(test_objstore PRIVATE HDMLP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# The same server on 127.0.0.1:80 for its default-port case as test_objstore_rgw's servers.
set_tests_properties(test_objstore PROPERTIES RESOURCE_LOCK objstore_port80)
# objstore_server.py's own rejections (region, scope date, clock skew, unsigned headers).
add_test(NAME test_objstore_server
  COMMAND ${HDMLP_TEST_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/objstore/objstore_server_test.py)
set_tests_properties(test_objstore_server PROPERTIES TIMEOUT 60)
# The object-storage suite against objstore_server.py and Ceph's radosgw (one node on
# 127.0.0.1, started and stopped by tests/objstore/rgw_suite.sh; fails if it cannot start).
add_executable(test_objstore_remote
  loader/objstore/test_objstore_remote.c support/objstore_fixture.c support/testds.c)
target_link_libraries(test_objstore_remote PRIVATE hdmlp_static PkgConfig::CRITERION)
target_include_directories(test_objstore_remote PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(test_objstore_remote PRIVATE HDMLP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
if(TARGET hdmlp-pack)
  add_test(NAME test_objstore_rgw
           COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/objstore/rgw_suite.sh
                   $<TARGET_FILE:test_objstore_remote> $<TARGET_FILE:hdmlp-pack>
                   ${HDMLP_TEST_PYTHON} ${CMAKE_CURRENT_BINARY_DIR}/tmp)
  set_tests_properties(test_objstore_rgw PROPERTIES TIMEOUT 600 RESOURCE_LOCK objstore_port80
    ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")
endif()

# ---- I/O engines (loader_io.c, loader_io_uring.c); io_uring cases skip without io_uring --
hdmlp_add_test(NAME test_io
  SOURCES loader/io/test_io.c
  TIMEOUT 60)
# Chunk sources (loader_chunksrc*.c, loader_io_store.c): remote segments against nginx on
# 127.0.0.1 (those cases skip without it), the RAM and SSD tiers' sources.
hdmlp_add_test(NAME test_chunksrc
  SOURCES loader/io/test_chunksrc.c support/objstore_fixture.c support/testds.c
          support/ds_record.c
  TIMEOUT 120)
target_compile_definitions(test_chunksrc PRIVATE HDMLP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# ---- the distributed protocol over the in-process transport (no network) ----------------
hdmlp_add_test(NAME test_distributed
  SOURCES loader/ranks/test_distributed.c support/testds.c support/fakenet.c
  TIMEOUT 300)

# ---- per-GPU balance: the node board, its policy, local ranks with it on and off ---------
hdmlp_add_test(NAME test_balance
  SOURCES loader/ranks/test_balance.c support/testds.c support/fakenet.c
  TIMEOUT 300)
# The same under TSan (plain C, label threads).
add_executable(balance_threads loader/ranks/balance_threads.c support/testds.c
  support/fakenet.c)
target_link_libraries(balance_threads PRIVATE hdmlp_static)
target_include_directories(balance_threads PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME balance_threads COMMAND balance_threads)
set_tests_properties(balance_threads PROPERTIES TIMEOUT 300 LABELS threads
  ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")

# Threading stress without Criterion, so it also runs under TSan (Criterion does not).
add_executable(stress_threads loader/runtime/stress_threads.c support/release_queue.c
  support/testds.c support/fakenet.c)
target_link_libraries(stress_threads PRIVATE hdmlp_static)
target_include_directories(stress_threads PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME stress_threads COMMAND stress_threads)
set_tests_properties(stress_threads PROPERTIES TIMEOUT 300 LABELS threads
  ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")
# The image pipeline's threads, the same way (plain C, label threads).
add_executable(test_image_threads loader/image/test_image_threads.c support/release_queue.c
  support/testimg.c support/testds.c)
target_link_libraries(test_image_threads PRIVATE hdmlp_static hdmlp_packer)
target_include_directories(test_image_threads PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME test_image_threads COMMAND test_image_threads)
set_tests_properties(test_image_threads PROPERTIES TIMEOUT 300 LABELS threads
  ENVIRONMENT "HDMLP_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp")

# ---- storage probe and cost model (loader_probe.c, loader_costmodel.c): bounds, errors,
# scratch clean-up, this machine's figures, and (where cgroup v1 blkio is writable) a
# throttled disk.
hdmlp_add_test(NAME test_probe
  SOURCES loader/cost/test_probe.c loader/cost/test_probe_targets.c
          loader/cost/test_probe_throttle.c support/probe_fixture.c
          support/testds.c
  LIBS m
  TIMEOUT 180)

# A dataset with fields for the Python tests (tests/python/test_fields.py, HDMLP_MKDS_FIELDS).
add_executable(mkds_fields support/mkds_fields.c support/testds.c)
target_link_libraries(mkds_fields PRIVATE hdmlp_static)
target_include_directories(mkds_fields PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
