# Fails when a file in exporter/ other than the two peer clients includes
# cpp-httplib: the agent serves through its own HTTP layer (outputs/http/,
# whose route handlers take RequestHead and HttpResponse), and httplib is
# only the client of Alertmanager and of the kubelet (docs/structure.md).
# Run: cmake -DSRC_DIR=<source root> -P httplib_clients.cmake
cmake_policy(SET CMP0057 NEW)
set(clients alerting/alertmanager_client.cc identity/kubelet_client.cc)
file(GLOB_RECURSE files RELATIVE ${SRC_DIR}/exporter ${SRC_DIR}/exporter/*.h ${SRC_DIR}/exporter/*.cc)
set(failures)
foreach(f ${files})
  file(STRINGS ${SRC_DIR}/exporter/${f} includes REGEX "^#include[ \t]*[<\"]httplib\\.h[>\"]")
  if(includes AND NOT f IN_LIST clients)
    list(APPEND failures ${f})
  endif()
endforeach()
if(failures)
  list(JOIN failures ", " msg)
  message(FATAL_ERROR "httplib outside its two clients (${clients}): ${msg}")
endif()
