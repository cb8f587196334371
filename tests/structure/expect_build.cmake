# cmake -DBUILD_DIR=... -DTARGET=... -DEXPECT=sees|rejects -P expect_build.cmake
# "rejects" passes only when the build fails because the header is not found,
# so an unrelated compile error cannot make a rejection test pass.
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(EXPECT STREQUAL "sees")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TARGET} should compile:\n${out}${err}")
  endif()
elseif(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but its include runs up the layers")
elseif(NOT "${out}${err}" MATCHES "No such file or directory")
  message(FATAL_ERROR "${TARGET} failed for another reason than a missing header:\n${out}${err}")
endif()
