# Distributed hdmlp-bench tests (tests/dist/*.sh): mpirun -np 2/3/4 exactly-once and
# determinism, prefetch on vs off, peer-list bootstrap without MPI, a rank killed mid-epoch,
# plans against runs, the same-host socket vs --same-host tcp. Each script:
# bash tests/dist/NAME.sh hdmlp-bench hdmlp-pack SCRATCH; exit 77 = skipped (no mpirun).
# Label `dist`. Included from tests/CMakeLists.txt.
if(TARGET hdmlp-bench AND TARGET hdmlp-pack)
  find_program(HDMLP_DIST_BASH bash REQUIRED)
  find_program(HDMLP_DIST_MPIRUN NAMES mpirun mpiexec)
  if(EXISTS /usr/bin/python3)
    set(HDMLP_DIST_PYTHON /usr/bin/python3)
  else()
    find_program(HDMLP_DIST_PYTHON python3)
  endif()
  set(HDMLP_DIST_ENV "HDMLP_PYTHON=${HDMLP_DIST_PYTHON}")
  if(HDMLP_DIST_MPIRUN)
    list(APPEND HDMLP_DIST_ENV "HDMLP_MPIRUN=${HDMLP_DIST_MPIRUN}")
  else()
    # The scripts then skip (exit 77) or leave out their MPI parts.
    list(APPEND HDMLP_DIST_ENV "HDMLP_MPIRUN=")
  endif()
  # name:timeout (seconds; each runs in well under a minute here, mostly idle waits)
  foreach(t mpi:300 prefetch:120 peers:120 kill:120 plan:180 resume:180 launch:180
          samehost:120)
    string(REPLACE ":" ";" parts ${t})
    list(GET parts 0 name)
    list(GET parts 1 secs)
    add_test(NAME dist_${name}
             COMMAND ${HDMLP_DIST_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/dist/dist_${name}.sh
                     $<TARGET_FILE:hdmlp-bench> $<TARGET_FILE:hdmlp-pack>
                     ${CMAKE_CURRENT_BINARY_DIR}/tmp/dist)
    set_tests_properties(dist_${name} PROPERTIES
      TIMEOUT ${secs}
      SKIP_RETURN_CODE 77
      LABELS "dist"
      ENVIRONMENT "${HDMLP_DIST_ENV}")
  endforeach()
endif()
