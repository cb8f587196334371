# Fails when a folder exporter/sources/X/ sits beside exporter/sources/X_source.cc:
# the two would read as the same thing (docs/structure.md, "Layers").
# Run: cmake -DSRC_DIR=<source root> -P sources_folders.cmake
file(GLOB entries LIST_DIRECTORIES true RELATIVE ${SRC_DIR}/exporter/sources ${SRC_DIR}/exporter/sources/*)
set(failures)
foreach(e ${entries})
  if(IS_DIRECTORY ${SRC_DIR}/exporter/sources/${e} AND EXISTS ${SRC_DIR}/exporter/sources/${e}_source.cc)
    list(APPEND failures "sources/${e}/ beside sources/${e}_source.cc")
  endif()
endforeach()
if(failures)
  list(JOIN failures "; " msg)
  message(FATAL_ERROR "a folder reads as a collector: ${msg}")
endif()
