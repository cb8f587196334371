// The Prometheus text exposition format, version 0.0.4.
#pragma once

#include "absl/strings/string_view.h"
#include <cstddef>
#include <memory>

#include "exporter/common/metric_writer.h"

namespace sockpressure {

inline constexpr absl::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

std::unique_ptr<MetricWriter> NewTextWriter();

// Formats a sample value the way Prometheus parses it: integers exactly,
// +Inf/-Inf/NaN spelled out, other doubles in shortest round-trip form.
std::string FormatSampleValue(double value);

}  // namespace sockpressure
