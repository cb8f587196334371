// Renders the latest snapshot for /metrics, in the format the scraper asked
// for, and counts HTTP requests with prometheus-cpp.
#pragma once

#include "absl/strings/string_view.h"
#include <atomic>
#include <condition_variable>
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
  // Shared with the cache and every response that serves it: a body is
  // rendered once per sample and format and never copied (null: no sample).
  std::shared_ptr<const std::string> body;
  std::string content_type;
};

// Thread-safe: any number of HTTP threads may call Render() concurrently.
// The rendering of one snapshot in one format is cached, so concurrent
// scrapers of the same sample share the work and the memory: while text and
// protobuf are both scraped the agent holds one body of each (plus a gzip
// copy per response that asked for it), whatever the number of scrapers.
class MetricsEndpoint {
 public:
  MetricsEndpoint(const Sampler* sampler, BuildInfo build, EmitOptions options);

  // True when the Accept header prefers the protobuf exposition.
  static bool WantsProtobuf(absl::string_view accept_header);

  RenderedMetrics Render(absl::string_view accept_header);
  // Renders a given snapshot (tests, golden files); not cached.
  RenderedMetrics RenderSnapshot(const Snapshot& snapshot, bool protobuf) const;

  void CountRequest(const std::string& handler, int code);

  // Drops the cached bodies of snapshots older than the latest one (call on
  // every publish): they are never served again, and a body cached before
  // thousands of cgroups went away is tens of MB. The cache also holds its
  // snapshot, so that the snapshot's release, which returns free memory to
  // the kernel when it was much larger than the latest (Sampler), comes
  // after its body's.
  void DropStale(uint64_t latest_sequence);
  // Drops every cached body (call when the sampler starts a cycle). The
  // cycle's own peak, a new sample and snapshot beside the latest, would
  // otherwise come on top of one body per format held until the publish
  // (at 10,000 cgroups 8 MB of text and 7 MB of protobuf). Responses being
  // written keep theirs, and scrapers of one rendering still share it; a
  // scrape that arrives before the publish renders the latest sample again.
  void DropCached();
  // Bytes of rendered bodies kept for the next scrape (tests).
  size_t cached_bytes() const;

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

  struct Cached {
    std::shared_ptr<const Snapshot> snapshot;  // declared first: released after the body
    std::shared_ptr<const std::string> body;
  };
  // Moves the entries of snapshots older than `sequence` into `dropped`, to
  // be released once mu_ is unlocked.
  void DropOlderLocked(uint64_t sequence, Cached (&dropped)[2]);
  mutable std::mutex mu_;
  Cached cached_[2];  // text, protobuf
  uint64_t rendering_[2] = {0, 0};  // sequence being rendered per format (0: none; samples count from 1)
  std::condition_variable rendered_;
  // Size of the last rendering per format: the next one reserves it (+1/8),
  // so a body is allocated once instead of growing by doubling (which holds
  // 1.5x its size during each reallocation and leaves up to 2x capacity).
  mutable std::atomic<size_t> last_size_[2] = {0, 0};
};

}  // namespace sockpressure
