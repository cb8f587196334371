// Collector "kernel": kernel release and whether memcg socket accounting is
// on. With cgroup.memory=nosocket the static key mem_cgroup_sockets_enabled
// stays off, sockets never get sk_memcg, and vmpressure cannot throttle them
// (include/net/tcp.h tcp_under_memory_pressure()).
#include "absl/strings/strip.h"
#include "exporter/common/file_reader.h"
#include "exporter/sources/procfs_sources.h"

namespace sockpressure {

std::unique_ptr<Source> NewKernelSource(const Paths& paths) {
  return MakeFunctionSource("kernel", [root = paths.procfs](Sample& sample) -> absl::Status {
    absl::StatusOr<std::string> release = ReadProcFile(root, "sys/kernel/osrelease");
    if (release.ok()) {
      sample.node.kernel_release = std::string(absl::StripAsciiWhitespace(*release));
    } else if (!IsAbsent(release.status())) {
      return release.status();
    }
    absl::StatusOr<std::string> cmdline = ReadProcFile(root, "cmdline");
    if (cmdline.ok()) {
      sample.node.nosocket = CmdlineHasNosocket(*cmdline);
    } else if (!IsAbsent(cmdline.status())) {
      return cmdline.status();
    }
    return absl::OkStatus();
  });
}

}  // namespace sockpressure
