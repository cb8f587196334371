// Renders the latest snapshot for /metrics, in the format the scraper asked
// for, and counts HTTP requests with prometheus-cpp.
#pragma once

#include "absl/strings/string_view.h"
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"
#include "exporter/outputs/snapshot_metrics.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

class Sampler;

struct RenderedMetrics {
  std::string body;
  std::string content_type;
};

// Thread-safe: any number of HTTP threads may call Render() concurrently.
// The rendering of one snapshot in one format is cached, so concurrent
// scrapers of the same sample share the work.
class MetricsEndpoint {
 public:
  MetricsEndpoint(const Sampler* sampler, BuildInfo build, EmitOptions options);

  // True when the Accept header prefers the protobuf exposition.
  static bool WantsProtobuf(absl::string_view accept_header);

  RenderedMetrics Render(absl::string_view accept_header);
  // Renders a given snapshot (tests, golden files); not cached.
  RenderedMetrics RenderSnapshot(const Snapshot& snapshot, bool protobuf) const;

  void CountRequest(const std::string& handler, int code);

  // Extension point for feature areas (e.g. alerting episodes): each writer
  // appends its own families after the snapshot's. Call before serving.
  // Renders are cached per snapshot sequence, so a writer whose state changes
  // between samples is shown at most one sample interval late.
  using ExtraWriter = std::function<void(const Snapshot&, MetricWriter&)>;
  void AddWriter(ExtraWriter writer) { extra_writers_.push_back(std::move(writer)); }

 private:
  const Sampler* sampler_;
  BuildInfo build_;
  EmitOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* scrapes_;
  std::vector<ExtraWriter> extra_writers_;

  std::mutex mu_;
  uint64_t cached_sequence_[2] = {0, 0};
  std::shared_ptr<const std::string> cached_body_[2];
};

}  // namespace sockpressure
