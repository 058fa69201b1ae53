# Distributed hdmlp-bench tests (tests/dist/*.sh), included from tests/CMakeLists.txt:
# mpirun -np 2/3/4 exactly-once and determinism, prefetch on vs off, peer-list bootstrap
# without MPI, a rank killed mid-epoch, plans against runs, the same-host socket vs
# --same-host tcp, TLS, ranks reading from object storage. Each script: bash tests/dist/NAME.sh hdmlp-bench hdmlp-pack SCRATCH;
# exit 77 = skipped (no mpirun).
if(TARGET hdmlp-bench AND TARGET hdmlp-pack)
  set(HDMLP_DIST_ENV "HDMLP_PYTHON=${HDMLP_TEST_PYTHON}")
  if(HDMLP_MPIRUN)
    list(APPEND HDMLP_DIST_ENV "HDMLP_MPIRUN=${HDMLP_MPIRUN}")
  else()
    # The scripts then skip (exit 77) or leave out their MPI parts.
    list(APPEND HDMLP_DIST_ENV "HDMLP_MPIRUN=")
  endif()
  # name:timeout (seconds; each runs in well under a minute here, mostly idle waits)
  foreach(t mpi:300 prefetch:120 peers:120 kill:120 plan:180 resume:180 launch:180
          samehost:120 objstore:120)
    string(REPLACE ":" ";" parts ${t})
    list(GET parts 0 name)
    list(GET parts 1 secs)
    add_test(NAME dist_${name}
             COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_LIST_DIR}/dist_${name}.sh
                     $<TARGET_FILE:hdmlp-bench> $<TARGET_FILE:hdmlp-pack>
                     ${CMAKE_CURRENT_BINARY_DIR}/tmp/dist)
    set_tests_properties(dist_${name} PROPERTIES
      TIMEOUT ${secs}
      SKIP_RETURN_CODE 77
      LABELS "dist"
      ENVIRONMENT "${HDMLP_DIST_ENV}")
  endforeach()

  # hdmlp-bench with --tls-* over --peers and --mpi (the certificates of tests/data/tls).
  add_test(NAME dist_tls
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/dist_tls.sh $<TARGET_FILE:hdmlp-bench>
                   $<TARGET_FILE:hdmlp-pack> ${CMAKE_CURRENT_BINARY_DIR}/tmp/dist)
  set_tests_properties(dist_tls PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "rpc;dist"
    ENVIRONMENT "HDMLP_MPIRUN=${HDMLP_MPIRUN};HDMLP_PYTHON=/usr/bin/python3")
endif()
