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

# C against `cmake --install` of this build (tests/pkg/pkg_config.sh): programs built with
# pkg-config (hdmlp, --static, hdmlp-static) run without ldconfig; the installed tools and
# Python package work from the prefix. Installs instrumented libraries under sanitizers,
# which a plain gcc link cannot use: left out there too.
if(NOT HDMLP_SANITIZE AND TARGET hdmlp-pack AND TARGET hdmlp-bench)
  find_program(HDMLP_PKG_CONFIG_EXE pkg-config)
  if(HDMLP_PKG_CONFIG_EXE)
    # python/ is added after tests/: the extension target is not known yet.
    set(hdmlp_pkg_py "")
    find_package(Python3 COMPONENTS Interpreter)
    if(HDMLP_PYTHON AND Python3_Interpreter_FOUND)
      set(hdmlp_pkg_py ${Python3_EXECUTABLE})
    endif()
    add_test(NAME pkg_config
             COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_LIST_DIR}/pkg_config.sh ${PROJECT_BINARY_DIR}
                     ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/tmp/pkg_config
                     ${CMAKE_C_COMPILER} ${hdmlp_pkg_py})
    set_tests_properties(pkg_config PROPERTIES TIMEOUT 300 LABELS "pkg")
  endif()
endif()
