# Installing the Python package as users do (tests/pkg/pkg_bundle.py), included from
# tests/CMakeLists.txt: `pip install ./python` with no variables (setup.py builds and
# bundles libhdmlp), a wheel used in a second venv after the build tree is gone, and the
# distributed module missing. It compiles the library with its own (uninstrumented) CMake
# build, so it is left out of sanitizer builds.
if(NOT HDMLP_SANITIZE AND TARGET hdmlp-pack)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    add_test(NAME pkg_bundle
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/pkg_bundle.py
                     ${CMAKE_CURRENT_BINARY_DIR}/tmp/pkg_bundle)
    set_tests_properties(pkg_bundle PROPERTIES TIMEOUT 900 LABELS "pkg"
      ENVIRONMENT "HDMLP_PACK=$<TARGET_FILE:hdmlp-pack>")
  endif()
endif()
