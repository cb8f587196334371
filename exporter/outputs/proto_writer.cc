#include "absl/strings/string_view.h"
#include "exporter/outputs/proto_writer.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>

#include "exporter/proto/metrics.pb.h"

namespace sockpressure {
namespace {

namespace pc = io::prometheus::client;

class ProtoWriter final : public MetricWriter {
 public:
  ProtoWriter() : stream_(&out_) {}

  void Family(absl::string_view name, absl::string_view help, MetricKind kind) override {
    Flush();
    family_.set_name(std::string(name));
    family_.set_help(std::string(help));
    family_.set_type(kind == MetricKind::kCounter ? pc::COUNTER : pc::GAUGE);
    open_ = true;
  }

  void Value(const std::vector<LabelRef>& base, std::initializer_list<LabelRef> extra, double value) override {
    pc::Metric* m = family_.add_metric();
    for (const LabelRef& l : base) AddLabel(m, l);
    for (const LabelRef& l : extra) AddLabel(m, l);
    if (family_.type() == pc::COUNTER) m->mutable_counter()->set_value(value);
    else m->mutable_gauge()->set_value(value);
  }

  std::string Finish() override {
    Flush();
    // Each SerializeDelimitedToZeroCopyStream() call backs the stream up to
    // the bytes written, so out_ holds exactly the encoded families.
    return std::move(out_);
  }

 private:
  static void AddLabel(pc::Metric* m, const LabelRef& l) {
    pc::LabelPair* p = m->add_label();
    p->set_name(std::string(l.name));
    p->set_value(std::string(l.value));
  }

  void Flush() {
    // Prometheus rejects families without samples in the protobuf format.
    if (open_ && family_.metric_size() > 0) {
      google::protobuf::util::SerializeDelimitedToZeroCopyStream(family_, &stream_);
    }
    family_.Clear();
    open_ = false;
  }

  std::string out_;
  google::protobuf::io::StringOutputStream stream_;
  pc::MetricFamily family_;
  bool open_ = false;
};

}  // namespace

std::unique_ptr<MetricWriter> NewProtoWriter() { return std::make_unique<ProtoWriter>(); }

}  // namespace sockpressure
