# Writes exporter/version.h with the current git revision. Run at every build
# (not only at configure time) so a rebuilt binary never reports an older
# commit; configure_file leaves the file untouched when nothing changed, so
# nothing recompiles needlessly. Inputs: SRC_DIR, OUT, VERSION, COMPILER.
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${SRC_DIR}
                OUTPUT_VARIABLE SOCKPRESSURE_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET)
if(NOT SOCKPRESSURE_REVISION)
  set(SOCKPRESSURE_REVISION unknown)  # e.g. a source tarball or a Docker context without .git
endif()
set(PROJECT_VERSION ${VERSION})
string(REPLACE "|" " " CMAKE_CXX_COMPILER_ID_AND_VERSION "${COMPILER}")
configure_file(${SRC_DIR}/exporter/version.h.in ${OUT} @ONLY)
