// libFuzzer target: the procfs parsers (/proc/net/netstat, sockstat,
// sys/net/ipv4/tcp_mem, /proc/swaps, /proc/cmdline).
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "exporter/common/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)sockpressure::ParseNetstat(text);
  (void)sockpressure::ParseSockstat(text);
  (void)sockpressure::ParseUintList(text);
  (void)sockpressure::ParseSwaps(text);
  (void)sockpressure::CmdlineHasNosocket(text);
  return 0;
}
