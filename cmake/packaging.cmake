# Release artifacts, built by `scripts/package.sh` (cpack in a build tree):
#   sockpressure-exporter_<version>-1_<arch>.deb      Debian/Ubuntu: /usr/bin, the systemd unit, a conffile in
#                                                     /etc/default, docs; Depends from dpkg-shlibdeps
#   sockpressure-exporter-<version>-linux-<arch>.tar.gz  the same binary, the unit and the docs in one
#                                                     directory, for hosts without dpkg
# Each artifact has an install component of its own, excluded from a plain `cmake --install` (which still
# installs only the binary, under CMAKE_INSTALL_PREFIX): the two layouts differ, and neither may pick up an
# install rule added elsewhere (test or bench binaries, a bundled library) without this file saying so.
# The version is project()'s, like --version's.

set(_pkg_name sockpressure-exporter)
set(_pkg_src ${CMAKE_SOURCE_DIR}/deploy)
set(_pkg_out ${CMAKE_BINARY_DIR}/packaging)

# Debian's architecture name (amd64, arm64) for both file names: it is what dpkg checks the .deb against.
# A cross build's is the target's (cmake/toolchain-aarch64.cmake), never the build machine's dpkg.
find_program(SOCKPRESSURE_DPKG dpkg)
if(SOCKPRESSURE_DPKG AND NOT CMAKE_CROSSCOMPILING)
  execute_process(COMMAND ${SOCKPRESSURE_DPKG} --print-architecture OUTPUT_VARIABLE _pkg_arch
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$")
  set(_pkg_arch amd64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(_pkg_arch arm64)
else()
  string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _pkg_arch)
endif()

# The .deb installs under /usr (Debian leaves /usr/local to the administrator), so its copy of the unit
# must start /usr/bin/sockpressure_exporter; deploy/systemd's unit, also the tarball's, keeps
# /usr/local/bin, where the README's manual install puts the binary.
set(_deb_prefix /usr)
set(_unit_src ${_pkg_src}/systemd/sockpressure-exporter.service)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_unit_src})
file(READ ${_unit_src} _unit)
string(REPLACE "/usr/local/bin/sockpressure_exporter" "${_deb_prefix}/bin/sockpressure_exporter" _deb_unit "${_unit}")
if(_deb_unit STREQUAL _unit)
  # A package whose unit starts a binary it does not ship would install "fine" and never run.
  message(FATAL_ERROR "${_unit_src}: ExecStart no longer names /usr/local/bin/sockpressure_exporter; "
                      "update cmake/packaging.cmake")
endif()
# The manual-install note at its top does not apply to the packaged copy.
string(REGEX REPLACE "# Install: [^\n]*\n#[^\n]*systemctl enable[^\n]*\n"
       "# Installed by the ${_pkg_name} package; change it with `systemctl edit ${_pkg_name}`.\n"
       _deb_unit "${_deb_unit}")
file(WRITE ${_pkg_out}/deb/${_pkg_name}.service "${_deb_unit}")
# dpkg keeps an administrator's edits of a conffile across upgrades and removes it only on purge.
file(WRITE ${_pkg_out}/deb/conffiles "/etc/default/${_pkg_name}\n")

set(_docs ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/CHANGELOG.md ${CMAKE_SOURCE_DIR}/LICENSE)

# --- the .deb (component "deb") ---
install(TARGETS sockpressure_exporter RUNTIME DESTINATION bin COMPONENT deb EXCLUDE_FROM_ALL)
# lib/ under /usr: Debian 12 reads units from /usr/lib/systemd/system as well (merged /usr), and later
# releases put them only there.
install(FILES ${_pkg_out}/deb/${_pkg_name}.service DESTINATION lib/systemd/system COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${_pkg_src}/systemd/${_pkg_name}.default DESTINATION /etc/default RENAME ${_pkg_name}
        COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${_docs} DESTINATION share/doc/${_pkg_name} COMPONENT deb EXCLUDE_FROM_ALL)
# Debian policy wants the licence as share/doc/<package>/copyright.
install(FILES ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION share/doc/${_pkg_name} RENAME copyright
        COMPONENT deb EXCLUDE_FROM_ALL)

