// Collector "sockstat": global TCP memory (sockstat "TCP: mem", in pages)
// against net.ipv4.tcp_mem. Above tcp_mem[1] the kernel sets the global
// tcp_memory_pressure flag, which clamps every socket on the host -- a
// different cause from memcg socket pressure with a different remedy.
#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"
#include "exporter/sources/procfs_sources.h"

namespace sockpressure {

std::unique_ptr<Source> NewSockstatSource(const Paths& paths) {
  return MakeFunctionSource("sockstat", [root = paths.procfs](Sample& sample) -> absl::Status {
    absl::Status usage = WithProcFile(root, "net/sockstat", [&](const std::string& text) {
      auto rows = ParseSockstat(text);
      auto tcp = rows.find("TCP");
      if (tcp != rows.end()) {
        auto mem = tcp->second.find("mem");
        if (mem != tcp->second.end()) sample.node.tcp_mem_pages = mem->second;
      }
      return absl::OkStatus();
    });
    if (!usage.ok()) return usage;
    return WithProcFile(root, "sys/net/ipv4/tcp_mem", [&](const std::string& text) {
      std::optional<std::vector<uint64_t>> v = ParseUintList(text);
      if (!v || v->size() != 3) return absl::DataLossError(absl::StrCat(root, "/sys/net/ipv4/tcp_mem: malformed"));
      sample.node.tcp_mem_limits = *v;
      return absl::OkStatus();
    });
  });
}

}  // namespace sockpressure
