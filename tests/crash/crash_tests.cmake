# Crash safety (ctest label rel), included from tests/CMakeLists.txt: hdmlp-pack killed
# with SIGKILL at random moments leaves either a dataset that verifies or none, and
# --force never loses the old one (kill_pack.sh; the long form is TRIALS=500).
if(TARGET hdmlp-pack)
  add_test(NAME rel_kill_pack
           COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_LIST_DIR}/kill_pack.sh
                   $<TARGET_FILE:hdmlp-pack> ${CMAKE_CURRENT_BINARY_DIR}/tmp)
  set_tests_properties(rel_kill_pack PROPERTIES TIMEOUT 180 LABELS "rel;packer"
    ENVIRONMENT "TRIALS=40;FILES=2000;SEED=1")
endif()
