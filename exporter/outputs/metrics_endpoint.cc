#include "exporter/outputs/metrics_endpoint.h"

#include <utility>

#include "absl/strings/match.h"
#include "exporter/outputs/proto_writer.h"
#include "exporter/outputs/text_writer.h"
#include "exporter/sampler/sampler.h"
#include "prometheus/counter.h"

namespace sockpressure {
namespace {

// Parts are rendered until at least this much output is ready, so that a
// small node's exposition goes out in one piece and a large one in pieces
// of about one family over every cgroup (100 B per cgroup and family).
constexpr size_t kPieceBytes = 256 << 10;

// Not thread-safe (BodyStream).
class MetricsStream final : public BodyStream {
 public:
  MetricsStream(std::shared_ptr<const Snapshot> snapshot, std::vector<MetricsPart> parts,
                std::unique_ptr<MetricWriter> writer)
      : snapshot_(std::move(snapshot)), parts_(std::move(parts)), writer_(std::move(writer)) {}

  bool Next(std::string* out) override {
    const size_t start = out->size();
    while (next_ < parts_.size()) {
      parts_[next_](*writer_);
      parts_[next_] = nullptr;  // what the part held (the label sets, after the last cgroup family) goes now
      ++next_;
      std::string taken = writer_->TakeFinished();
      if (out->empty()) *out = std::move(taken);  // the usual case: no copy
      else out->append(taken);
      if (out->size() - start >= kPieceBytes) return true;
    }
    out->append(writer_->Finish());
    return false;
  }

 private:
  // Declared first, so released last: the parts and the writer's output
  // point into it.
  std::shared_ptr<const Snapshot> snapshot_;
  std::vector<MetricsPart> parts_;
  size_t next_ = 0;
  std::unique_ptr<MetricWriter> writer_;
};

}  // namespace

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
                    .Register(*registry_)),
      resets_(&prometheus::BuildCounter()
                   .Name("sockpressure_http_responses_reset_total")
                   .Help("HTTP answers the agent reset (TCP RST) before their client took all of them: reason "
                         "\"budget\" (unsent answers over their memory budget, the slowest cut first) or "
                         "\"deadline\" (not taken within the write deadline).")
                   .Register(*registry_)) {}

bool MetricsEndpoint::WantsProtobuf(absl::string_view accept) {
  // Prometheus sends e.g. "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;
  // encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1" when
  // protobuf scraping is enabled; it only lists protobuf when it wants it.
  return absl::StrContains(accept, "application/vnd.google.protobuf") &&
         absl::StrContains(accept, "io.prometheus.client.MetricFamily");
}

MetricsBody MetricsEndpoint::OpenSnapshot(std::shared_ptr<const Snapshot> snapshot, bool protobuf) const {
  std::vector<MetricsPart> parts = SnapshotParts(*snapshot, build_, options_);
  const Snapshot* s = snapshot.get();
  for (const ExtraWriter& extra : extra_writers_) {
    parts.push_back([s, extra](MetricWriter& out) { extra(*s, out); });
  }
  // Last, so that the request counters include as much as they can.
  parts.push_back([registry = registry_](MetricWriter& out) { out.PromCppFamilies(registry->Collect()); });
  std::unique_ptr<MetricWriter> writer = protobuf ? NewProtoWriter() : NewTextWriter();
  return {std::make_unique<MetricsStream>(std::move(snapshot), std::move(parts), std::move(writer)),
          std::string(protobuf ? kProtoContentType : kTextContentType)};
}

MetricsBody MetricsEndpoint::Open(absl::string_view accept) {
  bool protobuf = WantsProtobuf(accept);
  scrapes_->Add({{"format", protobuf ? "protobuf" : "text"}}).Increment();
  std::shared_ptr<const Snapshot> snap = sampler_->Latest();
  if (!snap) return {nullptr, std::string(kTextContentType)};
  return OpenSnapshot(std::move(snap), protobuf);
}

void MetricsEndpoint::Serve(const RequestHead& request, HttpResponse* response) {
  MetricsBody m = Open(request.Header("accept"));
  if (!m.stream) {
    *response = Unavailable(kNoSampleYet);
    return;
  }
  *response = {200, {{"Content-Type", m.content_type}}, ""};
  // Rendered and sent a piece at a time (metrics_endpoint.h).
  response->stream = std::move(m.stream);
}

std::string MetricsEndpoint::RenderSnapshot(const Snapshot& snapshot, bool protobuf) const {
  // The caller keeps `snapshot` alive for this call: an owner that deletes nothing.
  return ReadAll(*OpenSnapshot(std::shared_ptr<const Snapshot>(&snapshot, [](const Snapshot*) {}), protobuf).stream);
}

void MetricsEndpoint::CountRequest(const std::string& handler, int code) {
  requests_->Add({{"handler", handler}, {"code", std::to_string(code)}}).Increment();
}

void MetricsEndpoint::CountReset(const std::string& reason) {
  // HttpFront gives only the two reasons: the label stays bounded.
  resets_->Add({{"reason", reason}}).Increment();
}

}  // namespace sockpressure
