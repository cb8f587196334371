// The Prometheus protobuf exposition: length-delimited
// io.prometheus.client.MetricFamily messages, one per family.
#pragma once

#include "absl/strings/string_view.h"
#include <cstddef>
#include <memory>

#include "exporter/common/metric_writer.h"

namespace sockpressure {

inline constexpr absl::string_view kProtoContentType =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

std::unique_ptr<MetricWriter> NewProtoWriter();

}  // namespace sockpressure
