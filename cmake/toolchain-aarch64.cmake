# Cross build for arm64 (aarch64) Linux from an x86-64 Debian host (docs/arm64.md). scripts/cross-build.sh
# makes the sysroot and configures build-arm64 with this file; use it rather than a cmake line of your own.
# Compiler, C library and libstdc++ are Debian's cross toolchain (crossbuild-essential-arm64); every other
# library comes from Debian's own arm64 packages unpacked into the sysroot by scripts/arm64-sysroot.sh.
# The sysroot is not passed as --sysroot: the cross compiler keeps its own libc and C++ headers (whose
# paths --sysroot would relocate), and the sysroot only adds the libraries on top, as multiarch would.
# Host tools (protoc, bpftool, clang -target bpf, pkg-config) are the host's binaries.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)   # bpf/CMakeLists.txt derives __TARGET_ARCH_arm64 from it
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Where scripts/arm64-sysroot.sh puts it (package.sh and build-image.sh read its file lists there too).
# Found from this file's own directory: every try_compile reads the toolchain file again, without the
# configure's variables.
get_filename_component(_sp_sysroot "${CMAKE_CURRENT_LIST_DIR}/../.cache/arm64/sysroot" ABSOLUTE)
if(NOT EXISTS "${_sp_sysroot}/usr/lib/aarch64-linux-gnu")
  message(FATAL_ERROR "no arm64 sysroot at ${_sp_sysroot}: run scripts/arm64-sysroot.sh first")
endif()
find_program(_sp_cross_cxx aarch64-linux-gnu-g++)
if(NOT _sp_cross_cxx)
  message(FATAL_ERROR "aarch64-linux-gnu-g++ not found: apt-get install crossbuild-essential-arm64")
endif()
set(SOCKPRESSURE_SYSROOT "${_sp_sysroot}" CACHE INTERNAL "the arm64 libraries' root (scripts/arm64-sysroot.sh)")

# Libraries, headers and CMake package configs from the sysroot and the cross toolchain's own root (libc:
# civetweb's config looks for libdl there); programs from the host only.
set(CMAKE_FIND_ROOT_PATH "${_sp_sysroot}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Debian puts a few headers in the multiarch dir (openssl/opensslconf.h, asm/): searched after the
# targets' own include dirs, as the native compiler searches /usr/include/x86_64-linux-gnu.
set(CMAKE_C_STANDARD_INCLUDE_DIRECTORIES "${_sp_sysroot}/usr/include/aarch64-linux-gnu")
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES "${_sp_sysroot}/usr/include/aarch64-linux-gnu")

# The linker searches the sysroot's library dirs as the native one searches /usr/lib/x86_64-linux-gnu:
# for a plain -lcrypt (-L), and for a library's own dependencies, libcurl's or libprotobuf's (-rpath-link).
set(_sp_link_dirs "")
foreach(_dir "${_sp_sysroot}/usr/lib/aarch64-linux-gnu" "${_sp_sysroot}/lib/aarch64-linux-gnu")
  string(APPEND _sp_link_dirs " -L${_dir} -Wl,-rpath-link,${_dir}")
endforeach()
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_sp_link_dirs}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_sp_link_dirs}")

# pkg-config (libbpf, cpp-httplib) reads the arm64 .pc files and prefixes their paths with the sysroot.
set(ENV{PKG_CONFIG_LIBDIR} "${_sp_sysroot}/usr/lib/aarch64-linux-gnu/pkgconfig:${_sp_sysroot}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${_sp_sysroot}")
set(ENV{PKG_CONFIG_PATH} "")
