// A streaming sink for metric families. The snapshot is written family by
// family straight into the output format, so a scrape of 10,000 cgroups never
// materialises 300,000 metric objects. Implementations: text exposition
// (text_writer.cc) and the protobuf exposition (proto_writer.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "prometheus/metric_family.h"

namespace sockpressure {

enum class MetricKind { kCounter, kGauge };

struct LabelRef {
  absl::string_view name;
  absl::string_view value;
};

// Not thread-safe; one writer per response.
class MetricWriter {
 public:
  virtual ~MetricWriter() = default;
  // Starts a family. Every Value() until the next Family() belongs to it;
  // a family given no Value() is left out of the output (both formats), so
  // a writer may start a family it turns out to have no series for.
  virtual void Family(absl::string_view name, absl::string_view help, MetricKind kind) = 0;
  // One series. `base` is the shared label set (e.g. cgroup identity) and
  // `extra` the family's own labels, appended after it.
  virtual void Value(const std::vector<LabelRef>& base, std::initializer_list<LabelRef> extra, double value) = 0;
  // Families collected by prometheus-cpp (the agent's own HTTP metrics),
  // written through Family()/Value(); counters and gauges only.
  void PromCppFamilies(const std::vector<prometheus::MetricFamily>& families);
  // Returns the output of the families written so far, as far as it is
  // final, and forgets it: a caller streaming the exposition takes it after
  // each family it wrote (the text of an open family may come out in two
  // takes; protobuf keeps the open family until it is complete).
  virtual std::string TakeFinished() = 0;
  // Finishes the output and returns what was not taken yet.
  virtual std::string Finish() = 0;
};

// A piece of an exposition: whole families, written in order into the
// writer it is given. Parts let a response be rendered and sent a piece at a
// time instead of as one body of every family.
using MetricsPart = std::function<void(MetricWriter&)>;

}  // namespace sockpressure
