#include "absl/strings/string_view.h"
#include "exporter/outputs/text_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "exporter/common/label_escape.h"

namespace sockpressure {
namespace {

void AppendEscaped(std::string& out, absl::string_view s, bool is_help) {
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '"':
        if (is_help) out += '"';
        else out += "\\\"";
        break;
      default: out += c;
    }
  }
}

bool PlainAscii(absl::string_view s) {
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0x80) != 0 || c == '\\' || c == '"' || c == '\n') return false;
  }
  return true;
}

void AppendValue(std::string& out, double v) {
  if (std::isnan(v)) { out += "NaN"; return; }
  if (std::isinf(v)) { out += v > 0 ? "+Inf" : "-Inf"; return; }
  char buf[64];
  std::to_chars_result r;
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
  } else {
    r = std::to_chars(buf, buf + sizeof buf, v);
  }
  out.append(buf, r.ptr);
}

class TextWriter final : public MetricWriter {
 public:
  TextWriter() { out_.reserve(1 << 16); }

  void Family(absl::string_view name, absl::string_view help, MetricKind kind) override {
    // The header is written with the first series, so a family with no
    // series (e.g. no cgroup has the file) leaves no dangling HELP/TYPE.
    name_ = std::string(name);
    header_.clear();
    absl::StrAppend(&header_, "# HELP ", name, " ");
    AppendEscaped(header_, help, true);
    absl::StrAppend(&header_, "\n# TYPE ", name, kind == MetricKind::kCounter ? " counter\n" : " gauge\n");
  }

  void Value(const std::vector<LabelRef>& base, std::initializer_list<LabelRef> extra, double value) override {
    if (!header_.empty()) {  // a family's first series
      // Output taken by a stream left out_ without room: make it for a piece
      // as large as the last, instead of growing by doubling (1.5x the piece
      // during each reallocation, up to 2x left over). Once per family, not
      // per series.
      if (out_.capacity() < last_take_) out_.reserve(last_take_ + last_take_ / 8);
      out_ += header_;
      header_.clear();
    }
    out_ += name_;
    if (!base.empty() || extra.size() > 0) {
      out_ += '{';
      bool first = true;
      auto add = [&](const LabelRef& l) {
        if (!first) out_ += ',';
        first = false;
        out_.append(l.name.data(), l.name.size());
        out_ += "=\"";
        // Fast path: plain ASCII with nothing to escape (nearly every cgroup
        // path) is appended whole.
        if (PlainAscii(l.value)) out_.append(l.value.data(), l.value.size());
        // Label values must be valid UTF-8: cgroup names may not be.
        else if (LabelValueIsClean(l.value)) AppendEscaped(out_, l.value, false);
        else AppendEscaped(out_, EscapeLabelValue(l.value), false);
        out_ += '"';
      };
      for (const LabelRef& l : base) add(l);
      for (const LabelRef& l : extra) add(l);
      out_ += '}';
    }
    out_ += ' ';
    AppendValue(out_, value);
    out_ += '\n';
  }

  std::string TakeFinished() override {
    last_take_ = std::max(last_take_, out_.size());
    return std::exchange(out_, std::string());
  }
  std::string Finish() override { return std::move(out_); }

 private:
  std::string out_;
  size_t last_take_ = 0;  // the largest output taken so far
  std::string name_;
  std::string header_;
};

}  // namespace

void MetricWriter::PromCppFamilies(const std::vector<prometheus::MetricFamily>& families) {
  for (const prometheus::MetricFamily& f : families) {
    bool counter = f.type == prometheus::MetricType::Counter;
    Family(f.name, f.help, counter ? MetricKind::kCounter : MetricKind::kGauge);
    for (const prometheus::ClientMetric& m : f.metric) {
      std::vector<LabelRef> labels;
      for (const auto& l : m.label) labels.push_back({l.name, l.value});
      Value(labels, {}, counter ? m.counter.value : m.gauge.value);
    }
  }
}

std::unique_ptr<MetricWriter> NewTextWriter() { return std::make_unique<TextWriter>(); }

std::string FormatSampleValue(double value) {
  std::string s;
  AppendValue(s, value);
  return s;
}

}  // namespace sockpressure
