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

# hdmlp-pack links the data library, not libhdmlp (tests/pkg/pkg_pack_links.sh): its link
# closure as configured, beside ldd and nm of the binary. hdmlp_link_closure walks the
# root's links, every target's link interface and the object libraries in their sources,
# and writes each target, library and flag met, one a line. Inside generator expressions
# the linked names count ($<LINK_ONLY:x>, $<$<BOOL:c>:x> whatever c is: the check can only
# be stricter than the link). An imported target not visible from here (pkg_check_modules
# without GLOBAL in another folder) is written by name, not walked.
function(hdmlp_link_closure root out)
  set(seen "")
  set(todo ${root})
  while(todo)
    list(POP_FRONT todo item)
    if(item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${item})
    if(NOT TARGET ${item})
      continue()
    endif()
    get_target_property(imported ${item} IMPORTED)
    get_target_property(type ${item} TYPE)
    set(props INTERFACE_LINK_LIBRARIES)
    if(NOT imported AND NOT type STREQUAL "INTERFACE_LIBRARY")
      list(APPEND props SOURCES)
      if(item STREQUAL root)
        list(APPEND props LINK_LIBRARIES)
      endif()
    endif()
    foreach(prop IN LISTS props)
      get_target_property(refs ${item} ${prop})
      if(NOT refs)
        continue()
      endif()
      foreach(ref IN LISTS refs)
        string(REPLACE "$<" ";" parts "${ref}")
        string(REPLACE ">" ";" parts "${parts}")
        foreach(part IN LISTS parts)
          set(name "")
          if(part MATCHES "^TARGET_OBJECTS:(.+)$")
            set(name ${CMAKE_MATCH_1})
          elseif(prop STREQUAL "SOURCES")
            continue()
          elseif(part MATCHES "^LINK_ONLY:(.+)$")
            set(name ${CMAKE_MATCH_1})
          elseif(part MATCHES "^:(.+)$")
            set(name ${CMAKE_MATCH_1})
          elseif(NOT part MATCHES "^[A-Z_]+:[^:]" AND NOT part STREQUAL "")
            set(name ${part})
          endif()
          if(NOT name STREQUAL "")
            list(APPEND todo "${name}")
          endif()
        endforeach()
      endforeach()
    endforeach()
  endwhile()
  list(JOIN seen "\n" text)
  file(WRITE ${out} "${text}\n")
endfunction()
if(TARGET hdmlp-pack)
  hdmlp_link_closure(hdmlp-pack ${CMAKE_CURRENT_BINARY_DIR}/pkg_pack_links.txt)
  add_test(NAME pkg_pack_links
           COMMAND ${HDMLP_BASH} ${CMAKE_CURRENT_LIST_DIR}/pkg_pack_links.sh
                   $<TARGET_FILE:hdmlp-pack> ${CMAKE_CURRENT_BINARY_DIR}/pkg_pack_links.txt)
  set_tests_properties(pkg_pack_links PROPERTIES TIMEOUT 60 LABELS "pkg;packer")
endif()
