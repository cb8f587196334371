// Collector "vmstat": node-wide reclaim (/proc/vmstat pgscan_*, pgsteal_*)
// and memory PSI (/proc/pressure/memory). Context for the per-cgroup
// verdicts: who else is reclaiming, and whether tasks actually stall.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"
#include "exporter/sources/procfs_sources.h"

namespace sockpressure {

std::unique_ptr<Source> NewVmstatSource(const Paths& paths) {
  return MakeFunctionSource("vmstat", [root = paths.procfs](Sample& sample) -> absl::Status {
    absl::Status reclaim = WithProcFile(root, "vmstat", [&](const std::string& text) {
      FlatKeyed kv = ParseFlatKeyed(text);
      uint64_t scan = 0, steal = 0;
      bool any = false;
      for (const auto& [key, value] : kv.values) {
        // pgscan_{kswapd,direct,khugepaged}; proactive reclaim is excluded
        // from vmpressure since 6.0, so it is left out here as well.
        if (absl::StartsWith(key, "pgscan_") && !absl::EndsWith(key, "_proactive") &&
            !absl::StrContains(key, "_anon") && !absl::StrContains(key, "_file")) {
          scan += value;
          any = true;
        } else if (absl::StartsWith(key, "pgsteal_") && !absl::EndsWith(key, "_proactive") &&
                   !absl::StrContains(key, "_anon") && !absl::StrContains(key, "_file")) {
          steal += value;
        }
      }
      if (any) {
        sample.node.vm_pgscan = scan;
        sample.node.vm_pgsteal = steal;
      }
      if (!kv.bad_lines.empty()) return absl::DataLossError(absl::StrCat(root, "/vmstat: malformed line"));
      return absl::OkStatus();
    });
    if (!reclaim.ok()) return reclaim;
    absl::Status psi = WithProcFile(root, "pressure/memory", [&](const std::string& text) {
      Psi parsed = ParsePsi(text);
      sample.node.psi_some = parsed.some;
      sample.node.psi_full = parsed.full;
      if (parsed.malformed) return absl::DataLossError(absl::StrCat(root, "/pressure/memory: malformed"));
      return absl::OkStatus();
    });
    // Reading pressure/memory fails (Unavailable) where PSI is built in but
    // off (psi=0): no node PSI then, as when the file is absent.
    return absl::IsUnavailable(psi) ? absl::OkStatus() : psi;
  });
}

}  // namespace sockpressure
