# The .deb's Depends for a cross build, at cpack time (cmake/packaging.cmake includes it from the
# per-generator file): each soname the binary NEEDs, mapped through the shlibs control files of the
# sysroot's packages (SP_SHLIBS, written by scripts/arm64-sysroot.sh). This is what dpkg-shlibdeps does
# for a library without a symbols file; dpkg-shlibdeps itself cannot run here, as it asks the host's dpkg
# database which package ships each library. The versions are the packages' shlibs minimums, so they may
# be later than what symbols files would allow (libc6 (>= 2.36) rather than the oldest symbol's).
#   in: SP_READELF, SP_BINARY, SP_SHLIBS    out: CPACK_DEBIAN_PACKAGE_DEPENDS
execute_process(COMMAND "${SP_READELF}" -d "${SP_BINARY}" OUTPUT_VARIABLE _dyn RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${SP_READELF} -d ${SP_BINARY} failed")
endif()
file(STRINGS "${SP_SHLIBS}" _shlibs)
# A "[" would keep CMake from splitting the list: readelf's brackets become <>.
string(REPLACE "[" "<" _dyn "${_dyn}")
string(REPLACE "]" ">" _dyn "${_dyn}")
string(REGEX MATCHALL "Shared library: <[^>]+" _needed "${_dyn}")
set(_deps)
foreach(_n IN LISTS _needed)
  string(REPLACE "Shared library: <" "" _n "${_n}")
  # A shlibs line is "<library> <version> <dependency>": libfoo.so.1 is "libfoo 1", libfoo-1.2.so "libfoo 1.2".
  # (Two ifs: a failed MATCHES clears CMAKE_MATCH_n.)
  if(_n MATCHES "^(.+)\\.so\\.(.+)$")
    set(_key "${CMAKE_MATCH_1} ${CMAKE_MATCH_2} ")
  elseif(_n MATCHES "^(.+)-([0-9.]+)\\.so$")
    set(_key "${CMAKE_MATCH_1} ${CMAKE_MATCH_2} ")
  else()
    message(FATAL_ERROR "${_n}: a soname of neither shlibs form")
  endif()
  string(LENGTH "${_key}" _len)
  set(_dep "")
  foreach(_line IN LISTS _shlibs)
    string(SUBSTRING "${_line}" 0 ${_len} _head)
    if(_head STREQUAL _key)
      string(SUBSTRING "${_line}" ${_len} -1 _dep)
      break()
    endif()
  endforeach()
  if(_dep STREQUAL "")
    message(FATAL_ERROR "${_n} (NEEDED by ${SP_BINARY}): no package's shlibs in ${SP_SHLIBS} names it")
  endif()
  list(APPEND _deps "${_dep}")
endforeach()
list(REMOVE_DUPLICATES _deps)
list(SORT _deps)
list(JOIN _deps ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
message(STATUS "Depends: ${CPACK_DEBIAN_PACKAGE_DEPENDS}")
