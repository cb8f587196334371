// Collector "netstat": TcpExt counters from /proc/net/netstat. None of them
// counts memcg socket pressure (TCPMemoryPressures is global tcp_mem only),
// but pruning and zero-window counters are its side effects, and global
// pressure is the other cause of clamped windows that must be told apart.
#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"
#include "exporter/sources/procfs_sources.h"

namespace sockpressure {

const std::vector<absl::string_view>& ExportedTcpExtCounters() {
  static const std::vector<absl::string_view> names = {
      "PruneCalled",        "RcvPruned",          "OfoPruned",          "TCPRcvCollapsed",
      "TCPMemoryPressures", "TCPMemoryPressuresChrono", "TCPRcvQDrop", "TCPOFODrop",
      "TCPWantZeroWindowAdv", "TCPToZeroWindowAdv", "TCPFromZeroWindowAdv"};
  return names;
}

std::unique_ptr<Source> NewNetstatSource(const Paths& paths) {
  return MakeFunctionSource("netstat", [root = paths.procfs](Sample& sample) -> absl::Status {
    return WithProcFile(root, "net/netstat", [&](const std::string& text) {
      ProtoCounters parsed = ParseNetstat(text);
      auto it = parsed.tables.find("TcpExt");
      if (it != parsed.tables.end()) {
        for (absl::string_view name : ExportedTcpExtCounters()) {
          auto v = it->second.find(name);
          if (v != it->second.end()) sample.node.tcp_ext.emplace(std::string(name), v->second);
        }
      }
      if (parsed.malformed) return absl::DataLossError(absl::StrCat(root, "/net/netstat: malformed"));
      return absl::OkStatus();
    });
  });
}

}  // namespace sockpressure
