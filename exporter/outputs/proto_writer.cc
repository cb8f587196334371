#include "absl/strings/string_view.h"
#include "exporter/outputs/proto_writer.h"

#include <cstring>
#include <utility>

#include "exporter/common/label_escape.h"

namespace sockpressure {
namespace {

// io.prometheus.client (exporter/proto/metrics.proto) written straight in
// the protobuf wire format. Why not the generated classes: they build a
// MetricFamily object tree (a message, a repeated field and two strings per
// label) for every series of a family before serialising it, which was most
// of the render time and, at 10,000 cgroups, tens of MB of short-lived heap.
// The bytes are the same as SerializeDelimitedToZeroCopyStream() writes
// (fields in number order; tests/unit/exposition_test.cc parses them back
// with the generated classes).
namespace wire {
// Tags: (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited).
constexpr char kFamilyName = 0x0a, kFamilyHelp = 0x12, kFamilyType = 0x18, kFamilyMetric = 0x22;
constexpr char kMetricLabel = 0x0a, kMetricGauge = 0x12, kMetricCounter = 0x1a;
constexpr char kLabelName = 0x0a, kLabelValue = 0x12;
constexpr char kValueDouble = 0x09;
constexpr uint64_t kTypeCounter = 0, kTypeGauge = 1;

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void Bytes(std::string& out, char tag, absl::string_view s) {
  out += tag;
  Varint(out, s.size());
  out.append(s.data(), s.size());
}
size_t BytesSize(size_t len) { return 1 + VarintSize(len) + len; }
}  // namespace wire

class ProtoWriter final : public MetricWriter {
 public:
  void Family(absl::string_view name, absl::string_view help, MetricKind kind) override {
    Flush();
    // A family taken as the output left family_ without room: make it for
    // one as large as the last, now that the last one is gone (streamed).
    if (family_.capacity() < last_family_) family_.reserve(last_family_ + last_family_ / 8);
    family_.assign(kPrefixRoom, '\0');
    counter_ = kind == MetricKind::kCounter;
    wire::Bytes(family_, wire::kFamilyName, name);
    wire::Bytes(family_, wire::kFamilyHelp, help);
    family_ += wire::kFamilyType;
    wire::Varint(family_, counter_ ? wire::kTypeCounter : wire::kTypeGauge);
    header_size_ = family_.size();
  }

  void Value(const std::vector<LabelRef>& base, std::initializer_list<LabelRef> extra, double value) override {
    // Label values as in the text format: valid UTF-8 (EscapeLabelValue).
    escaped_.clear();
    size_t metric_size = 0;
    auto measure = [&](const LabelRef& l) {
      escaped_.push_back(LabelValueIsClean(l.value) ? std::string() : EscapeLabelValue(l.value));
      absl::string_view v = escaped_.back().empty() ? l.value : escaped_.back();
      metric_size += wire::BytesSize(wire::BytesSize(l.name.size()) + wire::BytesSize(v.size()));
    };
    for (const LabelRef& l : base) measure(l);
    for (const LabelRef& l : extra) measure(l);
    metric_size += 1 + 1 + 1 + 8;  // gauge|counter { value: double }

    family_ += wire::kFamilyMetric;
    wire::Varint(family_, metric_size);
    size_t i = 0;
    auto write = [&](const LabelRef& l) {
      absl::string_view v = escaped_[i].empty() ? l.value : escaped_[i];
      ++i;
      family_ += wire::kMetricLabel;
      wire::Varint(family_, wire::BytesSize(l.name.size()) + wire::BytesSize(v.size()));
      wire::Bytes(family_, wire::kLabelName, l.name);
      wire::Bytes(family_, wire::kLabelValue, v);
    };
    for (const LabelRef& l : base) write(l);
    for (const LabelRef& l : extra) write(l);
    family_ += counter_ ? wire::kMetricCounter : wire::kMetricGauge;
    family_ += static_cast<char>(9);  // the Gauge/Counter message: one tagged double
    family_ += wire::kValueDouble;
    char le[8];
    std::memcpy(le, &value, 8);  // x86-64 and arm64 are little-endian, as the wire format
    family_.append(le, 8);
  }

  std::string TakeFinished() override { return std::exchange(out_, std::string()); }
  std::string Finish() override {
    Flush();
    return std::move(out_);
  }

 private:
  // family_ starts with room for its length prefix (a varint of at most 10
  // bytes), so that a finished family can become the output itself when
  // nothing is before it (a stream takes the output after every family)
  // instead of being copied behind its prefix: a family of 10,000 cgroups
  // is about 1 MB.
  static constexpr size_t kPrefixRoom = 10;

  void Flush() {
    // Prometheus rejects families without samples in the protobuf format.
    if (family_.size() > header_size_) {
      std::string prefix;
      wire::Varint(prefix, family_.size() - kPrefixRoom);
      if (out_.empty()) {
        const size_t skip = kPrefixRoom - prefix.size();
        family_.replace(skip, prefix.size(), prefix);
        family_.erase(0, skip);
        last_family_ = family_.size();
        out_ = std::move(family_);
        family_ = std::string();
      } else {
        out_ += prefix;
        out_.append(family_, kPrefixRoom, std::string::npos);
      }
    }
    family_.clear();  // keeps its capacity: one family's worth, reused
    header_size_ = 0;
  }

  std::string out_;
  std::string family_;  // the open family, after room for its length prefix
  size_t header_size_ = 0;
  size_t last_family_ = 0;  // size of the last family taken as the output
  bool counter_ = false;
  std::vector<std::string> escaped_;  // per label of the current series; empty = the value as it is
};

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the protobuf wire format stores doubles little-endian");

}  // namespace

std::unique_ptr<MetricWriter> NewProtoWriter() { return std::make_unique<ProtoWriter>(); }

}  // namespace sockpressure
