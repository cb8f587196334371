// libFuzzer target: the cgroupfs file parsers (memory.stat v1/v2,
// memory.events flat-keyed files, memory.pressure PSI) -- the text a
// cgroup tree under the user's control can feed the agent.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "exporter/common/parse.h"
#include "exporter/sources/cgroup_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool v1 : {false, true}) {
    sockpressure::CgroupReading c;
    int bad = sockpressure::ParseMemoryStat(text, v1, c);
    if (bad < 0) __builtin_trap();
  }
  sockpressure::FlatKeyed kv = sockpressure::ParseFlatKeyed(text);
  (void)kv.Get("oom_kill");
  (void)sockpressure::ParsePsi(text);
  return 0;
}
