#include "absl/strings/string_view.h"
#include "exporter/outputs/metrics_endpoint.h"

#include "absl/strings/match.h"
#include "prometheus/counter.h"
#include "exporter/outputs/proto_writer.h"
#include "exporter/outputs/text_writer.h"
#include "exporter/sampler/sampler.h"

namespace sockpressure {

MetricsEndpoint::MetricsEndpoint(const Sampler* sampler, BuildInfo build, EmitOptions options)
    : sampler_(sampler),
      build_(std::move(build)),
      options_(options),
      registry_(std::make_shared<prometheus::Registry>()),
      requests_(&prometheus::BuildCounter()
                     .Name("sockpressure_http_requests_total")
                     .Help("HTTP requests served by the agent, by handler and status code.")
                     .Register(*registry_)),
      scrapes_(&prometheus::BuildCounter()
                    .Name("sockpressure_scrapes_total")
                    .Help("Scrapes of the metrics endpoint, by the exposition format served.")
                    .Register(*registry_)) {}

bool MetricsEndpoint::WantsProtobuf(absl::string_view accept) {
  // Prometheus sends e.g. "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;
  // encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1" when
  // protobuf scraping is enabled; it only lists protobuf when it wants it.
  return absl::StrContains(accept, "application/vnd.google.protobuf") &&
         absl::StrContains(accept, "io.prometheus.client.MetricFamily");
}

RenderedMetrics MetricsEndpoint::RenderSnapshot(const Snapshot& snapshot, bool protobuf) const {
  const int f = protobuf ? 1 : 0;
  // Reserve the whole body up front, so that it is allocated once: growing
  // by doubling holds 1.5x the body during each reallocation and leaves up to
  // 2x capacity. An over-estimate costs address space, not RSS (a large
  // buffer is mmap'ed and its untouched pages are never faulted in). The
  // first rendering guesses from the cgroup count (about 0.8 KB per cgroup in
  // the core profile and 4 KB with the context series, text, with
  // Kubernetes-length paths); later ones take the last size.
  size_t hint = last_size_[f].load(std::memory_order_relaxed);
  if (hint == 0) hint = (snapshot.cgroups.size() + 16) * (options_.context ? 5120 : 1024);
  const size_t reserve = hint + hint / 8;
  std::unique_ptr<MetricWriter> w = protobuf ? NewProtoWriter(reserve) : NewTextWriter(reserve);
  WriteSnapshotMetrics(snapshot, build_, options_, *w);
  for (const ExtraWriter& extra : extra_writers_) extra(snapshot, *w);
  w->PromCppFamilies(registry_->Collect());
  auto body = std::make_shared<const std::string>(w->Finish());
  last_size_[f].store(body->size(), std::memory_order_relaxed);
  return {std::move(body), std::string(protobuf ? kProtoContentType : kTextContentType)};
}

RenderedMetrics MetricsEndpoint::Render(absl::string_view accept) {
  bool protobuf = WantsProtobuf(accept);
  scrapes_->Add({{"format", protobuf ? "protobuf" : "text"}}).Increment();
  std::shared_ptr<const Snapshot> snap = sampler_->Latest();
  if (!snap) return {nullptr, std::string(kTextContentType)};
  const int f = protobuf ? 1 : 0;
  const std::string type(protobuf ? kProtoContentType : kTextContentType);
  std::unique_lock<std::mutex> lock(mu_);
  // One rendering per sample and format: a scraper that finds this sample
  // being rendered waits for that body instead of rendering a second one
  // (which would cost the CPU twice and hold two bodies at once).
  for (;;) {
    if (cached_[f].body && cached_[f].snapshot->sequence >= snap->sequence) return {cached_[f].body, type};
    if (rendering_[f] != snap->sequence) break;
    rendered_.wait(lock);
  }
  rendering_[f] = snap->sequence;
  lock.unlock();
  RenderedMetrics r;
  Cached dropped[2];  // released after the lock
  struct Done {       // wakes the waiters even if the render throws
    MetricsEndpoint* self;
    int f;
    uint64_t sequence;
    ~Done() {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (self->rendering_[f] == sequence) self->rendering_[f] = 0;
      self->rendered_.notify_all();
    }
  };
  {
    Done done{this, f, snap->sequence};
    r = RenderSnapshot(*snap, protobuf);
    std::lock_guard<std::mutex> relock(mu_);
    if (!(cached_[f].body && cached_[f].snapshot->sequence > snap->sequence)) {  // unless a newer one is cached
      DropOlderLocked(snap->sequence, dropped);
      dropped[f] = std::move(cached_[f]);
      cached_[f] = {snap, r.body};
    }
  }
  return r;
}

void MetricsEndpoint::DropOlderLocked(uint64_t sequence, Cached (&dropped)[2]) {
  for (int g = 0; g < 2; ++g) {
    if (cached_[g].body && cached_[g].snapshot->sequence < sequence) dropped[g] = std::move(cached_[g]);
  }
}

void MetricsEndpoint::DropStale(uint64_t latest_sequence) {
  Cached dropped[2];
  std::lock_guard<std::mutex> lock(mu_);
  DropOlderLocked(latest_sequence, dropped);
}

void MetricsEndpoint::DropCached() {
  Cached dropped[2];  // released after the lock
  std::lock_guard<std::mutex> lock(mu_);
  for (int g = 0; g < 2; ++g) dropped[g] = std::move(cached_[g]);
}

size_t MetricsEndpoint::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Cached& c : cached_) n += c.body ? c.body->size() : 0;
  return n;
}

void MetricsEndpoint::CountRequest(const std::string& handler, int code) {
  requests_->Add({{"handler", handler}, {"code", std::to_string(code)}}).Increment();
}

}  // namespace sockpressure
