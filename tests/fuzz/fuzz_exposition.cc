// libFuzzer target: label values (cgroup names are arbitrary bytes) through
// the escaping and both exposition writers. Checks what the formats
// require: valid UTF-8, and an escaping that round-trips.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "exporter/common/label_escape.h"
#include "exporter/outputs/proto_writer.h"
#include "exporter/outputs/text_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view value(reinterpret_cast<const char*>(data), size);
  std::string escaped = sockpressure::EscapeLabelValue(value);
  if (!sockpressure::IsValidUtf8(escaped)) __builtin_trap();
  if (sockpressure::UnescapeLabelValue(escaped) != value) __builtin_trap();
  if (sockpressure::LabelValueIsClean(value) && escaped != value) __builtin_trap();
  std::vector<sockpressure::LabelRef> base = {{"cgroup", value}};
  for (bool text : {true, false}) {
    std::unique_ptr<sockpressure::MetricWriter> w =
        text ? sockpressure::NewTextWriter() : sockpressure::NewProtoWriter();
    w->Family("sockpressure_fuzz", "help", sockpressure::MetricKind::kGauge);
    w->Value(base, {{"reason", value}}, 1.0);
    std::string out = w->Finish();
    if (text && !sockpressure::IsValidUtf8(out)) __builtin_trap();
  }
  return 0;
}
