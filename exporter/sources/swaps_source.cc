// Collector "swaps": active swap areas. Without swap, reclaim cannot scan
// anonymous pages (mm/vmscan.c can_reclaim_anon_pages()), so hot anon memory
// is never "scanned but not reclaimed" and the false pressure cannot build.
#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"
#include "exporter/sources/procfs_sources.h"

namespace sockpressure {

std::unique_ptr<Source> NewSwapsSource(const Paths& paths) {
  return MakeFunctionSource("swaps", [root = paths.procfs](Sample& sample) -> absl::Status {
    return WithProcFile(root, "swaps", [&](const std::string& text) {
      Swaps swaps = ParseSwaps(text);
      // A garbled file that lists no readable area says nothing about swap:
      // unknown, not "off" (which would silence the alerts that need it).
      // One readable area is enough to know swap is on.
      if (!swaps.malformed || swaps.devices > 0) sample.node.swaps = swaps;
      if (swaps.malformed) return absl::DataLossError(absl::StrCat(root, "/swaps: malformed line"));
      return absl::OkStatus();
    });
  });
}

}  // namespace sockpressure
