// libFuzzer target: --web.config.file (YAML written by an operator).
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "exporter/outputs/http/web_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)sockpressure::ParseWebConfig(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
