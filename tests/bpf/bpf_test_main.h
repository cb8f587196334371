// The entry point of the eBPF probe tests: they load programs into the
// running kernel, so they skip (exit 77, with the reason) where that cannot
// work instead of passing silently.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "exporter/sources/bpf/bpf_source.h"
#include "gtest/gtest.h"

namespace sockpressure {

inline int RunBpfTests(int argc, char** argv) {
  if (!BpfBuiltIn()) {
    std::printf("SKIP: built without eBPF (SOCKPRESSURE_BPF=OFF or no clang/bpftool/libbpf)\n");
    return 77;
  }
  if (::geteuid() != 0) {
    std::printf("SKIP: eBPF probe tests need root (CAP_BPF+CAP_PERFMON)\n");
    return 77;
  }
  struct stat st;
  if (::stat("/sys/kernel/btf/vmlinux", &st) != 0) {
    std::printf("SKIP: no kernel BTF (/sys/kernel/btf/vmlinux)\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

}  // namespace sockpressure
