// Collector "kernel": kernel release, whether memcg socket accounting is on,
// and which reclaim runs. With cgroup.memory=nosocket the static key
// mem_cgroup_sockets_enabled stays off, sockets never get sk_memcg, and
// vmpressure cannot throttle them (include/net/tcp.h
// tcp_under_memory_pressure()). With the multi-generational LRU on
// (mm/vmscan.c lru_gen_enabled()), reclaim evicts from the oldest generation
// and leaves hot anon alone, so the scan-without-reclaim that arms socket
// pressure is rare; the node then is far less exposed (tests/lab/README.md).
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "exporter/common/file_reader.h"
#include "exporter/sources/procfs_sources.h"

namespace sockpressure {

std::unique_ptr<Source> NewKernelSource(const Paths& paths) {
  return MakeFunctionSource("kernel", [root = paths.procfs, sysfs = paths.sysfs](Sample& sample) -> absl::Status {
    absl::Status s = WithProcFile(root, "sys/kernel/osrelease", [&](const std::string& text) {
      sample.node.kernel_release = std::string(absl::StripAsciiWhitespace(text));
      return absl::OkStatus();
    });
    if (s.ok()) {
      s = WithProcFile(root, "cmdline", [&](const std::string& text) {
        sample.node.nosocket = CmdlineHasNosocket(text);
        return absl::OkStatus();
      });
    }
    if (!s.ok()) return s;
    // "0x0007": a hex mask of MGLRU capabilities (Documentation/admin-guide/mm/multigen_lru.rst).
    return WithProcFile(sysfs, "kernel/mm/lru_gen/enabled", [&](const std::string& text) {
      uint32_t caps = 0;
      if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(text), &caps)) {
        return absl::InternalError(absl::StrCat("kernel/mm/lru_gen/enabled: not a hex mask: ", text));
      }
      sample.node.mglru_caps = caps;
      return absl::OkStatus();
    });
  });
}

}  // namespace sockpressure
