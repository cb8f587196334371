// Renders the latest snapshot for /metrics, in the format the scraper asked
// for, a part at a time while it is sent; counts HTTP requests with
// prometheus-cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "exporter/outputs/http/body_stream.h"
#include "exporter/outputs/http/route.h"
#include "exporter/outputs/snapshot_metrics.h"
#include "exporter/state/snapshot.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace sockpressure {

class Sampler;

struct MetricsBody {
  std::unique_ptr<BodyStream> stream;  // null: no sample yet
  std::string content_type;
};

// Thread-safe: any number of HTTP threads may call Open() concurrently, and
// each stream it returns is used by one thread at a time.
//
// Why streams, not a cached body: the exposition of 10,000 cgroups is 8 MB of
// text and 7 MB of protobuf, and a body held whole per format (plus a gzip
// copy per response) put the agent's peak RSS a quarter above its sampling
// peak while both formats were scraped. A stream renders some families
// (about one family over every cgroup, at least 256 KB), hands them to the
// socket, and renders the next once they are sent: a response holds one
// piece and the snapshot it renders, never the whole body. The cost: every
// scrape renders, so two scrapers of one sample render it twice (5-8 ms
// each at 10,000 cgroups, README "Benchmarks").
class MetricsEndpoint : public TelemetryEndpoint {
 public:
  MetricsEndpoint(const Sampler* sampler, BuildInfo build, EmitOptions options);

  // The telemetry path: Open() for the request's Accept header, or 503
  // before the first sample.
  void Serve(const RequestHead& request, HttpResponse* response) override;

  // True when the Accept header prefers the protobuf exposition.
  static bool WantsProtobuf(absl::string_view accept_header);

  // The latest snapshot's exposition as a stream (holding that snapshot
  // until it is done or dropped).
  MetricsBody Open(absl::string_view accept_header);
  // The same for a given snapshot.
  MetricsBody OpenSnapshot(std::shared_ptr<const Snapshot> snapshot, bool protobuf) const;
  // A given snapshot's whole body (tests, golden files, benchmarks): the
  // stream's pieces concatenated.
  std::string RenderSnapshot(const Snapshot& snapshot, bool protobuf) const;

  void CountRequest(const std::string& handler, int code) override;
  void CountReset(const std::string& reason) override;

  // Extension point for feature areas (e.g. alerting episodes): each writer
  // appends its own families after the snapshot's, as one part of the
  // stream. Call before serving; a writer must outlive the streams.
  using ExtraWriter = std::function<void(const Snapshot&, MetricWriter&)>;
  void AddWriter(ExtraWriter writer) { extra_writers_.push_back(std::move(writer)); }

 private:
  const Sampler* sampler_;
  BuildInfo build_;
  EmitOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* scrapes_;
  prometheus::Family<prometheus::Counter>* resets_;
  std::vector<ExtraWriter> extra_writers_;
};

}  // namespace sockpressure
