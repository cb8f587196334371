// libFuzzer target: the kubelet PodList (JSON from the network) and the
// cgroup paths it is matched against.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "exporter/identity/cgroup_path.h"
#include "exporter/identity/pod_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)sockpressure::ParsePodList(text);
  (void)sockpressure::ParseCgroupPath(text);
  (void)sockpressure::StripContainerIdScheme(text);
  return 0;
}