# --- the tarball (component "tarball"): everything side by side in its one top directory ---
install(TARGETS sockpressure_exporter RUNTIME DESTINATION . COMPONENT tarball EXCLUDE_FROM_ALL)
install(FILES ${_unit_src} ${_pkg_src}/systemd/${_pkg_name}.default ${_docs} DESTINATION .
        COMPONENT tarball EXCLUDE_FROM_ALL)

# cpack runs the preinstall target, which by default builds `all` first: every test and benchmark, for
# artifacts that hold only the agent (scripts/package.sh builds that target). `cmake --install` never
# builds anything, and nothing here runs `make install`.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

set(CPACK_GENERATOR DEB TGZ)
set(CPACK_PACKAGE_NAME ${_pkg_name})
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR sockpressure)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Prometheus exporter for memcg socket-pressure TCP throttling")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_RESOURCE_FILE_README ${CMAKE_SOURCE_DIR}/README.md)
# Release binaries carry no debug info (a Release build has little; RelWithDebInfo's would triple the size).
set(CPACK_STRIP_FILES ON)
# One artifact per generator, made of the components the per-generator file below picks.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_ARCHIVE_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
# The tarball's name, also its one top directory (below); the .deb is named by CPACK_DEBIAN_FILE_NAME.
set(CPACK_PACKAGE_FILE_NAME ${_pkg_name}-${PROJECT_VERSION}-linux-${_pkg_arch})

set(SOCKPRESSURE_PACKAGE_MAINTAINER "sockpressure maintainers" CACHE STRING
    "Maintainer field of the .deb (a release job sets \"Name <address>\")")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${SOCKPRESSURE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_NAME ${_pkg_name})
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${_pkg_arch})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the libraries the binary really links (dpkg-shlibdeps), not a hand-kept list. A cross
# build's libraries belong to no installed package dpkg-shlibdeps could ask about: there
# cmake/cross-depends.cmake maps them at cpack time through the sysroot packages' shlibs files.
set(_pkg_cross_depends "")
if(CMAKE_CROSSCOMPILING)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
  get_filename_component(_pkg_shlibs "${SOCKPRESSURE_SYSROOT}/../shlibs" ABSOLUTE)
  if(NOT SOCKPRESSURE_SYSROOT OR NOT EXISTS "${_pkg_shlibs}")
    message(FATAL_ERROR "a cross build needs ${_pkg_shlibs}: run scripts/arm64-sysroot.sh")
  endif()
  set(_pkg_cross_depends "set(SP_READELF \"${CMAKE_READELF}\")
  set(SP_BINARY \"${CMAKE_BINARY_DIR}/sockpressure_exporter\")
  set(SP_SHLIBS \"${_pkg_shlibs}\")
  include(\"${CMAKE_SOURCE_DIR}/cmake/cross-depends.cmake\")")
else()
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
# The synopsis line is CPACK_PACKAGE_DESCRIPTION_SUMMARY; this is the extended description.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "When a memory cgroup's reclaim scans much and frees little, the kernel asserts socket pressure and
every TCP socket charged to it clamps its receive window. sockpressure_exporter shows it per cgroup
(and per pod on Kubernetes), from eBPF where the kernel allows and cgroupfs everywhere, serves it to
Prometheus on port 19100 and can push alerts to Alertmanager.")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${_pkg_src}/debian/postinst ${_pkg_src}/debian/prerm ${_pkg_src}/debian/postrm ${_pkg_out}/deb/conffiles)
# Maintainer scripts 0755, conffiles 0644, whatever the checkout's modes.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# cpack reads this once per generator: the .deb gets its FHS layout under /usr, the tarball its flat one.
file(CONFIGURE OUTPUT ${_pkg_out}/cpack-per-generator.cmake @ONLY CONTENT [[
if(CPACK_GENERATOR STREQUAL "DEB")
  set(CPACK_COMPONENTS_ALL deb)
  set(CPACK_PACKAGING_INSTALL_PREFIX @_deb_prefix@)
  @_pkg_cross_depends@
else()
  set(CPACK_COMPONENTS_ALL tarball)
  set(CPACK_PACKAGING_INSTALL_PREFIX "")
  # A component archive has no top directory unless asked (asked for the .deb, it would move / there).
  set(CPACK_COMPONENT_INCLUDE_TOPLEVEL_DIRECTORY ON)
endif()
]])
set(CPACK_PROJECT_CONFIG_FILE ${_pkg_out}/cpack-per-generator.cmake)

include(CPack)
