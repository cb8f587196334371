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
    absl::StatusOr<std::string> text = ReadProcFile(root, "net/sockstat");
    if (text.ok()) {
      auto rows = ParseSockstat(*text);
      auto tcp = rows.find("TCP");
      if (tcp != rows.end()) {
        auto mem = tcp->second.find("mem");
        if (mem != tcp->second.end()) sample.node.tcp_mem_pages = mem->second;
      }
    } else if (!IsAbsent(text.status())) {
      return text.status();
    }
    absl::StatusOr<std::string> limits = ReadProcFile(root, "sys/net/ipv4/tcp_mem");
    if (limits.ok()) {
      std::optional<std::vector<uint64_t>> v = ParseUintList(*limits);
      if (!v || v->size() != 3) return absl::DataLossError(absl::StrCat(root, "/sys/net/ipv4/tcp_mem: malformed"));
      sample.node.tcp_mem_limits = *v;
    } else if (!IsAbsent(limits.status())) {
      return limits.status();
    }
    return absl::OkStatus();
  });
}

}  // namespace sockpressure
