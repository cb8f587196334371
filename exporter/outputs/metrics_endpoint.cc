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
  std::unique_ptr<MetricWriter> w = protobuf ? NewProtoWriter() : NewTextWriter();
  WriteSnapshotMetrics(snapshot, build_, options_, *w);
  for (const ExtraWriter& extra : extra_writers_) extra(snapshot, *w);
  w->PromCppFamilies(registry_->Collect());
  return {w->Finish(), std::string(protobuf ? kProtoContentType : kTextContentType)};
}

RenderedMetrics MetricsEndpoint::Render(absl::string_view accept) {
  bool protobuf = WantsProtobuf(accept);
  scrapes_->Add({{"format", protobuf ? "protobuf" : "text"}}).Increment();
  std::shared_ptr<const Snapshot> snap = sampler_->Latest();
  if (!snap) return {"", std::string(kTextContentType)};
  int f = protobuf ? 1 : 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_body_[f] && cached_sequence_[f] == snap->sequence) {
      return {*cached_body_[f], std::string(protobuf ? kProtoContentType : kTextContentType)};
    }
  }
  RenderedMetrics r = RenderSnapshot(*snap, protobuf);
  std::lock_guard<std::mutex> lock(mu_);
  cached_sequence_[f] = snap->sequence;
  cached_body_[f] = std::make_shared<const std::string>(r.body);
  return r;
}

void MetricsEndpoint::CountRequest(const std::string& handler, int code) {
  requests_->Add({{"handler", handler}, {"code", std::to_string(code)}}).Increment();
}

}  // namespace sockpressure
